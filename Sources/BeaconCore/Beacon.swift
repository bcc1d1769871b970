// The beacon a config describes, in any of the formats beacond advertises: what goes on the air, and how logs,
// STATUS and the tools name it.
import BluetoothHCI

/// The `format` key's values.
public enum BeaconFormat: String, Sendable, Hashable, CaseIterable {
    case ibeacon
    case altbeacon
    case eddystoneUID = "eddystone-uid"
    case eddystoneTLM = "eddystone-tlm"
    case eddystoneEID = "eddystone-eid"
    /// beacond's own health as a BTHome v2 sensor (Home Assistant's BTHome integration reads it).
    case bthome

    /// How logs and STATUS name it.
    public var displayName: String {
        switch self {
        case .ibeacon: "iBeacon"
        case .altbeacon: "AltBeacon"
        case .eddystoneUID: "Eddystone-UID"
        case .eddystoneTLM: "Eddystone-TLM"
        case .eddystoneEID: "Eddystone-EID"
        case .bthome: "BTHome"
        }
    }

    /// Every format's display name, as a list in prose: "iBeacon, AltBeacon, … and Eddystone-EID" (with `and`) or
    /// "… or Eddystone-EID" (with `or`).
    public static func names(_ conjunction: String) -> String {
        proseList(allCases.map(\.displayName), conjunction)
    }

    /// The formats `beacond scan` recognizes: every one but the self-report, which is Home Assistant's to read.
    public static func scannedNames(_ conjunction: String) -> String {
        proseList(allCases.filter { $0 != .bthome }.map(\.displayName), conjunction)
    }
}

public enum Beacon: Sendable, Hashable {
    case iBeacon(IBeacon)
    case altBeacon(AltBeacon)
    case eddystoneUID(EddystoneUID)
    /// Telemetry: the values are beacond's, put in when it goes on the air (`withTelemetry`).
    case eddystoneTLM(EddystoneTLM)
    /// Ephemeral identifiers: the frame changes every 2^K seconds (`withEphemeralID`).
    case eddystoneEID(EIDBeacon)
    /// beacond's self-report: the frame changes with what it reports (`withSelfReport`).
    case bthome(BTHomeBeacon)

    public var format: BeaconFormat {
        switch self {
        case .iBeacon: .ibeacon
        case .altBeacon: .altbeacon
        case .eddystoneUID: .eddystoneUID
        case .eddystoneTLM: .eddystoneTLM
        case .eddystoneEID: .eddystoneEID
        case .bthome: .bthome
        }
    }

    /// This beacon with the identifier for time counter `time` (the others unchanged).
    public func withEphemeralID(_ time: UInt32, cipher: BlockCipher) throws -> Beacon {
        guard case .eddystoneEID(let b) = self else { return self }
        return .eddystoneEID(try b.at(time, cipher: cipher))
    }

    public var eid: EIDBeacon? {
        if case .eddystoneEID(let b) = self { return b }
        return nil
    }

    public var bthome: BTHomeBeacon? {
        if case .bthome(let b) = self { return b }
        return nil
    }

    /// This beacon with the self-report's service data (the others unchanged).
    public func withSelfReport(_ serviceData: [UInt8]) -> Beacon {
        guard case .bthome(let b) = self else { return self }
        return .bthome(b.with(serviceData: serviceData))
    }

    /// True for a beacon whose frame changes while it is on the air.
    public var isTelemetry: Bool { format == .eddystoneTLM }

    /// This beacon with the current telemetry (the others unchanged).
    public func withTelemetry(_ t: Telemetry) -> Beacon {
        guard case .eddystoneTLM = self else { return self }
        return .eddystoneTLM(EddystoneTLM(batteryMillivolts: 0, temperature: t.temperature, advertisingCount: t.advertisingCount,
                                          uptimeTenths: t.uptimeTenths))
    }

    /// The exact advertising data.
    public var advertisingData: AdvertisingData {
        switch self {
        case .iBeacon(let b): b.advertisingData
        case .altBeacon(let b): b.advertisingData
        case .eddystoneUID(let b): b.advertisingData
        case .eddystoneTLM(let b): b.advertisingData
        case .eddystoneEID(let b): b.frame.advertisingData
        case .bthome(let b): b.advertisingData
        }
    }

    /// One line for logs and STATUS: an iBeacon as it always was ("UUID major M minor N"), the others named.
    public var summary: String {
        switch self {
        case .iBeacon(let b): "\(b.uuid) major \(b.major) minor \(b.minor)"
        case .altBeacon(let b): "AltBeacon \(b.uuid) major \(b.major) minor \(b.minor)"
        case .eddystoneUID(let b): "Eddystone-UID namespace \(hexString(b.namespace)) instance \(hexString(b.instance))"
        case .eddystoneTLM: "Eddystone-TLM telemetry"
        case .eddystoneEID(let b): "Eddystone-EID (key \(Redaction.apply(b.keyFile)), K = \(b.exponent))"
        case .bthome(let b): "BTHome self-report" + (b.bindkeyFile.map { " (encrypted, bindkey \(Redaction.apply($0)))" } ?? "")
        }
    }

    /// The journal fields that identify it.
    public var journalFields: [String] {
        switch self {
        case .iBeacon(let b): ["BEACON_UUID=\(b.uuid)", "BEACON_MAJOR=\(b.major)", "BEACON_MINOR=\(b.minor)"]
        case .altBeacon(let b): ["BEACON_FORMAT=altbeacon", "BEACON_UUID=\(b.uuid)", "BEACON_MAJOR=\(b.major)", "BEACON_MINOR=\(b.minor)"]
        case .eddystoneUID(let b): ["BEACON_FORMAT=eddystone-uid", "BEACON_NAMESPACE=\(hexString(b.namespace))",
                                    "BEACON_INSTANCE=\(hexString(b.instance))"]
        case .eddystoneTLM: ["BEACON_FORMAT=eddystone-tlm"]
        case .eddystoneEID(let b): ["BEACON_FORMAT=eddystone-eid", "BEACON_EID_EXPONENT=\(b.exponent)"]
        case .bthome: ["BEACON_FORMAT=bthome"]
        }
    }

    /// What a beacon's kept static address is filed under: the identity a gateway knows it by (its format and
    /// identifiers), not its place in the file or its measured power. Nil for telemetry, which has no identity, and
    /// for the self-report (filed under its format: a config has one).
    public var identityKey: String? {
        switch self {
        case .iBeacon(let b): "ibeacon \(b.uuid) \(b.major) \(b.minor)"
        case .altBeacon(let b): "altbeacon \(b.uuid) \(b.major) \(b.minor)"
        case .eddystoneUID(let b): "eddystone-uid \(hexString(b.namespace)) \(hexString(b.instance))"
        case .eddystoneTLM, .eddystoneEID, .bthome: nil
        }
    }

    /// The power the frame says it has at 1 m (Eddystone's 0 m value less 41 dB); nil for telemetry and BTHome.
    public var measuredPowerAt1m: Int? {
        switch self {
        case .iBeacon(let b): Int(b.measuredPower)
        case .altBeacon(let b): Int(b.referenceRSSI)
        case .eddystoneUID(let b): Int(b.measuredPowerAt1m)
        case .eddystoneEID(let b): Int(b.txPowerAt0m) - 41
        case .eddystoneTLM, .bthome: nil
        }
    }

    public var iBeacon: IBeacon? {
        if case .iBeacon(let b) = self { return b }
        return nil
    }
}

/// What an Eddystone-TLM frame reports: the battery is 0 mV (mains powered), the rest is beacond's.
public struct Telemetry: Sendable, Hashable {
    /// Degrees Celsius in signed 8.8 fixed point; nil: the machine has no thermal zone (0x8000, "not supported").
    public var temperature: Int16?
    /// Advertising PDUs sent since beacond started.
    public var advertisingCount: UInt32
    /// Time since beacond started, in 0.1 s.
    public var uptimeTenths: UInt32

    public init(temperature: Int16? = nil, advertisingCount: UInt32 = 0, uptimeTenths: UInt32 = 0) {
        self.temperature = temperature
        self.advertisingCount = advertisingCount
        self.uptimeTenths = uptimeTenths
    }

    /// Millidegrees Celsius (a thermal zone's `temp`) → 8.8 fixed point, clamped to what the field can hold.
    public static func fixedPoint(millidegrees: Int) -> Int16 {
        let v = (millidegrees * 256) / 1000
        return Int16(clamping: max(v, Int(Int16.min) + 1))
    }
}
