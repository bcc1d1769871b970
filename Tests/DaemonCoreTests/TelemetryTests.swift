// Eddystone-TLM: the counts beacond reports, and that new values go on the air as a quiet data update.
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import Testing

@Suite("telemetry")
struct TelemetryTests {
    @Test("time since start in 0.1 s; PDUs: three per advertising event of every beacon on the air, none while off")
    func clock() {
        var c = TelemetryClock(startedAt: 1_000_000)
        c.advance(to: 11_000_000, onAir: [.milliseconds(100), .milliseconds(250)])  // 10 s
        #expect(c.telemetry(temperature: nil) == Telemetry(temperature: nil, advertisingCount: 300 + 120, uptimeTenths: 100))
        c.advance(to: 16_000_000, onAir: nil)  // 5 s off the air
        #expect(c.telemetry(temperature: 11520) == Telemetry(temperature: 11520, advertisingCount: 420, uptimeTenths: 150))
    }

    @Test("millidegrees to 8.8 fixed point; never the 'not supported' value 0x8000")
    func fixedPoint() {
        #expect(Telemetry.fixedPoint(millidegrees: 45_000) == 45 * 256)
        #expect(Telemetry.fixedPoint(millidegrees: -12_500) == -(12 * 256 + 128))
        #expect(Telemetry.fixedPoint(millidegrees: 1_000_000) == Int16.max)
        #expect(Telemetry.fixedPoint(millidegrees: -1_000_000) == Int16.min + 1)
    }

    @Test("the frame: battery 0 mV, the values, 0x8000 without a thermal zone")
    func frame() {
        let b = Beacon.eddystoneTLM(EddystoneTLM(batteryMillivolts: 0, temperature: nil, advertisingCount: 0, uptimeTenths: 0))
        let now = b.withTelemetry(Telemetry(temperature: nil, advertisingCount: 0x0102_0304, uptimeTenths: 0x0A0B_0C0D))
        #expect(hexString(now.advertisingData.bytes) == "0201060303aafe1116aafe2000" + "0000" + "8000" + "01020304" + "0a0b0c0d")
        let warm = b.withTelemetry(Telemetry(temperature: 0x2D80))
        #expect(hexString(warm.advertisingData.bytes).hasPrefix("0201060303aafe1116aafe200000002d80"))
    }

    @Test("new telemetry while advertising: a data-only apply with the new frame, and no journal line for it")
    func quietRefresh() throws {
        let text = "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 2\n[[beacon]]\nformat = \"eddystone-tlm\"\n"
        var lc = Lifecycle(config: try BeaconConfiguration.parse(Array(text.utf8)), configPath: "/c", seed: 1)
        #expect(lc.hasTelemetry)
        _ = lc.handle(.start)
        _ = lc.handle(.opened())
        let onAir = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended"],
                          beacons: [BeaconOnAir(every: .milliseconds(100), details: []), BeaconOnAir(every: .milliseconds(100), details: [])])
        _ = lc.handle(.applied(onAir))
        #expect(lc.onAirEvery == [.milliseconds(100), .milliseconds(100)])
        let a = lc.handle(.telemetry(Telemetry(temperature: 0x1000, advertisingCount: 7, uptimeTenths: 9)))
        let schedule = try #require(a.compactMap { if case .apply(let s, true) = $0 { s } else { nil } }.first)
        #expect(hexString(schedule.beacons[1].data.bytes).hasSuffix("0000" + "1000" + "00000007" + "00000009"))
        let done = lc.handle(.applied(onAir))
        #expect(!done.contains { if case .log = $0 { true } else { false } })
        #expect(lc.phase == .advertising)
    }

    @Test("the telemetry and address timers are lifecycle actions: armed while wanted, again after each tick, cancelled by a reload without them")
    func periodicTimers() throws {
        let tlm = "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 2\n[[beacon]]\nformat = \"eddystone-tlm\"\n"
            + "[advertising]\naddress = \"rotating\"\n[controller]\ndevice = \"tcp:127.0.0.1:9\"\n"
        var lc = Lifecycle(config: try BeaconConfiguration.parse(Array(tlm.utf8)), configPath: "/c", seed: 1)
        let first = lc.handle(.telemetry(Telemetry()))  // the executor's first values, before the start
        #expect(first.contains(.armPeriodic(.telemetry, Lifecycle.telemetryPeriod)))
        #expect(first.contains(.armPeriodic(.addressRotation, AddressPolicy.rotationPeriod)))
        let start = lc.handle(.start)
        #expect(!start.contains { if case .armPeriodic = $0 { true } else { false } })  // armed already
        _ = lc.handle(.opened())
        _ = lc.handle(.applied(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended"])))
        // A tick: the timer fired, so it is armed again.
        #expect(lc.handle(.telemetry(Telemetry())).contains(.armPeriodic(.telemetry, Lifecycle.telemetryPeriod)))
        #expect(lc.handle(.addressPeriod).contains(.armPeriodic(.addressRotation, AddressPolicy.rotationPeriod)))
        let plain = "[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 2\n[controller]\ndevice = \"tcp:127.0.0.1:9\"\n"
        _ = lc.handle(.hangup)
        let reload = lc.handle(.configLoaded(try BeaconConfiguration.parse(Array(plain.utf8))))
        #expect(reload.contains(.cancelPeriodic(.telemetry)) && reload.contains(.cancelPeriodic(.addressRotation)))
    }

    @Test("eddystone-tlm takes no identity keys: each is an error naming the format")
    func config() {
        let text = "[beacon]\nformat = \"eddystone-tlm\"\nmajor = 1\n"
        let e = thrownDiagnostics(text)
        #expect(e == ["3:1: 'major' in [beacon] belongs to formats \"ibeacon\" and \"altbeacon\", not to this beacon's format \"eddystone-tlm\""])
    }
}

private func thrownDiagnostics(_ text: String) -> [String] {
    do {
        _ = try BeaconConfiguration.parse(Array(text.utf8))
        return []
    } catch {
        return error.items.map { "\($0.location.map { "\($0)" } ?? "-"): \($0.message)" }
    }
}
