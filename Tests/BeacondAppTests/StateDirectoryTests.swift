// The state directory shared by beacond processes: one per device (StateLock), and records that keep every
// device's lines (OwnershipStore, AddressStore), against a real directory.
@testable import BeacondApp
import BluetoothHCI
import DaemonCore
import Glibc
import SystemCalls
import Testing

/// A lock whose device claims are this test's own: tests run side by side in one process, and a beacond may run
/// on the machine.
private func lock(_ directory: String) -> StateLock {
    StateLock(directory: directory, claimPrefix: "beacond-test-\(getpid())/\(directory)/")
}

private func temporaryDirectory() -> String {
    var template = Array("/tmp/beacond-state-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
}

@Suite("state directory")
struct StateDirectoryTests {
    @Test("bug: nothing locked the state directory; one process per device now, another device free, the holder's pid said")
    func oneProcessPerDevice() throws {
        let d = temporaryDirectory()
        // Two locks stand for two processes: flock(2) conflicts between open file descriptions, also in one process.
        let prefix = "beacond-test-\(getpid())/device/"
        let service = StateLock(directory: d, claimPrefix: prefix), byHand = StateLock(directory: d, claimPrefix: prefix)
        #expect(service.acquire("hci0") == nil)
        let refused = byHand.acquire("hci0")?.description
        #expect(refused == "another beacond (pid \(getpid())) is running on hci0: stop it first (one controller takes one beacond, whatever its state directory: beacond.service and beacond@hci0.service are two)")
        #expect(byHand.acquire("hci1") == nil)
        // A process that moves to another device lets go of the first.
        #expect(service.acquire("hci2") == nil)
        #expect(byHand.acquire("hci0") == nil)
    }

    @Test("bug: the device lock lived in the state directory; two directories, or none, now meet at the device's claim")
    func oneProcessPerDeviceWhateverTheDirectory() throws {
        let prefix = "beacond-test-\(getpid())/claim/"
        let one = StateLock(directory: temporaryDirectory(), claimPrefix: prefix)
        let two = StateLock(directory: temporaryDirectory(), claimPrefix: prefix)
        let none = StateLock(directory: "/proc/no-state-directory-here", claimPrefix: prefix)
        #expect(one.acquire("hci0") == nil)
        #expect(two.acquire("hci0")?.kind == .busy)
        #expect(none.acquire("hci0")?.kind == .busy)
        #expect(none.acquire("hci1") == nil)
        // A name too long for a socket address is claimed by its digest, as surely.
        let long = "unix:/" + String(repeating: "d/", count: 40) + "hci.sock"
        #expect(one.acquire(long) == nil)
        #expect(two.acquire(long)?.kind == .busy)
        #expect(StateLock.claimName(for: long).utf8.count <= 107)
    }

    @Test("a device's lock file name: letters, digits, '.' and '-' as they are, the rest as %XX", arguments: [
        ("hci0", "lock.hci0"), ("unix:/run/a_b", "lock.unix%3A%2Frun%2Fa%5Fb"), ("tcp:127.0.0.1:9", "lock.tcp%3A127.0.0.1%3A9"),
    ])
    func lockFileName(device: String, name: String) {
        #expect(StateLock.fileName(for: device) == name)
    }

    /// Each process read the record once and wrote its whole copy back: a beacond on hci1 that read the file before
    /// the one on hci0 changed it put its stale copy back at its next change, dropping hci0's sets. A kill then left
    /// them on the controller for good.
    @Test("bug: a record written by two processes lost the other device's lines; each change now keeps them")
    func recordsKeepOtherDevices() throws {
        let d = temporaryDirectory()
        let log = Logger(level: .err)
        let a = OwnershipStore(directory: d, log: log), b = OwnershipStore(directory: d, log: log)
        #expect(b["hci1", .hciSets].isEmpty)  // b has read the (empty) record
        a["hci0", .hciSets] = [1]
        b["hci1", .hciSets] = [2]
        a["hci0", .hciSets] = [1, 3]
        let text = String(decoding: try FileDescriptor.readFile("\(d)/owned", limit: 4096), as: UTF8.self)
        let record = OwnershipRecord(parsing: text)
        #expect(record["hci0", .hciSets] == [1, 3])
        #expect(record["hci1", .hciSets] == [2])
    }

    /// A FIFO where the lock file belongs was taken as the lock (and, held by another process, hung the reader of its
    /// "pid" forever); a hard link as the lock file had its other name's contents replaced by a pid (review #43).
    @Test("bug: a lock file that is no regular file of one link was used; it is refused, and nothing is written to it")
    func lockFileKinds() throws {
        let d = temporaryDirectory()
        #expect(mkfifo("\(d)/lock.hci0", 0o600) == 0)
        let fifo = lock(d).acquire("hci0")?.description
        #expect(fifo?.contains("not a regular file") == true, "\(fifo ?? "taken")")
        let victim = "\(d)/victim"
        let fd = open(victim, O_WRONLY | O_CREAT, 0o600)
        _ = write(fd, "precious\n", 9)
        close(fd)
        #expect(link(victim, "\(d)/lock.hci1") == 0)
        let linked = lock(d).acquire("hci1")?.description
        #expect(linked?.contains("2 links") == true, "\(linked ?? "taken")")
        #expect(String(decoding: try FileDescriptor.readFile(victim, limit: 64), as: UTF8.self) == "precious\n")
        #expect(symlink(victim, "\(d)/lock.hci2") == 0)
        #expect(lock(d).acquire("hci2") != nil)
    }

    /// The refusal repeated what the lock file said: a pid left there by an earlier holder, not the process holding
    /// the lock now (review #43). The holder is named from the lock itself (/proc/locks).
    @Test("bug: the exit-75 message named a stale pid from the lock file's text; now the lock's holder")
    func holderFromTheLock() throws {
        let d = temporaryDirectory()
        let fd = open("\(d)/lock.hci0", O_RDWR | O_CREAT, 0o600)
        defer { close(fd) }
        _ = write(fd, "999999\n", 7)
        #expect(flock(fd, LOCK_EX) == 0)
        let refused = lock(d).acquire("hci0")?.description
        #expect(refused?.contains("(pid \(getpid()))") == true, "\(refused ?? "taken")")
        #expect(refused?.contains("999999") == false)
    }

    /// Root's beacond used a state directory another user could write or owned: their `addresses` chose the address
    /// root's beacon advertised from, their `owned` what root removed, their lock file what root waited on (review
    /// #43). The directory is opened as the runtime directory is: this user's own, written by no one else.
    @Test("bug: a state directory of another user's, or one others may write, was used; it is refused", arguments: [
        (0o777 as mode_t, 0 as uid_t),      // anyone may write it
        (0o1777, 0),                        // sticky: others still make the names beacond uses
        (0o775, 0),                         // its group may write it
        (0o755, 65534),                     // another user's (the service's dynamic user, or nobody)
    ])
    func untrustedDirectories(mode: mode_t, owner: uid_t) throws {
        let d = temporaryDirectory()
        #expect(chmod(d, mode) == 0 && chown(d, owner, owner) == 0)
        let refused = lock(d).acquire("hci0")?.description
        #expect(refused != nil, "taken in a directory of mode \(String(mode, radix: 8)) owned by \(owner)")
        #expect(refused?.contains("\(d)") == true)
    }

    /// Root's own directory, but reached through another user's: they can rename it away and put theirs in its place,
    /// or point their symlink at any directory of root's (/etc/cron.d) for beacond to write its files into.
    @Test("bug: a state directory reached through another user's directory or symlink was used; it is refused, a root symlink followed")
    func untrustedPaths() throws {
        let d = temporaryDirectory()
        #expect(mkdir("\(d)/theirs", 0o755) == 0 && mkdir("\(d)/theirs/state", 0o700) == 0 && chown("\(d)/theirs", 65534, 65534) == 0)
        let under = lock("\(d)/theirs/state").acquire("hci0")?.description
        #expect(under?.contains("is reached through \(d)/theirs, which belongs to user 65534") == true, "\(under ?? "taken")")
        #expect(mkdir("\(d)/roots", 0o700) == 0 && symlink("\(d)/roots", "\(d)/link") == 0 && lchown("\(d)/link", 65534, 65534) == 0)
        let linked = lock("\(d)/link").acquire("hci0")?.description
        #expect(linked?.contains("is reached through \(d)/link, which belongs to user 65534") == true, "\(linked ?? "taken")")
        // A symlink of root's, as systemd's /var/lib/beacond -> private/beacond for DynamicUser=: followed.
        #expect(symlink("roots", "\(d)/rootlink") == 0)
        #expect(lock("\(d)/rootlink").acquire("hci0") == nil)
        #expect(fileExists("\(d)/roots/lock.hci0"))
    }

    /// A lock file this process cannot open (root's, left by a hand run with umask 077 in the service's directory)
    /// was no lock at all: the service ran without one, beside a second beacond (review #43).
    @Test("bug: a lock file that could not be opened counted as no conflict; it is an error now")
    func unopenableLock() throws {
        let d = temporaryDirectory()
        let fd = open("\(d)/lock.hci0", O_RDWR | O_CREAT, 0o600)
        close(fd)
        #expect(chown("\(d)/lock.hci0", 65534, 65534) == 0)
        let refused = lock(d).acquire("hci0")?.description
        #expect(refused?.contains("belongs to user 65534") == true, "\(refused ?? "taken")")
    }

    /// The aliases people have: the Pi's /dev/serial0 (a symlink to ttyAMA0 or ttyS0), /dev/serial/by-id/… (to
    /// ../../ttyACM0), a node of the same device made elsewhere, localhost for 127.0.0.1, `./` and `//` in a path.
    @Test("two spellings of one controller are one device; other controllers are not", arguments: [
        ("serial:/dev/serial0", "serial:/dev/ttyAMA0:921600", true),
        ("serial:/dev/serial/by-id/usb-Nordic_nRF52-if00", "serial:/dev/ttyACM0", true),
        ("serial:/srv/chroot/dev/ttyACM0", "serial:/dev/ttyACM0", true),   // another node, the same st_rdev
        ("serial:/dev/ttyACM1", "serial:/dev/ttyACM0", false),
        ("unix:/run/x/./m.sock", "unix:/run/x/m.sock", true),
        ("unix:/run/x//m.sock", "unix:/run/link/m.sock", true),           // /run/link -> /run/x
        ("unix:/run/x/new.sock", "unix:/run/x/./new.sock", true),          // not made yet: through its directory
        ("unix:/run/x/m.sock", "unix:/run/x/n.sock", false),
        ("tcp:localhost:9", "tcp:127.0.0.1:9", true),
        ("tcp:localhost:9", "tcp:[::1]:9", true),
        ("tcp:localhost:9", "tcp:127.0.0.1:10", false),
        ("hci0", "hci1", false),
        ("hci0", "hci0", true),
    ])
    func deviceAliases(a: String, b: String, same: Bool) {
        let links = ["/dev/serial0": "/dev/ttyAMA0", "/dev/serial/by-id/usb-Nordic_nRF52-if00": "/dev/ttyACM0", "/dev/ttyACM0": "/dev/ttyACM0",
                     "/dev/ttyACM1": "/dev/ttyACM1", "/dev/ttyAMA0": "/dev/ttyAMA0", "/srv/chroot/dev/ttyACM0": "/srv/chroot/dev/ttyACM0",
                     "/run/x/m.sock": "/run/x/m.sock", "/run/x/./m.sock": "/run/x/m.sock", "/run/x//m.sock": "/run/x/m.sock",
                     "/run/link/m.sock": "/run/x/m.sock", "/run/x/n.sock": "/run/x/n.sock", "/run/x": "/run/x", "/run/x/.": "/run/x"]
        let nodes: [String: UInt64] = ["/dev/ttyAMA0": 0xCC40, "/dev/ttyACM0": 0xA600, "/srv/chroot/dev/ttyACM0": 0xA600, "/dev/ttyACM1": 0xA601]
        let facts = DeviceIdentity.Facts(realPath: { links[$0] },
                                         file: { p in nodes[p].map { FileIdentity(device: 5, inode: $0 + 1000, characterDevice: $0) } },
                                         addresses: { host in host == "localhost" ? ["::1", "127.0.0.1"] : [host] })
        let x = DeviceIdentity(a, facts: facts), y = DeviceIdentity(b, facts: facts)
        #expect(x.overlaps(y) == same, "\(x.names) \(y.names)")
    }

    /// Root's `status` called any $XDG_RUNTIME_DIR/beacond/ "beacond.service", whoever owned it (review #43).
    @Test("only /run/beacond and /run/beacond-* of root's or the units' user are units", arguments: [
        ("/run/beacond", 0 as UInt32, "beacond.service" as String?),
        ("/run/beacond-hci1", 61_875, "beacond@hci1.service"),     // the units' dynamic user, nameless here
        ("/run/beacond-hci1", 990, "beacond@hci1.service"),        // a static user named beacond
        ("/run/beacond", 1000, nil),                                 // another user's
        ("/run/user/0/beacond", 0, nil),                             // $XDG_RUNTIME_DIR/beacond
        ("/run/beacond.4242", 0, nil),                               // a hand run
        ("/run/beacond-", 0, nil),
    ])
    func units(path: String, owner: UInt32, unit: String?) {
        #expect(RuntimeStateFile.unit(ofDirectory: path, owner: owner, nameOf: { $0 == 990 ? "beacond" : "alice" }) == unit)
    }
}

/// The encrypted BTHome self-report's counters in a real state directory: each reservation is on disk before it is
/// answered, a new process (a store with nothing in memory) starts above it, and a damaged file is never read as 0.
@Suite("BTHome counters in the state directory")
struct SelfReportStoreTests {
    private let address = BluetoothAddress(parsing: "C6:12:34:56:78:9A")!

    @Test("a reservation is written before it is used; the next run's starts at its end; another address keeps its own")
    func persisted() throws {
        let d = temporaryDirectory()
        #expect(try SelfReportStore.reserve(address, from: 0, in: d, clock: 0) == CounterReservation(floor: 0, limit: CounterBook.block))
        // Ahead, half the block used: from the end of the last block.
        #expect(try SelfReportStore.reserve(address, from: CounterBook.block, in: d, clock: 0) == CounterReservation(floor: CounterBook.block, limit: 2 * CounterBook.block))
        // A restart (or a crash) in the second block: the next run's first block starts above everything reserved.
        #expect(try SelfReportStore.reserve(address, from: 0, in: d, clock: 0) == CounterReservation(floor: 2 * CounterBook.block, limit: 3 * CounterBook.block))
        let other = BluetoothAddress(parsing: "D0:00:00:00:00:01")!
        #expect(try SelfReportStore.reserve(other, from: 0, in: d, clock: 0) == CounterReservation(floor: 0, limit: CounterBook.block))
        let text = String(decoding: try FileDescriptor.readFile("\(d)/bthome-counters", limit: 4096), as: UTF8.self)
        #expect(try CounterBook(parsing: text).entries == [address: 3 * CounterBook.block, other: CounterBook.block])
        #expect(SelfReportStore.peek(address, in: d, clock: 0) == 3 * CounterBook.block)
        // #52: the wall clock as a floor, on disk too: a book restored from a backup starts above the clock.
        let now = UInt32(clamping: wallClock().seconds)
        #expect(try SelfReportStore.reserve(address, from: 0, in: d).floor >= now)
        #expect(SelfReportStore.peek(other, in: d)! >= now)
    }

    @Test("the supply: the kept static address from `addresses` (made if missing) and its counters, in one answer")
    func supply() throws {
        let d = temporaryDirectory()
        let s = SelfReportStore.supply(SelfReportNeeds(addressKey: "bthome", countersFrom: 0), in: d, clock: 0)
        let a = try #require(s.address)
        #expect(a.isStatic && s.counters == CounterReservation(floor: 0, limit: CounterBook.block) && s.failure == nil)
        let addresses = String(decoding: try FileDescriptor.readFile("\(d)/addresses", limit: 4096), as: UTF8.self)
        #expect(addresses.contains("\(a) bthome\n"))
        #expect(SelfReportStore.supply(SelfReportNeeds(addressKey: "bthome", countersFrom: 0), in: d).address == a)
    }

    @Test("a damaged counters file is an error naming its line, and stays as it was")
    func damaged() throws {
        let d = temporaryDirectory()
        try createFileDurably(named: "bthome-counters", in: d, contents: Array("C6:12:34:56:78:9A 5000\nC6:12:34:56:78:9A oops\n".utf8))
        #expect(throws: SelfReportStore.Failure.self) { try SelfReportStore.reserve(address, from: 0, in: d) }
        let s = SelfReportStore.supply(SelfReportNeeds(address: address, countersFrom: 0), in: d)
        #expect(s.counters == nil && s.failure == "\(d)/bthome-counters:2: not an address followed by a counter (0 to 4294967295); fix that line (a number only ever goes up)")
        let text = String(decoding: try FileDescriptor.readFile("\(d)/bthome-counters", limit: 4096), as: UTF8.self)
        #expect(text == "C6:12:34:56:78:9A 5000\nC6:12:34:56:78:9A oops\n")
    }
}
