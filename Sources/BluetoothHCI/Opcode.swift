// HCI command opcodes (OGF << 10 | OCF) with the names the Core spec and btmon use.

/// An HCI command opcode. Unknown opcodes print as `0x2008`, never as "unknown".
public struct Opcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(ogf: UInt8, ocf: UInt16) { rawValue = UInt16(ogf) << 10 | (ocf & 0x03FF) }

    public var ogf: UInt8 { UInt8(rawValue >> 10) }
    public var ocf: UInt16 { rawValue & 0x03FF }

    /// Vol 4 Part E §7.3.2
    public static let reset = Opcode(ogf: 0x03, ocf: 0x0003)
    /// Vol 4 Part E §7.3.1
    public static let setEventMask = Opcode(ogf: 0x03, ocf: 0x0001)
    /// Vol 4 Part E §7.4.1
    public static let readLocalVersionInformation = Opcode(ogf: 0x04, ocf: 0x0001)
    /// Vol 4 Part E §7.4.2
    public static let readLocalSupportedCommands = Opcode(ogf: 0x04, ocf: 0x0002)
    /// Vol 4 Part E §7.4.6
    public static let readBDAddr = Opcode(ogf: 0x04, ocf: 0x0009)
    /// Vol 4 Part E §7.8.1
    public static let leSetEventMask = Opcode(ogf: 0x08, ocf: 0x0001)
    /// Vol 4 Part E §7.8.3
    public static let leReadLocalSupportedFeatures = Opcode(ogf: 0x08, ocf: 0x0003)
    /// Vol 4 Part E §7.8.4
    public static let leSetRandomAddress = Opcode(ogf: 0x08, ocf: 0x0005)
    /// Vol 4 Part E §7.8.5
    public static let leSetAdvertisingParameters = Opcode(ogf: 0x08, ocf: 0x0006)
    /// Vol 4 Part E §7.8.6
    public static let leReadAdvertisingPhysicalChannelTxPower = Opcode(ogf: 0x08, ocf: 0x0007)
    /// Vol 4 Part E §7.8.7
    public static let leSetAdvertisingData = Opcode(ogf: 0x08, ocf: 0x0008)
    /// Vol 4 Part E §7.8.8
    public static let leSetScanResponseData = Opcode(ogf: 0x08, ocf: 0x0009)
    /// Vol 4 Part E §7.8.9
    public static let leSetAdvertisingEnable = Opcode(ogf: 0x08, ocf: 0x000A)
    /// Vol 4 Part E §7.8.10
    public static let leSetScanParameters = Opcode(ogf: 0x08, ocf: 0x000B)
    /// Vol 4 Part E §7.8.11
    public static let leSetScanEnable = Opcode(ogf: 0x08, ocf: 0x000C)
    /// Vol 4 Part E §7.8.52
    public static let leSetAdvertisingSetRandomAddress = Opcode(ogf: 0x08, ocf: 0x0035)
    /// Vol 4 Part E §7.8.53
    public static let leSetExtendedAdvertisingParameters = Opcode(ogf: 0x08, ocf: 0x0036)
    /// Vol 4 Part E §7.8.54
    public static let leSetExtendedAdvertisingData = Opcode(ogf: 0x08, ocf: 0x0037)
    /// Vol 4 Part E §7.8.55
    public static let leSetExtendedScanResponseData = Opcode(ogf: 0x08, ocf: 0x0038)
    /// Vol 4 Part E §7.8.56
    public static let leSetExtendedAdvertisingEnable = Opcode(ogf: 0x08, ocf: 0x0039)
    /// Vol 4 Part E §7.8.59
    public static let leRemoveAdvertisingSet = Opcode(ogf: 0x08, ocf: 0x003C)
    /// Vol 4 Part E §7.8.60
    public static let leClearAdvertisingSets = Opcode(ogf: 0x08, ocf: 0x003D)
    /// Vol 4 Part E §7.8.58
    public static let leReadNumberOfSupportedAdvertisingSets = Opcode(ogf: 0x08, ocf: 0x003B)
    public static let leReadTransmitPower = Opcode(ogf: 0x08, ocf: 0x004B)
    /// Vol 4 Part E §7.8.64
    public static let leSetExtendedScanParameters = Opcode(ogf: 0x08, ocf: 0x0041)
    /// Vol 4 Part E §7.8.65
    public static let leSetExtendedScanEnable = Opcode(ogf: 0x08, ocf: 0x0042)

    private static let names: [Opcode: String] = [
        .reset: "Reset",
        .setEventMask: "Set Event Mask",
        .readLocalVersionInformation: "Read Local Version Information",
        .readLocalSupportedCommands: "Read Local Supported Commands",
        .readBDAddr: "Read BD ADDR",
        .leSetEventMask: "LE Set Event Mask",
        .leReadLocalSupportedFeatures: "LE Read Local Supported Features",
        .leSetRandomAddress: "LE Set Random Address",
        .leSetAdvertisingParameters: "LE Set Advertising Parameters",
        .leReadAdvertisingPhysicalChannelTxPower: "LE Read Advertising Physical Channel Tx Power",
        .leSetAdvertisingData: "LE Set Advertising Data",
        .leSetScanResponseData: "LE Set Scan Response Data",
        .leSetAdvertisingEnable: "LE Set Advertising Enable",
        .leSetScanParameters: "LE Set Scan Parameters",
        .leSetScanEnable: "LE Set Scan Enable",
        .leSetAdvertisingSetRandomAddress: "LE Set Advertising Set Random Address",
        .leSetExtendedAdvertisingParameters: "LE Set Extended Advertising Parameters",
        .leSetExtendedAdvertisingData: "LE Set Extended Advertising Data",
        .leSetExtendedScanResponseData: "LE Set Extended Scan Response Data",
        .leSetExtendedAdvertisingEnable: "LE Set Extended Advertising Enable",
        .leRemoveAdvertisingSet: "LE Remove Advertising Set",
        .leClearAdvertisingSets: "LE Clear Advertising Sets",
        .leReadNumberOfSupportedAdvertisingSets: "LE Read Number of Supported Advertising Sets",
        .leReadTransmitPower: "LE Read Transmit Power",
        .leSetExtendedScanParameters: "LE Set Extended Scan Parameters",
        .leSetExtendedScanEnable: "LE Set Extended Scan Enable",
    ]

    /// The spec name, or nil for opcodes this codec does not know.
    public var name: String? { Self.names[self] }

    /// `LE Set Advertising Data (0x2008)`, or `0xFC01` for an unknown opcode.
    public var description: String {
        if let name { return "\(name) (\(hex16(rawValue)))" }
        return hex16(rawValue)
    }
}
