// The beacon a config describes, in any of the formats beacond advertises: what goes on the air, and how logs,
// STATUS and the tools name it.
import BluetoothHCI

/// The `format` key's values.
public enum BeaconFormat: String, Sendable, Hashable, CaseIterable {
    case ibeacon
    case altbeacon
    case eddystoneUID = "eddystone-uid"

    /// How logs and STATUS name it.
    public var displayName: String {
        switch self {
        case .ibeacon: "iBeacon"
        case .altbeacon: "AltBeacon"
        case .eddystoneUID: "Eddystone-UID"
        }
    }

    /// The [beacon] keys that belong to this format (besides `format`).
    public var keys: [String] {
        switch self {
        case .ibeacon: ["uuid", "major", "minor", "measured_power"]
        case .altbeacon: ["uuid", "major", "minor", "measured_power", "company_id", "reserved"]
        case .eddystoneUID: ["namespace", "instance", "measured_power"]
        }
    }
}

public enum Beacon: Sendable, Hashable {
    case iBeacon(IBeacon)
    case altBeacon(AltBeacon)
    case eddystoneUID(EddystoneUID)

    public var format: BeaconFormat {
        switch self {
        case .iBeacon: .ibeacon
        case .altBeacon: .altbeacon
        case .eddystoneUID: .eddystoneUID
        }
    }

    /// The exact advertising data.
    public var advertisingData: AdvertisingData {
        switch self {
        case .iBeacon(let b): b.advertisingData
        case .altBeacon(let b): b.advertisingData
        case .eddystoneUID(let b): b.advertisingData
        }
    }

    /// One line for logs and STATUS: an iBeacon as it always was ("UUID major M minor N"), the others named.
    public var summary: String {
        switch self {
        case .iBeacon(let b): "\(b.uuid) major \(b.major) minor \(b.minor)"
        case .altBeacon(let b): "AltBeacon \(b.uuid) major \(b.major) minor \(b.minor)"
        case .eddystoneUID(let b): "Eddystone-UID namespace \(hexString(b.namespace)) instance \(hexString(b.instance))"
        }
    }

    /// The journal fields that identify it.
    public var journalFields: [String] {
        switch self {
        case .iBeacon(let b): ["BEACON_UUID=\(b.uuid)", "BEACON_MAJOR=\(b.major)", "BEACON_MINOR=\(b.minor)"]
        case .altBeacon(let b): ["BEACON_FORMAT=altbeacon", "BEACON_UUID=\(b.uuid)", "BEACON_MAJOR=\(b.major)", "BEACON_MINOR=\(b.minor)"]
        case .eddystoneUID(let b): ["BEACON_FORMAT=eddystone-uid", "BEACON_NAMESPACE=\(hexString(b.namespace))",
                                    "BEACON_INSTANCE=\(hexString(b.instance))"]
        }
    }

    public var iBeacon: IBeacon? {
        if case .iBeacon(let b) = self { return b }
        return nil
    }
}
