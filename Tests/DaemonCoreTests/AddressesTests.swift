// Which address each beacon advertises from: the kept static addresses per identity (the book, its file, the
// upgrade from one address), the fall back when none can be kept, chosen and rotating addresses.
import BeaconCore
import BluetoothHCI
@testable import DaemonCore
import HCIHost
import Testing

private let kept: BluetoothAddress = [0x9A, 0x78, 0x56, 0x34, 0x12, 0xC6]
private let other: BluetoothAddress = [0x01, 0x02, 0x03, 0x04, 0x05, 0xD0]

private func w(_ setting: BeaconAddressSetting?, _ key: String) -> BeaconAddressWanted { BeaconAddressWanted(setting, key: key) }

@Suite("address book")
struct AddressBookTests {
    @Test("the first key of a new book gets the earlier version's one address; the rest fresh ones, never a taken one")
    func upgrade() throws {
        var book = AddressBook()
        var draws: [[UInt8]] = [kept.wire, [0, 0, 0, 0, 0, 0], other.wire]  // kept is taken, zeros make none: drawn again
        #expect(book.assign(["a", "b"], legacy: kept, random: { draws.removeFirst() }) == true)
        #expect(book.address(for: "a") == kept && book.address(for: "b") == other)
        #expect(draws.isEmpty)
        // Known keys: nothing changes, nothing is drawn; the legacy address goes only to a new book.
        #expect(book.assign(["b", "a"], legacy: other, random: { Issue.record("drew"); return nil }) == false)
    }

    /// Every identity ever configured stayed in the book: a fleet that renumbers its beacons reached the 1 MiB
    /// beacond reads, and the file was then damaged (every beacon off the air until someone removed it).
    @Test("bug: the book grew without bound; over its limit the oldest beacons not configured now go, never a current one")
    func bounded() throws {
        var book = AddressBook()
        var n: UInt8 = 0
        let random = { () -> [UInt8]? in n += 1; return [n, 0, 0, 0, 0, 0xC0] }
        #expect(book.assign(["kept"], legacy: nil, limit: 3, random: random) == true)
        for k in ["a", "b", "c", "d"] {
            #expect(book.assign(["kept", k], legacy: nil, limit: 3, random: random) == true)
        }
        // The oldest entries no longer configured (a, b) went; the current ones stayed, and so did their addresses.
        #expect(book.entries.map { $0.key } == ["kept", "c", "d"])
        #expect(book.address(for: "kept") == [1, 0, 0, 0, 0, 0xC0] && book.address(for: "d") == [5, 0, 0, 0, 0, 0xC0])
        // A config with more beacons than the limit keeps them all (the limit only drops what is not configured).
        #expect(book.assign(["w", "x", "y", "z"], legacy: nil, limit: 3, random: random) == true)
        #expect(book.entries.map { $0.key } == ["w", "x", "y", "z"])
        #expect(AddressBook.limit == 4096)
    }

    /// A reload that adds a beacon loads only the new identity: the cap then evicted the oldest entries, those of the
    /// beacons on the air here and on the other devices sharing the file (review #43).
    @Test("past the limit, an identity configured now (here or on another device: `keeping`) is never evicted")
    func keepsWhatIsConfigured() {
        var book = AddressBook()
        var n: UInt8 = 0
        let random = { () -> [UInt8]? in n += 1; return [n, 0, 0, 0, 0, 0xC0] }
        #expect(book.assign(["on air here", "on air there", "old"], legacy: nil, limit: 3, random: random) == true)
        #expect(book.assign(["new"], legacy: nil, keeping: ["on air here", "on air there"], limit: 3, random: random) == true)
        #expect(book.entries.map { $0.key } == ["on air here", "on air there", "new"])
    }

    @Test("the in-use file: each device's identities, any device name, its lines replaced by that device alone")
    func inUse() {
        var u = AddressesInUse()
        let changes = [u.set(["ibeacon E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 1 2"], for: "unix:/run/a b/m.sock"),
                       u.set(["eddystone-uid 00112233445566778899 aabbccddeeff"], for: "hci0"),
                       u.set(["eddystone-uid 00112233445566778899 aabbccddeeff"], for: "hci0")]
        #expect(changes == [true, true, false])
        let again = AddressesInUse(parsing: u.text + "garbage\n%zz x\n")
        #expect(again == u)
        #expect(again.all == ["ibeacon E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 1 2", "eddystone-uid 00112233445566778899 aabbccddeeff"])
        var v = again
        let removed = v.set([], for: "hci0")
        #expect(removed)
        #expect(v.all == ["ibeacon E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 1 2"])
    }

    @Test("chosen addresses are avoided; no random bytes is nil")
    func avoiding() {
        var book = AddressBook()
        var draws: [[UInt8]] = [other.wire, kept.wire]
        #expect(book.assign(["x"], legacy: nil, avoiding: [other], random: { draws.removeFirst() }) == true)
        #expect(book.address(for: "x") == kept)
        #expect(book.assign(["y"], legacy: nil, random: { nil }) == nil)
    }

    @Test("the file's text round-trips; comments and blank lines are skipped; a bad line is named")
    func file() throws {
        var book = AddressBook()
        var draws = [kept.wire, other.wire]
        _ = book.assign(["ibeacon E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 1 2", "eddystone-uid 00112233445566778899 aabbccddeeff"],
                        legacy: nil, random: { draws.removeFirst() })
        let text = book.text
        #expect(text.contains("C6:12:34:56:78:9A ibeacon E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 1 2\n"))
        #expect(try AddressBook(parsing: text) == book)
        #expect(try AddressBook(parsing: "\n# x\n\nC6:12:34:56:78:9A k\n").address(for: "k") == kept)
        #expect(throws: AddressBook.Damaged(line: 2, reason: "not a random static address followed by a beacon's identity")) {
            try AddressBook(parsing: "C6:12:34:56:78:9A k\n06:12:34:56:78:9A j\n")
        }
        #expect(throws: AddressBook.Damaged(line: 2, reason: "a second address for k")) {
            try AddressBook(parsing: "C6:12:34:56:78:9A k\nD0:05:04:03:02:01 k\n")
        }
    }
}

@Suite("address choice")
struct AddressChoiceTests {
    @Test("static: each beacon its own, loaded once per identity; public and chosen need nothing")
    func staticAddresses() throws {
        var c = AddressChoice()
        var asked: [[String]] = []
        let load = { (keys: [String]) -> Result<[String: BluetoothAddress], AddressChoice.StaticFailure> in
            asked.append(keys)
            return .success(Dictionary(uniqueKeysWithValues: keys.map { ($0, $0 == "a" ? kept : other) }))
        }
        let first = try c.choose([w(nil, "a"), w(.policy(.static), "b"), w(.policy(.public), "c"), w(.chosen([1, 1, 1, 1, 1, 0xE0]), "d")],
                                 generation: 0, loadStatic: load, randomBytes: { nil }).get()
        #expect(first.addresses == [.random(kept), .random(other), .public, .random([1, 1, 1, 1, 1, 0xE0])])
        #expect(asked == [["a", "b"]])
        // Reordered, and one beacon sharing another's identity (a TLM following its UID): no new load.
        let again = try c.choose([w(nil, "b"), w(nil, "a"), w(nil, "a")], generation: 0, loadStatic: load, randomBytes: { nil }).get()
        #expect(again.addresses == [.random(other), .random(kept), .random(kept)] && asked.count == 1)
    }

    @Test("no state directory: the default falls back to public with one warning and tries no more; explicit static is an error")
    func fallBack() throws {
        var c = AddressChoice()
        var loads = 0
        let none = { (_: [String]) -> Result<[String: BluetoothAddress], AddressChoice.StaticFailure> in
            loads += 1
            return .failure(.unavailable("Cannot keep a static address: mkdir /var/lib/beacond: EACCES"))
        }
        let first = try c.choose([w(nil, "a"), w(nil, "b")], generation: 0, loadStatic: none, randomBytes: { nil }).get()
        #expect(first.addresses == [.public, .public])
        #expect(first.warning?.hasSuffix("advertising from the controller's public address until it can be kept") == true)
        let second = try c.choose([w(nil, "a"), w(nil, "c")], generation: 0, loadStatic: none, randomBytes: { nil }).get()
        #expect(second == AddressChoice.Choice(addresses: [.public, .public], warning: nil) && loads == 1)
        var d = AddressChoice()
        #expect(throws: AddressChoice.Refusal(message: "Cannot keep a static address: mkdir /var/lib/beacond: EACCES")) {
            try d.choose([w(nil, "a"), w(.policy(.static), "b")], generation: 0, loadStatic: none, randomBytes: { nil }).get()
        }
    }

    @Test("a damaged file is an error even for the default: never silently new identities")
    func damaged() {
        var c = AddressChoice()
        let broken = { (_: [String]) -> Result<[String: BluetoothAddress], AddressChoice.StaticFailure> in .failure(.damaged("/var/lib/beacond/addresses:3: bad")) }
        #expect(throws: AddressChoice.Refusal.self) { try c.choose([w(nil, "a")], generation: 0, loadStatic: broken, randomBytes: { nil }).get() }
    }

    @Test("rotating: one non-resolvable address per beacon and period; bytes that make none are drawn again")
    func rotating() throws {
        var c = AddressChoice()
        var draws: [[UInt8]] = [[0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12], [13, 14, 15, 16, 17, 18]]
        let random = { () -> [UInt8]? in draws.isEmpty ? nil : draws.removeFirst() }
        let load = { (_: [String]) -> Result<[String: BluetoothAddress], AddressChoice.StaticFailure> in .success([:]) }
        let r = BeaconAddressSetting.policy(.rotating)
        let a = try c.choose([w(r, "a"), w(r, "b")], generation: 1, loadStatic: load, randomBytes: random).get().addresses
        #expect(a[0] != a[1])
        #expect(try c.choose([w(r, "a"), w(r, "b")], generation: 1, loadStatic: load, randomBytes: random).get().addresses == a)
        let b = try c.choose([w(r, "a")], generation: 2, loadStatic: load, randomBytes: random).get().addresses
        #expect(b[0] != a[0])
        guard case .random(let bytes) = b[0] else { Issue.record("not random"); return }
        #expect(bytes[5] & 0xC0 == 0)  // non-resolvable private: the top two bits 00
        #expect(throws: AddressChoice.Refusal.self) { try c.choose([w(r, "a")], generation: 3, loadStatic: load, randomBytes: random).get() }
    }
}
