// Advertising data as AD structures (Core Supplement Part A §1), with the 31-byte legacy limit enforced on construction.

/// One AD structure: a type and its data. Encoded as `length, type, data` where length counts type + data.
public struct ADStructure: Sendable, Hashable {
    public var type: UInt8
    public var data: [UInt8]

    public init(type: UInt8, data: [UInt8]) {
        precondition(data.count <= 254, "AD structure longer than its length byte can say")
        self.type = type
        self.data = data
    }

    /// Flags (Core Supplement Part A §1.3).
    public static func flags(_ value: UInt8) -> ADStructure { ADStructure(type: 0x01, data: [value]) }
    /// Manufacturer Specific Data (Core Supplement Part A §1.4): company identifier (little-endian) then payload.
    public static func manufacturerSpecific(company: UInt16, _ payload: [UInt8]) -> ADStructure {
        ADStructure(type: 0xFF, data: [UInt8(company & 0xFF), UInt8(company >> 8)] + payload)
    }

    public var encodedCount: Int { 2 + data.count }
}

/// Legacy advertising data: at most 31 bytes. A value of this type can never be longer.
public struct AdvertisingData: Sendable, Hashable {
    public static let maximumLegacyLength = 31

    /// Thrown when the structures do not fit in 31 bytes.
    public struct TooLong: Error, Sendable, Equatable { public let length: Int }

    public let bytes: [UInt8]

    public init(_ structures: [ADStructure]) throws(TooLong) {
        var out: [UInt8] = []
        for s in structures {
            out.append(UInt8(1 + s.data.count))
            out.append(s.type)
            out.append(contentsOf: s.data)
        }
        guard out.count <= Self.maximumLegacyLength else { throw TooLong(length: out.count) }
        bytes = out
    }

    /// Raw bytes as received from a controller (no structure check, only the length limit).
    public init(raw: [UInt8]) throws(TooLong) {
        guard raw.count <= Self.maximumLegacyLength else { throw TooLong(length: raw.count) }
        bytes = raw
    }

    /// The data zero-padded to 31 bytes, as LE Set Advertising Data carries it.
    public var padded: [UInt8] { bytes + [UInt8](repeating: 0, count: Self.maximumLegacyLength - bytes.count) }
}

/// An advertising interval in the controller's unit of 0.625 ms, within the legacy range 0x0020…0x4000 (20 ms … 10.24 s).
public struct AdvertisingInterval: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let minimumUnits: UInt16 = 0x0020
    public static let maximumUnits: UInt16 = 0x4000

    /// Count of 0.625 ms units.
    public let units: UInt16

    public init?(units: UInt16) {
        guard (Self.minimumUnits...Self.maximumUnits).contains(units) else { return nil }
        self.units = units
    }

    /// The Core's range in milliseconds, 20 ms to 10.24 s: the config's `interval_ms` takes exactly these
    /// (ConfigSchema.interval), and they map exactly onto minimumUnits…maximumUnits.
    public static let millisecondRange = 20...10240

    /// Rounds to the nearest 0.625 ms unit (halves up); nil outside millisecondRange.
    public init?(milliseconds: Int) {
        guard Self.millisecondRange.contains(milliseconds) else { return nil }
        // ms / 0.625 = ms * 1.6; the range above maps exactly onto 0x20…0x4000.
        self.init(units: UInt16((milliseconds * 16 + 5) / 10))
    }

    /// 100 ms, Apple's Proximity Beacon recommendation.
    public static let appleRecommended = AdvertisingInterval(units: 160)!
    /// Before Core 5.0, non-connectable and scannable advertising could not go below 100 ms.
    public static let pre50NonConnectableFloor = AdvertisingInterval(units: 0x00A0)!

    /// Interval in microseconds (exact: one unit is 625 µs).
    public var microseconds: Int { Int(units) * 625 }

    /// `100 ms` or `21.25 ms`.
    public var description: String {
        let us = microseconds
        var s = "\(us / 1000)"
        var frac = us % 1000
        if frac != 0 {
            var digits = ""
            var scale = 100
            while frac != 0 {
                digits += "\(frac / scale)"
                frac %= scale
                scale /= 10
            }
            s += "." + digits
        }
        return s + " ms"
    }

    public static func < (a: Self, b: Self) -> Bool { a.units < b.units }
}

/// Legacy advertising PDU types used by LE Set Advertising Parameters (Vol 4 Part E §7.8.5).
public enum LegacyAdvertisingType: UInt8, Sendable {
    /// ADV_IND: connectable and scannable undirected.
    case connectableUndirected = 0x00
    /// ADV_SCAN_IND: scannable undirected.
    case scannableUndirected = 0x02
    /// ADV_NONCONN_IND: non-connectable undirected, what Apple's beacon spec asks for.
    case nonConnectableUndirected = 0x03

    public var pduName: String {
        switch self {
        case .connectableUndirected: "ADV_IND"
        case .scannableUndirected: "ADV_SCAN_IND"
        case .nonConnectableUndirected: "ADV_NONCONN_IND"
        }
    }

    /// The extended advertising event properties that put the same legacy PDU on the air (Vol 4 Part E §7.8.53).
    public var extendedEventProperties: UInt16 {
        switch self {
        case .connectableUndirected: 0x0013  // legacy | scannable | connectable
        case .scannableUndirected: 0x0012  // legacy | scannable
        case .nonConnectableUndirected: 0x0010  // legacy only
        }
    }
}
