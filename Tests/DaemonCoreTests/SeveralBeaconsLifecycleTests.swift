// The lifecycle with several beacons and an address policy: one request with every beacon, the backend auto picks
// raw HCI for an address mgmt cannot keep, one STATUS line with the count, one journal line per beacon.
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import Testing

private let three = """
    [[beacon]]
    uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
    major = 1
    minor = 2

    [[beacon]]
    format = "altbeacon"
    uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
    major = 3
    minor = 4

    [[beacon]]
    format = "eddystone-uid"
    namespace = "00112233445566778899"
    instance = "a1b2c3d4e5f6"
    interval_ms = 250

    """

private func parse(_ text: String) -> BeaconConfiguration { try! BeaconConfiguration.parse(Array(text.utf8)) }

private func kernelConfig(address: String?, connectable: Bool = false) -> BeaconConfiguration {
    parse("[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\n[advertising]\n"
          + (address.map { "address = \"\($0)\"\n" } ?? "") + "connectable = \(connectable)\n[controller]\ndevice = \"hci0\"\n")
}

private func opened(_ actions: [Lifecycle.Action]) -> BackendKind? {
    for a in actions { if case .open(let k, _) = a { return k } }
    return nil
}

private func logs(_ actions: [Lifecycle.Action]) -> [String] {
    actions.compactMap { if case .log(_, let m, _) = $0 { m } else { nil } }
}

@Suite("lifecycle with several beacons")
struct SeveralBeaconsLifecycleTests {
    @Test("one apply carries every beacon in file order, each with its own interval and the address policy")
    func request() {
        var lc = Lifecycle(config: parse(three + "[advertising]\naddress = \"rotating\"\n"), configPath: "/c", seed: 1)
        _ = lc.handle(.start)
        let a = lc.handle(.opened())
        let schedule = a.compactMap { if case .apply(let s, _) = $0 { s } else { nil } }.first
        #expect(schedule?.beacons.count == 3)
        #expect(schedule?.beacons.map(\.interval.units) == [160, 160, 400])
        #expect(schedule?.beacons[1].data.bytes.count == 31)
        #expect(schedule?.addresses.map(\.setting) == [.policy(.rotating), .policy(.rotating), .policy(.rotating)])
    }

    @Test("STATUS: one line with the count and what each beacon gets; the journal: one line per beacon")
    func status() {
        var lc = Lifecycle(config: parse(three), configPath: "/c", seed: 1)
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        let result = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["legacy", "time-sliced, 100 ms slots", "static address C3:00:00:00:00:01"],
                           beacons: (1...3).map { BeaconOnAir(every: .milliseconds(300), details: ["slot \($0) of 3"]) })
        let a = lc.handle(.applied(result))
        let ready = a.compactMap { if case .notify(let n) = $0 { n } else { nil } }.first
        #expect(ready == ["READY=1", "STATUS=Advertising 3 beacons on hci0: iBeacon every 300 ms, AltBeacon every 300 ms, Eddystone-UID every 300 ms (legacy, time-sliced, 100 ms slots, static address C3:00:00:00:00:01)"])
        let lines = logs(a).filter { $0.hasPrefix("Beacon ") }
        #expect(lines.count == 3)
        #expect(lines[1].hasPrefix("Beacon 2 of 3: AltBeacon E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 3 minor 4 every 300 ms on "))
        #expect(lines[2].hasSuffix("(slot 3 of 3)"))
    }

    @Test("backend auto on hciN: mgmt by default and for rotating; raw HCI for static, and for public unless connectable")
    func autoPicksWhatCanKeepTheAddress() {
        let cases: [(String?, Bool, BackendKind)] = [
            (nil, false, .mgmt), ("rotating", false, .mgmt), ("static", false, .hci), ("public", false, .hci), ("public", true, .mgmt),
        ]
        for (address, connectable, kind) in cases {
            var lc = Lifecycle(config: kernelConfig(address: address, connectable: connectable), configPath: "/c", seed: 1)
            #expect(opened(lc.handle(.start)) == kind, "address \(address ?? "unset"), connectable \(connectable)")
        }
    }

    @Test("a reload that changes what the address needs starts over on the other backend; one that does not, does not")
    func reloadAddress() {
        var lc = Lifecycle(config: kernelConfig(address: nil), configPath: "/c", seed: 1)
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        _ = lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["mgmt instance 5"])))
        _ = lc.handle(.hangup)
        let same = lc.handle(.configLoaded(kernelConfig(address: "rotating")))
        #expect(!same.contains(.stopAdvertising))
        _ = lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["mgmt instance 5"])))
        _ = lc.handle(.hangup)
        let changed = lc.handle(.configLoaded(kernelConfig(address: "static")))
        #expect(changed.contains(.stopAdvertising))  // off the mgmt instance first
        let reopened = lc.handle(.stopped)
        #expect(opened(reopened) == .hci)
    }
}

@Suite("rotating address")
struct RotatingAddressTests {
    @Test("every period a full apply with a new address generation, and STATUS and the journal say so; not through mgmt")
    func rotates() throws {
        let text = "[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\n[advertising]\naddress = \"rotating\"\n[controller]\ndevice = \"tcp:127.0.0.1:9\"\n"
        var lc = Lifecycle(config: try BeaconConfiguration.parse(Array(text.utf8)), configPath: "/c", seed: 1)
        _ = lc.handle(.start)
        let first = lc.handle(.opened()).compactMap { if case .apply(let s, _) = $0 { s } else { nil } }.first
        #expect(first?.addressGeneration == 0)
        _ = lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended", "rotating address 12:34:56:78:9A:BC"])))
        let a = lc.handle(.addressPeriod)
        let next = try #require(a.compactMap { if case .apply(let s, _) = $0 { s } else { nil } }.first)
        #expect(next.addressGeneration == 1)
        let done = lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended", "rotating address 2F:00:00:00:00:01"])))
        #expect(done.contains { if case .notify(let n) = $0 { n.contains { $0.hasSuffix("rotating address 2F:00:00:00:00:01)") } } else { false } })
        #expect(done.contains { if case .log(.notice, let m, _) = $0 { m.hasSuffix("rotating address 2F:00:00:00:00:01)") } else { false } })
        // Through the kernel's management interface the kernel rotates its own address.
        let mgmt = "[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\n[advertising]\naddress = \"rotating\"\n[controller]\nbackend = \"mgmt\"\n"
        var m = Lifecycle(config: try BeaconConfiguration.parse(Array(mgmt.utf8)), configPath: "/c", seed: 1)
        _ = m.handle(.start)
        #expect(!m.rotatesAddress)
        #expect(m.handle(.addressPeriod).isEmpty)
    }

    @Test("STATUS names each beacon's own address; TX power is logged beside measured_power and a value far off warned once")
    func addressesAndTxPower() {
        var lc = Lifecycle(config: parse("[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 9\nmeasured_power = -100\n" + three.split(separator: "\n", maxSplits: 4, omittingEmptySubsequences: false)[4]),
                           configPath: "/c", seed: 1)
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        let beacons = ["C6:00:00:00:00:01", "D7:00:00:00:00:02", "E8:00:00:00:00:03"].map {
            BeaconOnAir(every: .milliseconds(100), details: ["set 0", "static address \($0)"], txPower: 0, address: .random(BluetoothAddress(parsing: $0)!))
        }
        let a = lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended", "3 sets"], beacons: beacons)))
        let status = a.compactMap { if case .notify(let n) = $0 { n.last } else { nil } }.first
        #expect(status == "STATUS=Advertising 3 beacons on hci0: iBeacon every 100 ms from C6:00:00:00:00:01, AltBeacon every 100 ms from D7:00:00:00:00:02, Eddystone-UID every 100 ms from E8:00:00:00:00:03 (extended, 3 sets)")
        let lines = logs(a)
        #expect(lines.contains("TX power on hci0 as the controller reports it: beacon 1: TX 0 dBm, measured_power -100 dBm at 1 m; beacon 2: TX 0 dBm, measured_power -59 dBm at 1 m; beacon 3: TX 0 dBm, measured_power -59 dBm at 1 m"))
        #expect(lines.filter { $0.hasPrefix("Beacon 1's measured_power of -100 dBm at 1 m is 59 dB weaker than a 0 dBm transmitter") }.count == 1)
        #expect(!lines.contains { $0.hasPrefix("Beacon 2's measured_power") || $0.hasPrefix("Beacon 3's measured_power") })
        // The same again (another program's reset, a reapply): the line again, the warning not.
        _ = lc.handle(.reapply(reason: "test", delay: .zero, fields: [], at: .zero))
        _ = lc.handle(.timerFired)
        let again = logs(lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended", "3 sets"], beacons: beacons))))
        #expect(again.contains { $0.hasPrefix("TX power on hci0") })
        #expect(!again.contains { $0.contains("measured_power of") })
    }
}
