// The receiving side of iBeacon: recognizing frames in advertising data and estimating distance the way iOS ranges.
import BluetoothHCI
import CMath

/// What a piece of advertising data is: one of the beacon frames beacond knows, or not a beacon.
public enum BeaconFrame: Sendable, Hashable {
    case iBeacon(IBeacon)
    case altBeacon(AltBeacon)
    case eddystoneUID(EddystoneUID)
    case eddystoneTLM(EddystoneTLM)
    /// An EID frame: its identifier as heard (resolving it needs the beacon's key).
    case eddystoneEID(EddystoneEID)
    /// Apple's iBeacon prefix (4C 00 02 15) but not a valid frame: the reason says what is wrong.
    case malformedIBeacon(reason: String)
    /// Anything else: not a beacon.
    case other

    /// The JSON `kind`.
    public var kind: String {
        switch self {
        case .iBeacon: "ibeacon"
        case .altBeacon: "altbeacon"
        case .eddystoneUID: "eddystone-uid"
        case .eddystoneTLM: "eddystone-tlm"
        case .eddystoneEID: "eddystone-eid"
        case .malformedIBeacon: "malformed_ibeacon"
        case .other: "other"
        }
    }

    /// Finds the iBeacon in advertising data (AD structures, Core Supplement Part A §1). Never traps: truncated
    /// structures and wrong lengths are reported, not read past.
    public init(advertisingData d: [UInt8]) {
        var i = 0
        var sawApplePrefix: String?
        while i < d.count {
            let length = Int(d[i])
            if length == 0 { break }  // the rest is padding
            guard i + 1 + length <= d.count else {
                // A structure that runs past the end: say so when it was going to be an iBeacon.
                let rest = Array(d[(i + 1)...])
                if rest.count >= 5, rest[0] == 0xFF, rest[1] == 0x4C, rest[2] == 0x00, rest[3] == 0x02 {
                    self = .malformedIBeacon(reason: "iBeacon structure truncated: its length byte says \(length), \(rest.count) bytes follow")
                } else {
                    self = sawApplePrefix.map { .malformedIBeacon(reason: $0) } ?? .other
                }
                return
            }
            let type = d[i + 1]
            let value = Array(d[(i + 2)..<(i + 1 + length)])
            i += 1 + length
            if type == 0x16, value.count >= 3, value[0] == 0xAA, value[1] == 0xFE {  // Eddystone service data
                let frame = Array(value[2...])
                if let uid = EddystoneUID(frame: frame) { self = .eddystoneUID(uid); return }
                if let tlm = EddystoneTLM(frame: frame) { self = .eddystoneTLM(tlm); return }
                if frame.count == 10, frame[0] == EddystoneEID.frameType,
                   let eid = EddystoneEID(txPowerAt0m: Int8(bitPattern: frame[1]), eid: Array(frame[2...])) {
                    self = .eddystoneEID(eid)
                    return
                }
                continue
            }
            guard type == 0xFF, value.count >= 2 else { continue }
            if let alt = AltBeacon(manufacturerData: value) {
                self = .altBeacon(alt)
                return
            }
            let company = UInt16(value[0]) | UInt16(value[1]) << 8
            guard value.count >= 4, value[2] == 0x02 else { continue }
            if company != IBeacon.appleCompanyID {
                if value[3] == 0x15 && value.count == 25 {
                    sawApplePrefix = "iBeacon layout under company \(hex16(company)), not Apple's 0x004C"
                }
                continue
            }
            guard value[3] == 0x15 else {
                sawApplePrefix = "iBeacon length byte is \(hex8(value[3])), not 0x15"
                continue
            }
            guard value.count == 25 else {
                sawApplePrefix = "iBeacon body is \(value.count - 4) bytes, not 21"
                continue
            }
            let uuid = BeaconUUID(bytes: Array(value[4..<20]))!
            let major = UInt16(value[20]) << 8 | UInt16(value[21])
            let minor = UInt16(value[22]) << 8 | UInt16(value[23])
            self = .iBeacon(IBeacon(uuid: uuid, major: major, minor: minor, measuredPower: Int8(bitPattern: value[24])))
            return
        }
        self = sawApplePrefix.map { .malformedIBeacon(reason: $0) } ?? .other
    }
}

/// iOS's proximity classes.
public enum Proximity: String, Sendable, Hashable {
    case immediate, near, far, unknown
}

/// Distance from RSSI, as the Android Beacon Library estimates it (the curve fitted to a Nexus 4):
/// ratio = rssi / measuredPower; d = ratio^10 when ratio < 1, else 0.89976 · ratio^7.7095 + 0.111 (metres).
/// Proximity: under 0.5 m immediate, under 4 m near, else far; no RSSI (0) unknown.
public enum Ranging {
    public static let model = "Android Beacon Library curve: ratio = rssi/measured_power; d = ratio^10 if ratio < 1 else 0.89976*ratio^7.7095 + 0.111"

    /// Metres, or nil where the model does not hold: it is a curve of two received powers, so both must be real
    /// negative dBm values (a measured power of 0 or above, a positive RSSI or RSSI 127 "not available" are not).
    /// Within that domain the ratio lies in [1/128, 128] and the result is finite.
    public static func distance(rssi: Double, measuredPower: Int8) -> Double? {
        guard rssi.isFinite, rssi < 0, rssi >= -128, measuredPower < 0 else { return nil }
        let ratio = rssi / Double(measuredPower)
        let d = ratio < 1 ? pow(ratio, 10) : 0.89976 * pow(ratio, 7.7095) + 0.111
        return d.isFinite ? d : nil
    }

    public static func proximity(distance: Double?) -> Proximity {
        guard let d = distance else { return .unknown }
        if d < 0.5 { return .immediate }
        if d < 4 { return .near }
        return .far
    }
}

/// Smoothed RSSI: the mean of the samples of the last `window` seconds with the highest and lowest 10 % dropped
/// (what the Android Beacon Library's running-average filter does, over 10 s instead of 20 s).
public struct RSSIFilter: Sendable {
    public static let description = "trimmed mean (10 % each side) over 10 s"
    public let windowMicroseconds: UInt64
    private var samples: [(at: UInt64, rssi: Int8)] = []

    public init(windowMicroseconds: UInt64 = 10_000_000) { self.windowMicroseconds = windowMicroseconds }

    public mutating func add(_ rssi: Int8, at now: UInt64) {
        samples.append((now, rssi))
        let oldest = now > windowMicroseconds ? now - windowMicroseconds : 0
        if let first = samples.firstIndex(where: { $0.at >= oldest }), first > 0 { samples.removeFirst(first) }
    }

    public var value: Double? {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.map { Int($0.rssi) }.sorted()
        let cut = sorted.count / 10
        let kept = sorted[cut..<(sorted.count - cut)]
        return Double(kept.reduce(0, +)) / Double(kept.count)
    }
}

/// `measured_power` against what the controller says it transmits, for the usual 1 m model: a 2.4 GHz signal loses
/// about 41 dB over its first metre in free space (20·log10(4π·1 m/λ), λ = 12.5 cm), so a beacon sending at T dBm
/// is heard at about T − 41 dBm at 1 m. Real antennas, enclosures and the receiving phone take 10 to 20 dB more (an
/// iBeacon sending at 0 dBm is typically calibrated at −59 dBm), so only a difference beyond that is worth a
/// warning: a value that cannot be right for this transmitter. The cure is a measurement (`beacond scan --calibrate`).
public enum MeasuredPowerCheck {
    /// The free-space loss over 1 m at 2.4 GHz, in dB.
    public static let lossAt1m = 41
    /// Differences beyond this are said.
    public static let tolerance = 20

    /// What a 1 m reading of a `tx` dBm transmitter usually is.
    public static func expectedAt1m(tx: Int) -> Int { tx - lossAt1m }

    /// How far `measuredAt1m` is from that, when it is beyond the tolerance (positive: the config says stronger).
    public static func offBy(measuredAt1m: Int, tx: Int) -> Int? {
        let d = measuredAt1m - expectedAt1m(tx: tx)
        return abs(d) > tolerance ? d : nil
    }
}

/// Every RSSI heard from one beacon during `scan --calibrate`, as counts per dBm (fixed memory however long it
/// runs): the median is the value to use as measured_power when the receiver was 1 m away.
public struct RSSIHistogram: Sendable, Hashable {
    private var counts = [UInt32](repeating: 0, count: 256)
    public private(set) var samples = 0

    public init() {}

    /// 127 means "not available" in an advertising report and is not a reading.
    public mutating func add(_ rssi: Int8) {
        guard rssi != 127 else { return }
        counts[Int(rssi) + 128] &+= 1
        samples += 1
    }

    /// The median in dBm (the mean of the two middle readings for an even count); nil without samples.
    public var median: Double? {
        guard samples > 0 else { return nil }
        func nth(_ n: Int) -> Int {
            var seen = 0
            for (i, c) in counts.enumerated() {
                seen += Int(c)
                if seen > n { return i - 128 }
            }
            return 127
        }
        return Double(nth((samples - 1) / 2) + nth(samples / 2)) / 2
    }

    /// Fewer readings than this make no calibration worth writing down.
    public static let enough = 10
}
