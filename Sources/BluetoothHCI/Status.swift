// HCI error codes (Core Vol 1 Part F) by their spec names.

/// An HCI status / error code. Unknown codes print as `0x7E`.
public struct HCIStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let success = HCIStatus(rawValue: 0x00)
    public static let unknownHCICommand = HCIStatus(rawValue: 0x01)
    public static let unknownConnectionIdentifier = HCIStatus(rawValue: 0x02)
    public static let hardwareFailure = HCIStatus(rawValue: 0x03)
    public static let memoryCapacityExceeded = HCIStatus(rawValue: 0x07)
    public static let commandDisallowed = HCIStatus(rawValue: 0x0C)
    public static let unsupportedFeatureOrParameterValue = HCIStatus(rawValue: 0x11)
    public static let invalidHCICommandParameters = HCIStatus(rawValue: 0x12)
    public static let unspecifiedError = HCIStatus(rawValue: 0x1F)
    public static let controllerBusy = HCIStatus(rawValue: 0x3A)
    public static let unknownAdvertisingIdentifier = HCIStatus(rawValue: 0x42)
    public static let limitReached = HCIStatus(rawValue: 0x43)
    public static let packetTooLong = HCIStatus(rawValue: 0x45)

    private static let names: [UInt8: String] = [
        0x00: "Success",
        0x01: "Unknown HCI Command",
        0x02: "Unknown Connection Identifier",
        0x03: "Hardware Failure",
        0x04: "Page Timeout",
        0x05: "Authentication Failure",
        0x06: "PIN or Key Missing",
        0x07: "Memory Capacity Exceeded",
        0x08: "Connection Timeout",
        0x09: "Connection Limit Exceeded",
        0x0C: "Command Disallowed",
        0x0D: "Connection Rejected due to Limited Resources",
        0x11: "Unsupported Feature or Parameter Value",
        0x12: "Invalid HCI Command Parameters",
        0x1F: "Unspecified Error",
        0x20: "Unsupported LL Parameter Value",
        0x3A: "Controller Busy",
        0x3C: "Directed Advertising Timeout",
        0x42: "Unknown Advertising Identifier",
        0x43: "Limit Reached",
        0x45: "Packet Too Long",
    ]

    public var name: String? { Self.names[rawValue] }

    /// `Command Disallowed (0x0C)`, or `0x7E` for a code this codec does not know.
    public var description: String {
        if let name { return "\(name) (\(hex8(rawValue)))" }
        return hex8(rawValue)
    }
}
