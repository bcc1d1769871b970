// The lifecycle with an Eddystone-EID beacon: the identifier for the wall clock, a new one (with a new address period)
// at each boundary and none between, raw HCI for backend auto, and STATUS when the clock is not synchronized.
import AESCipher
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import Testing

private func hex(_ s: String) -> [UInt8] {
    let d = Array(s.utf8)
    return stride(from: 0, to: d.count, by: 2).map { UInt8(String(decoding: d[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

/// The config as the loader leaves it: the key read in.
private func config(exponent: Int) -> BeaconConfiguration {
    var c = try! BeaconConfiguration.parse(Array("""
        [[beacon]]
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        major = 1
        minor = 2

        [[beacon]]
        format = "eddystone-eid"
        identity_key_file = "k.key"
        rotation_exponent = \(exponent)
        measured_power = -20
        """.utf8))
    guard case .eddystoneEID(var e) = c.beacons[1].beacon else { fatalError("not EID") }
    e.key = IdentityKey(hex("0102030405060708090A111213141516"))
    c.beacons[1].beacon = .eddystoneEID(e)
    return c
}

private func applies(_ a: [Lifecycle.Action]) -> [AdvertisingSchedule] {
    a.compactMap { if case .apply(let s, _) = $0 { s } else { nil } }
}

private let onAir = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended", "2 sets"],
                          beacons: [BeaconOnAir(every: .milliseconds(100), details: []), BeaconOnAir(every: .milliseconds(100), details: [])])

@Suite("lifecycle with an Eddystone-EID beacon")
struct EIDLifecycleTests {
    @Test("the EID for the clock on the air; a new EID and address period at the boundary only; the other beacon untouched")
    func rotation() {
        var lc = Lifecycle(config: config(exponent: 10), configPath: "/c", seed: 1, cipher: { k, b in try AES128.encrypt(b, key: k) })
        let clock = lc.handle(.clock(sinceEpoch: .seconds(2000), synchronized: true))
        #expect(clock.contains(.armPeriodic(.eidRotation, .seconds(1024))))  // the boundary timer
        let open = lc.handle(.start)
        #expect(open.contains { if case .open(.hci, _) = $0 { true } else { false } })  // auto: raw HCI for an EID beacon
        let first = applies(lc.handle(.opened())).first!
        #expect(first.beacons[1].data.bytes == hex("0201060303AAFE0D16AAFE30EC4144413E45FEFA58"))
        #expect(first.addresses[1].setting == .policy(.rotating) && first.addresses[1].period == 1)  // 2000 >> 10
        _ = lc.handle(.applied(onAir))
        // Within the period: nothing to do.
        #expect(applies(lc.handle(.clock(sinceEpoch: .seconds(2047), synchronized: true))).isEmpty)
        // The boundary at 2048: the EID beacon's new identifier and period; the iBeacon's request the same.
        let next = applies(lc.handle(.clock(sinceEpoch: .seconds(2048), synchronized: true))).first!
        let expected = try! EddystoneEID.identifier(identityKey: hex("0102030405060708090A111213141516"), exponent: 10, time: 2048,
                                                    cipher: { k, b in try AES128.encrypt(b, key: k) })
        #expect(Array(next.beacons[1].data.bytes.suffix(8)) == expected && expected != hex("4144413E45FEFA58"))
        #expect(next.addresses[1].period == 2 && next.beacons[0] == first.beacons[0] && next.addresses[0] == first.addresses[0])
    }

    @Test("an unsynchronized clock: a warning once and STATUS says the EIDs will not resolve")
    func unsynchronized() {
        var lc = Lifecycle(config: config(exponent: 4), configPath: "/c", seed: 1, cipher: { k, b in try AES128.encrypt(b, key: k) })
        let warned = lc.handle(.clock(sinceEpoch: .seconds(100), synchronized: false))
        #expect(warned.contains { if case .log(.warning, let m, _) = $0 { m.hasPrefix("The system clock is not synchronized") } else { false } })
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        let ready = lc.handle(.applied(onAir)).compactMap { if case .notify(let n) = $0 { n.last } else { nil } }.first
        #expect(ready?.hasSuffix("; the system clock is not synchronized: the EIDs will not resolve") == true)
        #expect(lc.handle(.clock(sinceEpoch: .seconds(101), synchronized: false)).allSatisfy { if case .log = $0 { false } else { true } })
    }

    @Test("a clock whose synchronization cannot be told counts as synchronized, said once at notice level")
    func unknownClock() {
        var lc = Lifecycle(config: config(exponent: 4), configPath: "/c", seed: 1, cipher: { k, b in try AES128.encrypt(b, key: k) })
        let first = lc.handle(.clock(sinceEpoch: .seconds(100), synchronized: nil))
        #expect(first.contains { if case .log(.notice, let m, _) = $0 { m.hasPrefix("Cannot tell whether the system clock is synchronized") } else { false } })
        #expect(!first.contains { if case .log(.warning, _, _) = $0 { true } else { false } })
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        let ready = lc.handle(.applied(onAir)).compactMap { if case .notify(let n) = $0 { n.last } else { nil } }.first
        #expect(ready?.contains("not synchronized") == false)
        #expect(lc.handle(.clock(sinceEpoch: .seconds(101), synchronized: nil)).allSatisfy { if case .log = $0 { false } else { true } })
    }

    @Test("the next boundary of the wall clock: just past the next multiple of the period")
    func boundary() {
        #expect(Lifecycle.untilBoundary(of: .seconds(1024), wallSeconds: 1024 * 5 + 100, milliseconds: 250) == .milliseconds((1024 - 100) * 1000 - 250 + 5))
        #expect(Lifecycle.untilBoundary(of: .seconds(1), wallSeconds: 7, milliseconds: 999) == .milliseconds(6))
        #expect(Lifecycle.untilBoundary(of: .seconds(16), wallSeconds: 32, milliseconds: 0) == .milliseconds(16_005))
    }
}
