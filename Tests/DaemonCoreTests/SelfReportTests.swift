// The BTHome self-report in the lifecycle: what it reports, when a new frame goes out, and the encrypted one's
// address and counters from the state directory (asked for before the first frame, reserved ahead, never reused
// across a restart); and the counters file as a value.
import AESCipher
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import Testing

private let seal: CCMSeal = { key, nonce, plaintext in try AESCCM.seal(plaintext, key: key, nonce: nonce) }
private let key = BindKey(hex: "0123456789abcdeffedcba9876543210")!
private let address = BluetoothAddress(parsing: "C6:12:34:56:78:9A")!
private let ibeacon = "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\n"

/// The config with its bindkey loaded, as ConfigLoader does.
private func config(_ text: String) throws -> BeaconConfiguration {
    var c = try BeaconConfiguration.parse(Array(text.utf8))
    for k in c.beacons.indices {
        if case .bthome(var b) = c.beacons[k].beacon, b.encrypted {
            b.bindkey = key
            c.beacons[k].beacon = .bthome(b)
        }
    }
    return c
}

private func applied(_ actions: [Lifecycle.Action]) -> AdvertisingSchedule? {
    actions.compactMap { if case .apply(let s, _) = $0 { s } else { nil } }.first
}

private func supplies(_ actions: [Lifecycle.Action]) -> [SelfReportNeeds] {
    actions.compactMap { if case .supplySelfReport(let n) = $0 { n } else { nil } }
}

private func encrypted(_ report: BTHomeReport, counter: UInt32) throws -> [UInt8] {
    BTHome.advertisingData(serviceData: try BTHome.encryptedServiceData(report.objects, key: key, address: address, counter: counter, seal: seal)).bytes
}

private let onAir = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended"],
                          beacons: [BeaconOnAir(every: .milliseconds(100), details: []), BeaconOnAir(every: .milliseconds(100), details: [])])

private func tenths(_ seconds: UInt32) -> Telemetry { Telemetry(uptimeTenths: seconds * 10) }

@Suite("BTHome self-report")
struct SelfReportTests {
    @Test("encrypted: the first apply waits for the address and counters, then sends counter 'floor' from that address")
    func firstFrameWaitsForItsSupply() throws {
        var lc = Lifecycle(config: try config(ibeacon + "[[beacon]]\nformat = \"bthome\"\nbindkey_file = \"k\"\n"), configPath: "/c", seed: 1, seal: seal)
        _ = lc.handle(.telemetry(tenths(0)))
        _ = lc.handle(.start)
        let opened = lc.handle(.opened())
        #expect(applied(opened) == nil)
        #expect(supplies(opened) == [SelfReportNeeds(addressKey: "bthome", avoiding: [], address: nil, countersFrom: 0)])
        let answer = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: 5000, limit: 6000))))
        let schedule = try #require(applied(answer))
        let expected = try encrypted(BTHomeReport(packetID: 1, beaconsOnAir: 1, problem: false, uptimeSeconds: 0), counter: 5000)
        #expect(schedule.beacons[1].data.bytes == expected)
        #expect(supplies(answer).isEmpty)  // 999 counters left: nothing to reserve yet
        _ = lc.handle(.applied(onAir))
        #expect(lc.phase == .advertising)
    }

    @Test("a new frame at the fifth tick, within the minute even when ticks come late (next packet id and counter, the new uptime), quietly")
    func everyMinute() throws {
        let c = try config(ibeacon + "[[beacon]]\nformat = \"bthome\"\nbindkey_file = \"k\"\n")
        var lc = Lifecycle(config: c, configPath: "/c", seed: 1, seal: seal)
        let first = lc.handle(.telemetry(tenths(0)))
        #expect(first.contains(.armPeriodic(.telemetry, Lifecycle.telemetryPeriod)))  // the self-report's uptime comes with it
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        _ = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: 5000, limit: 6000))))
        _ = lc.handle(.applied(onAir))
        for s: UInt32 in [10, 20, 30, 40] { #expect(applied(lc.handle(.telemetry(tenths(s)))) == nil, "\(s) s") }
        // The fifth tick: 50 s, a tick's worth before the minute (ticks can come late, and their delays add up).
        #expect(Lifecycle.selfReportPeriod == .seconds(60))
        let fifth = lc.handle(.telemetry(tenths(50)))
        let schedule = try #require(applied(fifth))
        let expected = try encrypted(BTHomeReport(packetID: 2, beaconsOnAir: 1, problem: false, uptimeSeconds: 50), counter: 5001)
        #expect(schedule.beacons[1].data.bytes == expected)
        let confirmed = lc.handle(.applied(onAir))
        #expect(!confirmed.contains { if case .log = $0 { true } else { false } })
        #expect(applied(lc.handle(.telemetry(tenths(60)))) == nil)
        // Late ticks: the frame of 50 s is renewed at the tick of 96 s (46 s on), not one later.
        #expect(applied(lc.handle(.telemetry(tenths(94)))) == nil)
        #expect(applied(lc.handle(.telemetry(tenths(96)))) != nil)
    }

    @Test("a restart starts where the state directory's reservation ended: above every counter the last run could send")
    func restart() throws {
        let c = try config(ibeacon + "[[beacon]]\nformat = \"bthome\"\nbindkey_file = \"k\"\n")
        var book = CounterBook()
        var first = Lifecycle(config: c, configPath: "/c", seed: 1, seal: seal)
        _ = first.handle(.telemetry(tenths(0)))
        _ = first.handle(.start)
        let needs = supplies(first.handle(.opened()))[0]
        let r1 = book.reserve(address, from: needs.countersFrom!, count: CounterBook.block)
        #expect(r1 == CounterReservation(floor: 0, limit: CounterBook.block))
        let a = try #require(applied(first.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: r1))))).beacons[1].data.bytes
        // Killed: the next run reads the book as the file holds it.
        let kept = try CounterBook(parsing: book.text)
        var book2 = kept
        var second = Lifecycle(config: c, configPath: "/c", seed: 2, seal: seal)
        _ = second.handle(.telemetry(tenths(0)))
        _ = second.handle(.start)
        let r2 = book2.reserve(address, from: supplies(second.handle(.opened()))[0].countersFrom!, count: CounterBook.block)
        #expect(r2 == CounterReservation(floor: CounterBook.block, limit: 2 * CounterBook.block))
        let b = try #require(applied(second.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: r2))))).beacons[1].data.bytes
        func counter(_ d: [UInt8]) -> UInt32 { d[d.count - 8..<d.count - 4].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
        #expect(counter(a) == 0 && counter(b) == CounterBook.block)
    }

    @Test("half the block used: the next block is reserved ahead; when none can be, the frame stays and it says so once")
    func reservesAhead() throws {
        let c = try config(ibeacon + "[[beacon]]\nformat = \"bthome\"\nbindkey_file = \"k\"\n")
        var lc = Lifecycle(config: c, configPath: "/c", seed: 1, seal: seal)
        _ = lc.handle(.telemetry(tenths(0)))
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        let first = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: 5000, limit: 5002))))
        #expect(supplies(first) == [SelfReportNeeds(address: address, countersFrom: 5002)])
        let refused = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, failure: "Cannot keep the BTHome counters in /s: disk full")))
        #expect(refused.contains(.log(.warning, "Cannot keep the BTHome counters in /s: disk full; the BTHome self-report has 1 counter left, then its frame stays as it is",
                                      ["BEACON_FORMAT=bthome"])))
        _ = lc.handle(.applied(onAir))
        // Counter 5001 is the last one; its frame asks again.
        let minute = lc.handle(.telemetry(tenths(60)))
        let last = try #require(applied(minute)).beacons[1].data.bytes
        let expected = try encrypted(BTHomeReport(packetID: 2, beaconsOnAir: 1, problem: false, uptimeSeconds: 60), counter: 5001)
        #expect(last == expected)
        #expect(supplies(minute) == [SelfReportNeeds(address: address, countersFrom: 5002)])
        _ = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, failure: "Cannot keep the BTHome counters in /s: disk full")))
        _ = lc.handle(.applied(onAir))
        // None left: the frame on the air stays, said once; a later block lets it go on.
        let stuck = lc.handle(.telemetry(tenths(120)))
        #expect(stuck.contains { if case .log(.err, let m, _) = $0 { m.hasPrefix("The BTHome self-report used every counter") } else { false } })
        #expect(applied(stuck).map { $0.beacons[1].data.bytes } ?? last == last)
        _ = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: 5002, limit: 6002))))
        _ = lc.handle(.applied(onAir))
        let again = try #require(applied(lc.handle(.telemetry(tenths(180))))).beacons[1].data.bytes
        let expectedLater = try encrypted(BTHomeReport(packetID: 3, beaconsOnAir: 1, problem: false, uptimeSeconds: 180), counter: 5002)
        #expect(again == expectedLater)
    }

    @Test("no address or counters from the state directory: the apply fails with why, and the retry asks again")
    func supplyFails() throws {
        var lc = Lifecycle(config: try config("[beacon]\nformat = \"bthome\"\nbindkey_file = \"k\"\n"), configPath: "/c", seed: 1, seal: seal)
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        let failed = lc.handle(.selfReportSupplied(SelfReportSupply(failure: "Cannot keep a static address in /s: read-only file system")))
        #expect(lc.phase == .waiting)
        #expect(failed.contains { if case .log(.err, let m, _) = $0 { m.hasPrefix("Cannot put the BTHome self-report on the air: Cannot keep a static address in /s: read-only file system, retrying in") } else { false } })
        _ = lc.handle(.timerFired)
        #expect(supplies(lc.handle(.opened())).count == 1)
    }

    @Test("#52: counters that cannot be kept never darken the host: the other beacons go on the air, the self-report stays off (never in plaintext), said once, tried again at each tick, and back once kept")
    func heldSelfReport() throws {
        let c = try config(ibeacon + "[[beacon]]\nformat = \"bthome\"\nbindkey_file = \"k\"\n")
        var lc = Lifecycle(config: c, configPath: "/c", seed: 1, seal: seal)
        _ = lc.handle(.telemetry(tenths(0)))
        _ = lc.handle(.start)
        #expect(supplies(lc.handle(.opened())).count == 1)
        let damaged = "/var/lib/beacond/bthome-counters:3: not an address followed by a counter (0 to 4294967295); fix that line (a number only ever goes up)"
        let first = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, failure: damaged)))
        // The iBeacon alone goes on the air.
        let s = try #require(applied(first))
        #expect(s.beacons.count == 1 && s.addresses.map(\.key) == c.addressPlan.wanted.prefix(1).map(\.key))
        #expect(first.contains { if case .log(.warning, let m, _) = $0 { m.hasPrefix("The BTHome self-report stays off the air: \(damaged)") } else { false } })
        let one = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["legacy"])
        _ = lc.handle(.applied(one))
        #expect(lc.phase == .advertising)
        // The state file names it paused, and the iBeacon on the air.
        let st = RuntimeState(lc, pid: 1, configDigest: "x", now: 100, previous: nil)
        #expect(st.beacons.map(\.onAir) == [true, false])
        #expect(st.beacons[1].paused?.contains("bthome-counters:3") == true)
        // The next tick asks again; refused again: no second warning, the iBeacon still alone.
        #expect(supplies(lc.handle(.telemetry(tenths(100)))).count == 1)
        let again = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, failure: damaged)))
        #expect(!again.contains { if case .log(.warning, _, _) = $0 { true } else { false } })
        #expect(applied(again).map { $0.beacons.count } ?? 1 == 1)
        _ = lc.handle(.applied(one))
        // Fixed: back on the air, encrypted, said.
        #expect(supplies(lc.handle(.telemetry(tenths(200)))).count == 1)
        let back = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: 5, limit: 1005))))
        let both = try #require(applied(back))
        #expect(both.beacons.count == 2)
        let sealed = try encrypted(BTHomeReport(packetID: 1, beaconsOnAir: 1, problem: false, uptimeSeconds: 200), counter: 5)
        #expect(both.beacons[1].data.bytes == sealed)
        #expect(back.contains { if case .log(.notice, let m, _) = $0 { m.contains("The BTHome self-report goes on the air") } else { false } })
    }

    @Test("#52: no counter goes out before the wall clock reaches it: after a quick restart the first frame waits a tick while the iBeacon goes on; a clock a day behind is not waited for")
    func countersWaitForTheClock() throws {
        let c = try config(ibeacon + "[[beacon]]\nformat = \"bthome\"\nbindkey_file = \"k\"\n")
        var lc = Lifecycle(config: c, configPath: "/c", seed: 1, seal: seal)
        _ = lc.handle(.telemetry(tenths(0)))
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        // The book is 6 s ahead of the clock: the last run reserved 6 s before this start.
        let clock: UInt32 = 1_800_000_000
        let first = lc.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: clock + 6, limit: clock + 14), clock: clock)))
        #expect(try #require(applied(first)).beacons.count == 1)
        #expect(first.contains { if case .log(.info, let m, _) = $0 { m.contains("waits for the wall clock") } else { false } })
        // The executor is asked to answer once the clock has reached the counter.
        #expect(supplies(first) == [SelfReportNeeds(address: address, notBefore: clock + 6)])
        _ = lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["legacy"])))
        let st = RuntimeState(lc, pid: 1, configDigest: "x", now: 100, previous: nil)
        #expect(st.beacons[1].paused?.hasPrefix("it waits for the wall clock: its next counter") == true)
        // Its answer, 6 s on: the self-report goes on the air at once, not at the next tick.
        let later = try #require(applied(lc.handle(.selfReportSupplied(SelfReportSupply(address: address, clock: clock + 6, uptime: 6)))))
        #expect(later.beacons.count == 2)
        let sealed = try encrypted(BTHomeReport(packetID: 1, beaconsOnAir: 1, problem: false, uptimeSeconds: 0), counter: clock + 6)
        #expect(later.beacons[1].data.bytes == sealed)

        // Alone, it does not fail the apply (nor reset the controller): it waits for the answer, then goes on.
        var alone = Lifecycle(config: try config("[beacon]\nformat = \"bthome\"\nbindkey_file = \"k\"\n"), configPath: "/c", seed: 1, seal: seal)
        _ = alone.handle(.telemetry(tenths(0)))
        _ = alone.handle(.start)
        _ = alone.handle(.opened())
        let wait = alone.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: clock + 6, limit: clock + 14), clock: clock)))
        #expect(applied(wait) == nil && !wait.contains(.closeBackend))
        #expect(supplies(wait) == [SelfReportNeeds(address: address, notBefore: clock + 6)])
        #expect(!wait.contains { if case .log(.err, _, _) = $0 { true } else { false } })
        let go = alone.handle(.selfReportSupplied(SelfReportSupply(address: address, clock: clock + 6, uptime: 6)))
        #expect(try #require(applied(go)).beacons.count == 1)

        // A clock never set (a day or more behind the book): the frame goes out at once.
        var far = Lifecycle(config: c, configPath: "/c", seed: 1, seal: seal)
        _ = far.handle(.telemetry(tenths(0)))
        _ = far.handle(.start)
        _ = far.handle(.opened())
        let now = far.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: clock, limit: clock + 8), clock: 86_400)))
        #expect(try #require(applied(now)).beacons.count == 2)
    }

    @Test("#52: the schedule carries the address the self-report's frame was sealed for, and the address choice takes it as it is, asking the state directory for no second copy")
    func oneRouteForTheAddress() throws {
        var lc = Lifecycle(config: try config(ibeacon + "[[beacon]]\nformat = \"bthome\"\nbindkey_file = \"k\"\n"), configPath: "/c", seed: 1, seal: seal)
        _ = lc.handle(.telemetry(tenths(0)))
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        let s = try #require(applied(lc.handle(.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: 5, limit: 13))))))
        #expect(s.addresses[1].known == address && s.addresses[0].known == nil)
        var choice = AddressChoice()
        var asked: [String] = []
        let got = choice.choose(s.addresses, generation: 0, loadStatic: { keys in
            asked += keys
            return .success(Dictionary(uniqueKeysWithValues: keys.map { ($0, BluetoothAddress(parsing: "D0:00:00:00:00:01")!) }))
        }, randomBytes: { nil })
        #expect(asked == [s.addresses[0].key])
        #expect(try got.get().addresses == [.random(BluetoothAddress(parsing: "D0:00:00:00:00:01")!), .random(address)])
    }

    @Test("a chosen address needs no address from the state directory, only counters for it")
    func chosenAddress() throws {
        var lc = Lifecycle(config: try config("[beacon]\nformat = \"bthome\"\nbindkey_file = \"k\"\naddress = \"C6:12:34:56:78:9A\"\n"), configPath: "/c", seed: 1, seal: seal)
        _ = lc.handle(.start)
        #expect(supplies(lc.handle(.opened())) == [SelfReportNeeds(avoiding: [address], address: address, countersFrom: 0)])
    }

    @Test("plain: no state directory needed; the count leaves the self-report out, and a beacon without a uuid is a problem")
    func plain() throws {
        var lc = Lifecycle(config: try config(ibeacon + "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 2\n[[beacon]]\nformat = \"bthome\"\n"),
                           configPath: "/c", seed: 1)
        _ = lc.handle(.telemetry(tenths(0)))
        _ = lc.handle(.start)
        let opened = lc.handle(.opened())
        #expect(supplies(opened).isEmpty)
        let plain = BTHome.advertisingData(serviceData: BTHome.plainServiceData(BTHomeReport(packetID: 1, beaconsOnAir: 2, problem: false, uptimeSeconds: 0).objects))
        #expect(try #require(applied(opened)).beacons[2].data == plain)
        _ = lc.handle(.applied(onAir))
        // A reload adds a beacon without a uuid yet: a new frame at once, with the problem.
        _ = lc.handle(.telemetry(tenths(12)))
        _ = lc.handle(.hangup)
        let reload = lc.handle(.configLoaded(try config(ibeacon + "[[beacon]]\nmajor = 1\nminor = 3\n" + "[[beacon]]\nformat = \"bthome\"\n")))
        let data = try #require(applied(reload)).beacons[1].data
        #expect(data == BTHome.advertisingData(serviceData: BTHome.plainServiceData(BTHomeReport(packetID: 2, beaconsOnAir: 1, problem: true, uptimeSeconds: 12).objects)))
    }
}

@Suite("BTHome counters file")
struct CounterBookTests {
    @Test("a reservation raises the address's number by a block and never lowers it; other addresses keep theirs")
    func reserve() throws {
        var book = try CounterBook(parsing: "# comment\n\nC6:12:34:56:78:9A 7000\nD0:00:00:00:00:01 12\n")
        #expect(book.reserve(address, from: 0, count: 1000) == CounterReservation(floor: 7000, limit: 8000))
        #expect(book.reserve(address, from: 8000, count: 1000) == CounterReservation(floor: 8000, limit: 9000))
        #expect(book.reserve(address, from: 100, count: 1000) == CounterReservation(floor: 9000, limit: 10000))
        let again = try CounterBook(parsing: book.text)
        #expect(again.entries == [address: 10000, BluetoothAddress(parsing: "D0:00:00:00:00:01")!: 12])
        var top = try CounterBook(parsing: "C6:12:34:56:78:9A 4294967000\n")
        #expect(top.reserve(address, from: 0, count: 1000) == CounterReservation(floor: 4_294_967_000, limit: UInt32.max))
    }

    @Test("#52: the wall clock is a floor: a restored book (an older, lower number) starts above every counter sent since")
    func clockFloor() throws {
        var backup = try CounterBook(parsing: "C6:12:34:56:78:9A 1000\n")
        var live = backup
        // The first run at 1.8e9 s: its counters start at the clock.
        let run1 = live.reserve(address, from: 0, count: 1000, clock: 1_800_000_000)
        #expect(run1 == CounterReservation(floor: 1_800_000_000, limit: 1_800_001_000))
        // It sends a frame a minute for a day (1440 counters, over the block), reserving ahead with the clock then.
        let ahead = live.reserve(address, from: run1.limit, count: 1000, clock: 1_800_030_000)
        #expect(ahead.floor == 1_800_030_000)
        let lastSent = run1.floor + 1440
        // The backup comes back a day later: the book says 1000, the clock says more than anything sent.
        let restored = backup.reserve(address, from: 0, count: 1000, clock: 1_800_086_400 + 60)
        #expect(restored.floor > lastSent)
        // Without a clock (0: not set) the book alone is the floor, as before.
        var plain = try CounterBook(parsing: "C6:12:34:56:78:9A 7000\n")
        #expect(plain.reserve(address, from: 0, count: 1000, clock: 0).floor == 7000)
    }

    @Test("a damaged line is an error naming it, never a fresh start from 0", arguments: [
        ("C6:12:34:56:78:9A\n", 1), ("C6:12:34:56:78:9A -5\n", 1), ("# x\nnot-an-address 5\n", 2), ("C6:12:34:56:78:9A 1\nC6:12:34:56:78:9A 2\n", 2),
        ("C6:12:34:56:78:9A 4294967296\n", 1),
    ])
    func damaged(text: String, line: Int) {
        #expect(throws: CounterBook.Damaged.self) { try CounterBook(parsing: text) }
        do { _ = try CounterBook(parsing: text) } catch { #expect(error.line == line) }
    }
}
