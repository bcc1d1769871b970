// Recognizing iBeacon frames in received advertising data, and the ranging estimate.
@testable import BeaconCore
import BluetoothHCI
import Testing

private func hex(_ s: String) -> [UInt8] {
    let d = Array(s.filter { !$0.isWhitespace })
    return stride(from: 0, to: d.count, by: 2).map { UInt8(String(d[$0...$0 + 1]), radix: 16)! }
}

@Suite("received frames")
struct FrameTests {
    @Test("a frame beacond builds is read back as the same beacon")
    func roundTrip() throws {
        let b = IBeacon(uuid: try BeaconUUID(parsing: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"), major: 513, minor: 65535, measuredPower: -70)
        #expect(BeaconFrame(advertisingData: b.advertisingData.bytes) == .iBeacon(b))
        #expect(BeaconFrame(advertisingData: b.advertisingData.bytes + [0, 0]) == .iBeacon(b))  // zero padding
    }

    @Test("bad and foreign frames", arguments: [
        ("", "other"),
        ("020106 0909 4b69746368656e", "other"),  // a name, no manufacturer data
        ("0201061aff5900021500000000000000000000000000000000000000000000", "malformed"),  // other company
        ("020106 18ff4c000215 00000000000000000000000000000000000000", "malformed"),  // body too short
        ("020106 1aff4c000216 000000000000000000000000000000000000000000", "malformed"),  // wrong length byte
        ("020106 1fff4c000215e2c5", "malformed"),  // runs past the end
        ("ff", "other"), ("05", "other"), ("02ff", "other"),  // truncated garbage
        ("0aff4c0010050318a1b2c3", "other"),  // Apple, but a different type (Nearby)
    ])
    func badFrames(data: String, kind: String) {
        let f = BeaconFrame(advertisingData: hex(data))
        switch f {
        case .other: #expect(kind == "other")
        case .malformedIBeacon: #expect(kind == "malformed")
        case .iBeacon, .altBeacon, .eddystoneUID, .eddystoneTLM, .eddystoneEID: Issue.record("\(data) read as \(f.kind)")
        }
    }
}

@Suite("ranging")
struct RangingTests {
    @Test("distance follows the Android Beacon Library curve; proximity thresholds 0.5 m and 4 m")
    func distance() {
        #expect(Ranging.distance(rssi: -59, measuredPower: -59) == 0.89976 + 0.111)
        let close = Ranging.distance(rssi: -50, measuredPower: -59)!
        #expect(abs(close - 0.19106) < 0.0001)
        #expect(Ranging.proximity(distance: close) == .immediate)
        #expect(Ranging.proximity(distance: Ranging.distance(rssi: -65, measuredPower: -59)) == .near)
        #expect(Ranging.proximity(distance: Ranging.distance(rssi: -90, measuredPower: -59)) == .far)
        #expect(Ranging.distance(rssi: 0, measuredPower: -59) == nil)
    }

    @Test("bug: the model holds only for negative powers; everything else is nil, and every value inside is finite")
    func domain() {
        // measured_power = 1 in a config made every `beacond scan` nearby trap: (-50 / 1)^10 overflowed an Int.
        #expect(Ranging.distance(rssi: -50, measuredPower: 1) == nil)
        #expect(Ranging.distance(rssi: -50, measuredPower: 0) == nil)
        #expect(Ranging.distance(rssi: -50, measuredPower: 127) == nil)
        #expect(Ranging.distance(rssi: 127, measuredPower: -59) == nil)  // RSSI not available
        #expect(Ranging.distance(rssi: 20, measuredPower: -59) == nil)
        #expect(Ranging.distance(rssi: .nan, measuredPower: -59) == nil)
        #expect(Ranging.distance(rssi: -.infinity, measuredPower: -59) == nil)
        for power in Int8.min ... -1 {
            for rssi in stride(from: -128.0, through: -1.0, by: 0.5) {
                let d = Ranging.distance(rssi: rssi, measuredPower: power)
                #expect(d != nil && d!.isFinite && d! >= 0, "rssi \(rssi), power \(power)")
            }
        }
        #expect(Ranging.proximity(distance: nil) == .unknown)
    }

    @Test("the RSSI filter drops the extremes and forgets old samples")
    func filter() {
        var f = RSSIFilter(windowMicroseconds: 10_000_000)
        for (i, r) in ([-60, -60, -60, -60, -60, -60, -60, -60, -60, -20] as [Int8]).enumerated() {
            f.add(r, at: UInt64(i) * 1_000_000)
        }
        #expect(f.value == -60)  // the -20 outlier is the top 10 %
        f.add(-80, at: 25_000_000)  // everything before 15 s is gone
        #expect(f.value == -80)
    }

    @Test("calibration: the median of every reading (127, no reading, left out); the mean of the middle two for an even count")
    func histogram() {
        var h = RSSIHistogram()
        #expect(h.median == nil)
        for r: Int8 in [-60, -70, 127, -65, -128, 20] { h.add(r) }
        #expect(h.samples == 5 && h.median == -65)
        h.add(-61)
        #expect(h.median == -63)
    }

    @Test("measured power against TX: within 20 dB of the 1 m model is quiet; beyond it the difference is given")
    func measuredPowerCheck() {
        #expect(MeasuredPowerCheck.expectedAt1m(tx: 0) == -41)
        #expect(MeasuredPowerCheck.offBy(measuredAt1m: -59, tx: 0) == nil)  // Apple's usual value at 0 dBm
        #expect(MeasuredPowerCheck.offBy(measuredAt1m: -40, tx: -30) == 31)  // says stronger than the radio can be
        #expect(MeasuredPowerCheck.offBy(measuredAt1m: -90, tx: 8) == -57)
    }
}
