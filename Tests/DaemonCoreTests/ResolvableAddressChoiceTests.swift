// address = "resolvable" in the daemon: each rotation a new prand, an address that resolves under the beacon's key
// (libgcrypt's AES, the same as the daemon's), the rotation timer at address_rotation_s, and the key going with the
// schedule to the backend.
import AESCipher
import BeaconCore
import BluetoothHCI
@testable import DaemonCore
import HCIHost
import Testing

private let cipher: BlockCipher = { key, block in try AES128.encrypt(block, key: key) }
private let irk = IdentityKey(hex: "ec0234a357c8ad05341010a60a397d9b")!
private let other = IdentityKey(hex: "00112233445566778899aabbccddeeff")!
private func none(_: [String]) -> Result<[String: BluetoothAddress], AddressChoice.StaticFailure> { .success([:]) }

private func random(_ a: OwnAddress) -> BluetoothAddress? { if case .random(let r) = a { r } else { nil } }

@Suite("resolvable addresses in the daemon")
struct ResolvableAddressChoiceTests {
    @Test("one address per beacon and period, resolving under its key and no other; a new prand each period")
    func rotation() throws {
        var c = AddressChoice()
        var draws: [[UInt8]] = [[0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12], [13, 14, 15, 16, 17, 18], [19, 20, 21, 22, 23, 24]]
        let bytes = { () -> [UInt8]? in draws.isEmpty ? nil : draws.removeFirst() }
        let wanted = [BeaconAddressWanted(.policy(.resolvable), key: "a", resolvingKey: irk),
                      BeaconAddressWanted(.policy(.resolvable), key: "b", resolvingKey: other)]
        let first = try c.choose(wanted, generation: 1, loadStatic: none, randomBytes: bytes, cipher: cipher).get().addresses.map(random)
        let a = try #require(first[0]), b = try #require(first[1])
        #expect(a.kind == .resolvable && b.kind == .resolvable)
        #expect(ResolvableAddress.resolves(a, irk: irk.bytes, cipher: cipher) && !ResolvableAddress.resolves(a, irk: other.bytes, cipher: cipher))
        #expect(ResolvableAddress.resolves(b, irk: other.bytes, cipher: cipher) && !ResolvableAddress.resolves(b, irk: irk.bytes, cipher: cipher))
        // The same period: the same addresses, nothing drawn.
        let again = try c.choose(wanted, generation: 1, loadStatic: none, randomBytes: { nil }, cipher: cipher).get().addresses.map(random)
        #expect(again == first)
        // The next period: a new prand, and it still resolves.
        let next = try c.choose(wanted, generation: 2, loadStatic: none, randomBytes: bytes, cipher: cipher).get().addresses.map(random)
        let a2 = try #require(next[0])
        #expect(Array(a2.wire.suffix(3)) != Array(a.wire.suffix(3)))
        #expect(ResolvableAddress.resolves(a2, irk: irk.bytes, cipher: cipher))
    }

    @Test("a reload that changes the key or the kind gets a new address within the period; no key or no cipher is a refusal")
    func changes() throws {
        var c = AddressChoice()
        var n: UInt8 = 0
        let bytes = { () -> [UInt8]? in n += 1; return [n, n &* 7, n &* 13, 4, 5, 6] }
        let one = try c.choose([BeaconAddressWanted(.policy(.resolvable), key: "a", resolvingKey: irk)], generation: 1, loadStatic: none,
                               randomBytes: bytes, cipher: cipher).get().addresses.map(random)
        let rekeyed = try c.choose([BeaconAddressWanted(.policy(.resolvable), key: "a", resolvingKey: other)], generation: 1, loadStatic: none,
                                   randomBytes: bytes, cipher: cipher).get().addresses.map(random)
        let r = try #require(rekeyed[0])
        #expect(rekeyed != one && ResolvableAddress.resolves(r, irk: other.bytes, cipher: cipher))
        let rotating = try c.choose([BeaconAddressWanted(.policy(.rotating), key: "a")], generation: 1, loadStatic: none,
                                    randomBytes: bytes, cipher: cipher).get().addresses.map(random)
        #expect(rotating[0]?.kind == .nonResolvable)
        let noKey = c.choose([BeaconAddressWanted(.policy(.resolvable), key: "b")], generation: 1, loadStatic: none, randomBytes: bytes, cipher: cipher)
        #expect(throws: AddressChoice.Refusal.self) { try noKey.get() }
        let noCipher = c.choose([BeaconAddressWanted(.policy(.resolvable), key: "c", resolvingKey: irk)], generation: 1, loadStatic: none, randomBytes: bytes)
        #expect(throws: AddressChoice.Refusal.self) { try noCipher.get() }
    }

    @Test("the rotation timer runs at address_rotation_s; each tick asks for a new address generation with the key in the schedule")
    func lifecycle() throws {
        let text = "[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\naddress = \"resolvable\"\nresolving_key_file = \"k\"\n"
            + "[advertising]\naddress_rotation_s = 2\n[controller]\ndevice = \"tcp:127.0.0.1:9\"\n"
        var config = try BeaconConfiguration.parse(Array(text.utf8))
        config.setKey(irk, for: config.keyFiles[0])
        var lc = Lifecycle(config: config, configPath: "/c", seed: 1)
        #expect(lc.rotatesAddress)
        let start = lc.handle(.start)
        #expect(start.contains(.armPeriodic(.addressRotation, .seconds(2))))
        let first = try #require(lc.handle(.opened()).compactMap { if case .apply(let s, _) = $0 { s } else { nil } }.first)
        #expect(first.addresses.map(\.resolvingKey) == [irk] && first.addressGeneration == 0)
        _ = lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended", "resolvable address 4A:00:00:00:00:01"])))
        let tick = lc.handle(.addressPeriod)
        #expect(tick.contains(.armPeriodic(.addressRotation, .seconds(2))))
        let next = try #require(tick.compactMap { if case .apply(let s, _) = $0 { s } else { nil } }.first)
        #expect(next.addressGeneration == 1 && next.addresses.map(\.resolvingKey) == [irk])
    }
}
