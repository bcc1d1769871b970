// The kernel's Bluetooth management interface (HCI_CHANNEL_CONTROL) as values: commands, replies and events,
// little-endian, exact lengths (recent kernels reject extra bytes). Layouts from BlueZ's doc/mgmt-api.txt.
import BluetoothHCI

/// A management command code. Unknown codes print as `0x0054`.
public struct MgmtOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let readVersion = MgmtOpcode(rawValue: 0x0001)
    public static let readIndexList = MgmtOpcode(rawValue: 0x0003)
    public static let readControllerInformation = MgmtOpcode(rawValue: 0x0004)
    public static let setPowered = MgmtOpcode(rawValue: 0x0005)
    public static let readAdvertisingFeatures = MgmtOpcode(rawValue: 0x003D)
    public static let addAdvertising = MgmtOpcode(rawValue: 0x003E)
    public static let removeAdvertising = MgmtOpcode(rawValue: 0x003F)
    public static let addExtendedAdvertisingParameters = MgmtOpcode(rawValue: 0x0054)
    public static let addExtendedAdvertisingData = MgmtOpcode(rawValue: 0x0055)

    private static let names: [UInt16: String] = [
        0x0001: "Read Management Version Information", 0x0003: "Read Controller Index List",
        0x0004: "Read Controller Information", 0x0005: "Set Powered", 0x003D: "Read Advertising Features",
        0x003E: "Add Advertising", 0x003F: "Remove Advertising", 0x0054: "Add Extended Advertising Parameters",
        0x0055: "Add Extended Advertising Data",
    ]

    public var description: String {
        Self.names[rawValue].map { "\($0) (\(hex16(rawValue)))" } ?? hex16(rawValue)
    }
}

/// A management status code (mgmt-api.txt, Error Codes).
public struct MgmtStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let success = MgmtStatus(rawValue: 0x00)
    public static let unknownCommand = MgmtStatus(rawValue: 0x01)
    public static let failed = MgmtStatus(rawValue: 0x03)
    public static let busy = MgmtStatus(rawValue: 0x0A)
    public static let rejected = MgmtStatus(rawValue: 0x0B)
    public static let notSupported = MgmtStatus(rawValue: 0x0C)
    public static let invalidParameters = MgmtStatus(rawValue: 0x0D)
    public static let notPowered = MgmtStatus(rawValue: 0x0F)
    public static let invalidIndex = MgmtStatus(rawValue: 0x11)
    public static let rfkilled = MgmtStatus(rawValue: 0x12)
    public static let permissionDenied = MgmtStatus(rawValue: 0x14)

    private static let names: [UInt8: String] = [
        0x00: "Success", 0x01: "Unknown Command", 0x02: "Not Connected", 0x03: "Failed", 0x04: "Connect Failed",
        0x05: "Authentication Failed", 0x06: "Not Paired", 0x07: "No Resources", 0x08: "Timeout",
        0x09: "Already Connected", 0x0A: "Busy", 0x0B: "Rejected", 0x0C: "Not Supported", 0x0D: "Invalid Parameters",
        0x0E: "Disconnected", 0x0F: "Not Powered", 0x10: "Cancelled", 0x11: "Invalid Index", 0x12: "RFKilled",
        0x13: "Already Paired", 0x14: "Permission Denied",
    ]

    public var description: String { Self.names[rawValue].map { "\($0) (\(hex8(rawValue)))" } ?? hex8(rawValue) }
}

/// Advertising instance flags (Add Advertising / Add Extended Advertising Parameters, and the supported flags of
/// Read Advertising Features).
public struct MgmtAdvertisingFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Bit 0: undirected connectable advertising.
    public static let connectable = MgmtAdvertisingFlags(rawValue: 1 << 0)
    /// Bit 11 (supported flags): the controller has advertising sets of its own (extended advertising), so the
    /// instances are on the air together; without it the kernel rotates them on the one legacy advertiser.
    public static let hardwareOffload = MgmtAdvertisingFlags(rawValue: 1 << 11)
    /// Bit 10 (supported flags): the TX power can be requested.
    public static let canSetTxPower = MgmtAdvertisingFlags(rawValue: 1 << 10)
    /// Bits 12–15: which optional parameters of Add Extended Advertising Parameters are set.
    public static let durationValid = MgmtAdvertisingFlags(rawValue: 1 << 12)
    public static let timeoutValid = MgmtAdvertisingFlags(rawValue: 1 << 13)
    public static let intervalsValid = MgmtAdvertisingFlags(rawValue: 1 << 14)
    public static let txPowerValid = MgmtAdvertisingFlags(rawValue: 1 << 15)
}

/// A management command beacond sends.
public enum MgmtCommand: Sendable, Hashable {
    case readVersion
    case readIndexList
    case readControllerInformation
    case setPowered(Bool)
    case readAdvertisingFeatures
    /// instance, flags, duration (s), timeout (s), advertising data, scan response.
    case addAdvertising(instance: UInt8, flags: MgmtAdvertisingFlags, duration: UInt16, timeout: UInt16,
                        data: [UInt8], scanResponse: [UInt8])
    case removeAdvertising(instance: UInt8)
    /// Intervals as 0.625 ms units (u32 on the wire), TX power in dBm.
    case addExtendedAdvertisingParameters(instance: UInt8, flags: MgmtAdvertisingFlags, duration: UInt16,
                                          timeout: UInt16, minInterval: AdvertisingInterval, maxInterval: AdvertisingInterval, txPower: Int8)
    case addExtendedAdvertisingData(instance: UInt8, data: [UInt8], scanResponse: [UInt8])

    public var opcode: MgmtOpcode {
        switch self {
        case .readVersion: .readVersion
        case .readIndexList: .readIndexList
        case .readControllerInformation: .readControllerInformation
        case .setPowered: .setPowered
        case .readAdvertisingFeatures: .readAdvertisingFeatures
        case .addAdvertising: .addAdvertising
        case .removeAdvertising: .removeAdvertising
        case .addExtendedAdvertisingParameters: .addExtendedAdvertisingParameters
        case .addExtendedAdvertisingData: .addExtendedAdvertisingData
        }
    }

    public var parameters: [UInt8] {
        var w = ByteWriter()
        switch self {
        case .readVersion, .readIndexList, .readControllerInformation, .readAdvertisingFeatures: break
        case .setPowered(let on): w.u8(on ? 1 : 0)
        case .addAdvertising(let instance, let flags, let duration, let timeout, let data, let scan):
            w.u8(instance); w.u32(flags.rawValue); w.u16(duration); w.u16(timeout)
            w.u8(UInt8(data.count)); w.u8(UInt8(scan.count)); w.append(contentsOf: data); w.append(contentsOf: scan)
        case .removeAdvertising(let instance): w.u8(instance)
        case .addExtendedAdvertisingParameters(let instance, let flags, let duration, let timeout, let minI, let maxI, let tx):
            w.u8(instance); w.u32(flags.rawValue); w.u16(duration); w.u16(timeout); w.u32(UInt32(minI.units)); w.u32(UInt32(maxI.units)); w.i8(tx)
        case .addExtendedAdvertisingData(let instance, let data, let scan):
            w.u8(instance); w.u8(UInt8(data.count)); w.u8(UInt8(scan.count))
            w.append(contentsOf: data); w.append(contentsOf: scan)
        }
        return w.bytes
    }

    /// The whole frame: opcode, controller index (0xFFFF = none), parameter length, parameters.
    public func frame(index: UInt16) -> [UInt8] {
        let p = parameters
        var w = ByteWriter(capacity: 6 + p.count)
        w.u16(opcode.rawValue); w.u16(index); w.u16(UInt16(p.count)); w.append(contentsOf: p)
        return w.bytes
    }

    public static let noIndex: UInt16 = 0xFFFF
}

/// A management event: its controller index and what it says.
public struct MgmtEvent: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case commandComplete(MgmtOpcode, MgmtStatus, [UInt8])
        case commandStatus(MgmtOpcode, MgmtStatus)
        case indexAdded
        case indexRemoved
        case newSettings(UInt32)
        case advertisingAdded(instance: UInt8)
        case advertisingRemoved(instance: UInt8)
        case other(code: UInt16, [UInt8])
    }
    public var index: UInt16
    public var kind: Kind

    public init(index: UInt16, kind: Kind) {
        self.index = index
        self.kind = kind
    }

    public struct Malformed: Error, Sendable, Equatable { public let reason: String }

    /// Decodes one event frame (event code, index, length, parameters) as read from the control socket.
    public init(frame: [UInt8]) throws(Malformed) {
        var r = ByteReader(frame)
        guard let code = try? r.u16(), let index = try? r.u16(), let length = try? r.u16() else {
            throw Malformed(reason: "shorter than the 6-byte header")
        }
        guard r.remaining == Int(length) else {
            throw Malformed(reason: "length field says \(length), frame has \(r.remaining)")
        }
        self.index = index
        func need(_ n: Int) throws(Malformed) {
            if r.remaining < n { throw Malformed(reason: "event \(hex16(code)) too short") }
        }
        switch code {
        case 0x0001:
            try need(3)
            let op = MgmtOpcode(rawValue: try! r.u16()), status = MgmtStatus(rawValue: try! r.u8())
            kind = .commandComplete(op, status, r.rest())
        case 0x0002:
            try need(3)
            kind = .commandStatus(MgmtOpcode(rawValue: try! r.u16()), MgmtStatus(rawValue: try! r.u8()))
        case 0x0004: kind = .indexAdded
        case 0x0005: kind = .indexRemoved
        case 0x0006:
            try need(4)
            kind = .newSettings(try! r.u32())
        case 0x0023:
            try need(1)
            kind = .advertisingAdded(instance: try! r.u8())
        case 0x0024:
            try need(1)
            kind = .advertisingRemoved(instance: try! r.u8())
        default: kind = .other(code: code, r.rest())
        }
    }
}

/// Current/supported settings bits of Read Controller Information and New Settings.
public enum MgmtSettings {
    public static let powered: UInt32 = 1 << 0
    public static let lowEnergy: UInt32 = 1 << 9
    public static let advertising: UInt32 = 1 << 10
}

/// Return parameters of Read Controller Information.
public struct MgmtControllerInformation: Sendable, Hashable {
    /// The controller's public address.
    public var address: BluetoothAddress
    public var bluetoothVersion: UInt8
    public var manufacturer: UInt16
    public var supportedSettings: UInt32
    public var currentSettings: UInt32

    public init(returnParameters p: [UInt8]) throws(ByteReader.Truncated) {
        var r = ByteReader(p)
        address = BluetoothAddress(wire: try r.take(6), public: true)!
        bluetoothVersion = try r.u8()
        manufacturer = try r.u16()
        supportedSettings = try r.u32()
        currentSettings = try r.u32()
    }

    public var isPowered: Bool { currentSettings & MgmtSettings.powered != 0 }
    public var supportsLE: Bool { supportedSettings & MgmtSettings.lowEnergy != 0 }
}

/// Return parameters of Read Advertising Features.
public struct MgmtAdvertisingFeatures: Sendable, Hashable {
    public var supportedFlags: MgmtAdvertisingFlags
    public var maxAdvertisingDataLength: UInt8
    public var maxScanResponseLength: UInt8
    public var maxInstances: UInt8
    public var instances: [UInt8]

    public init(returnParameters p: [UInt8]) throws(ByteReader.Truncated) {
        var r = ByteReader(p)
        supportedFlags = MgmtAdvertisingFlags(rawValue: try r.u32())
        maxAdvertisingDataLength = try r.u8()
        maxScanResponseLength = try r.u8()
        maxInstances = try r.u8()
        let count = try r.u8()
        instances = try r.take(Int(count))
    }
}
