// The state directory shared by beacond processes: one per device (StateLock), and records that keep every
// device's lines (OwnershipStore, AddressStore), against a real directory.
@testable import BeacondApp
import BluetoothHCI
import DaemonCore
import Glibc
import SystemCalls
import Testing

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
        let service = StateLock(directory: d), byHand = StateLock(directory: d)
        #expect(service.acquire("hci0") == nil)
        let refused = byHand.acquire("hci0")
        #expect(refused == "another beacond (pid \(getpid())) is running on hci0 with the state directory \(d): stop it first, or give this one a state directory of its own (STATE_DIRECTORY=/tmp/beacond-hci0)")
        #expect(byHand.acquire("hci1") == nil)
        // A process that moves to another device lets go of the first.
        #expect(service.acquire("hci2") == nil)
        #expect(byHand.acquire("hci0") == nil)
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
}

/// The encrypted BTHome self-report's counters in a real state directory: each reservation is on disk before it is
/// answered, a new process (a store with nothing in memory) starts above it, and a damaged file is never read as 0.
@Suite("BTHome counters in the state directory")
struct SelfReportStoreTests {
    private let address = BluetoothAddress(parsing: "C6:12:34:56:78:9A")!

    @Test("a reservation is written before it is used; the next run's starts at its end; another address keeps its own")
    func persisted() throws {
        let d = temporaryDirectory()
        #expect(try SelfReportStore.reserve(address, from: 0, in: d) == CounterReservation(floor: 0, limit: 1000))
        // Ahead, while the counter is at 500: from the end of the last block.
        #expect(try SelfReportStore.reserve(address, from: 1000, in: d) == CounterReservation(floor: 1000, limit: 2000))
        // A restart (or a crash) at counter 1500: the next run's first block starts above everything reserved.
        #expect(try SelfReportStore.reserve(address, from: 0, in: d) == CounterReservation(floor: 2000, limit: 3000))
        let other = BluetoothAddress(parsing: "D0:00:00:00:00:01")!
        #expect(try SelfReportStore.reserve(other, from: 0, in: d) == CounterReservation(floor: 0, limit: 1000))
        let text = String(decoding: try FileDescriptor.readFile("\(d)/bthome-counters", limit: 4096), as: UTF8.self)
        #expect(try CounterBook(parsing: text).entries == [address: 3000, other: 1000])
        #expect(SelfReportStore.peek(address, in: d) == 3000)
    }

    @Test("the supply: the kept static address from `addresses` (made if missing) and its counters, in one answer")
    func supply() throws {
        let d = temporaryDirectory()
        let s = SelfReportStore.supply(SelfReportNeeds(addressKey: "bthome", countersFrom: 0), in: d)
        let a = try #require(s.address)
        #expect(a.isStatic && s.counters == CounterReservation(floor: 0, limit: 1000) && s.failure == nil)
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
