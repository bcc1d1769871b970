// HCI commands as values, each with its opcode and exact parameter layout (Core Vol 4 Part E §7).

/// Parameters of LE Set Advertising Parameters (Vol 4 Part E §7.8.5).
public struct LEAdvertisingParameters: Sendable, Hashable {
    public var intervalMin: AdvertisingInterval
    public var intervalMax: AdvertisingInterval
    public var type: LegacyAdvertisingType
    /// 0 public, 1 random.
    public var ownAddressType: UInt8 = 0
    public var peerAddressType: UInt8 = 0
    public var peerAddress: BluetoothAddress = [0, 0, 0, 0, 0, 0]
    /// Bit 0 channel 37, bit 1 channel 38, bit 2 channel 39.
    public var channelMap: UInt8 = 0x07
    public var filterPolicy: UInt8 = 0

    public init(interval: AdvertisingInterval, type: LegacyAdvertisingType, ownAddressType: UInt8 = 0) {
        intervalMin = interval
        intervalMax = interval
        self.type = type
        self.ownAddressType = ownAddressType
    }
}

/// Parameters of LE Set Extended Advertising Parameters [v1] (Vol 4 Part E §7.8.53).
public struct LEExtendedAdvertisingParameters: Sendable, Hashable {
    public var handle: UInt8
    public var eventProperties: UInt16
    /// 24-bit fields on the wire, in 0.625 ms units.
    public var primaryIntervalMin: UInt32
    public var primaryIntervalMax: UInt32
    public var primaryChannelMap: UInt8 = 0x07
    public var ownAddressType: UInt8 = 0
    public var peerAddressType: UInt8 = 0
    public var peerAddress: BluetoothAddress = [0, 0, 0, 0, 0, 0]
    public var filterPolicy: UInt8 = 0
    /// dBm, or 0x7F (127) for "no preference".
    public var txPower: Int8 = 0x7F
    /// 1 = LE 1M (legacy PDUs must use it).
    public var primaryPHY: UInt8 = 1
    public var secondaryMaxSkip: UInt8 = 0
    public var secondaryPHY: UInt8 = 1
    public var sid: UInt8 = 0
    public var scanRequestNotification: UInt8 = 0

    public init(handle: UInt8, legacyType: LegacyAdvertisingType, interval: AdvertisingInterval, txPower: Int8?,
                ownAddressType: UInt8 = 0) {
        self.handle = handle
        self.ownAddressType = ownAddressType
        eventProperties = legacyType.extendedEventProperties
        primaryIntervalMin = UInt32(interval.units)
        primaryIntervalMax = UInt32(interval.units)
        self.txPower = txPower ?? 0x7F
    }
}

/// One entry of LE Set Extended Advertising Enable.
public struct AdvertisingSetEnable: Sendable, Hashable {
    public var handle: UInt8
    /// 10 ms units, 0 = until disabled.
    public var duration: UInt16 = 0
    /// 0 = no maximum.
    public var maxEvents: UInt8 = 0
    public init(handle: UInt8) { self.handle = handle }
}

/// An HCI command this project sends.
public enum HCICommand: Sendable, Hashable, CustomStringConvertible {
    case reset
    case setEventMask(UInt64)
    case readLocalVersionInformation
    case readLocalSupportedCommands
    case readBDAddr
    case leSetEventMask(UInt64)
    case leReadLocalSupportedFeatures
    case leSetRandomAddress(BluetoothAddress)
    case leSetAdvertisingParameters(LEAdvertisingParameters)
    case leReadAdvertisingPhysicalChannelTxPower
    case leSetAdvertisingData(AdvertisingData)
    case leSetScanResponseData(AdvertisingData)
    case leSetAdvertisingEnable(Bool)
    case leSetExtendedAdvertisingParameters(LEExtendedAdvertisingParameters)
    /// The random address one advertising set uses.
    case leSetAdvertisingSetRandomAddress(handle: UInt8, address: BluetoothAddress)
    case leReadNumberOfSupportedAdvertisingSets
    /// The controller's TX power range (Core 5.0; `beacond status --check`).
    case leReadTransmitPower
    /// Operation 0x03 (complete data), fragment preference 0x01 (do not fragment).
    case leSetExtendedAdvertisingData(handle: UInt8, data: AdvertisingData)
    /// Operation 0x03 (complete data), fragment preference 0x01 (do not fragment).
    case leSetExtendedScanResponseData(handle: UInt8, data: AdvertisingData)
    case leSetExtendedAdvertisingEnable(enable: Bool, sets: [AdvertisingSetEnable])
    case leRemoveAdvertisingSet(handle: UInt8)
    case leClearAdvertisingSets
    /// Legacy scanning: type (0 passive, 1 active), interval, window (0.625 ms units), own address type, filter policy.
    case leSetScanParameters(active: Bool, interval: UInt16, window: UInt16)
    case leSetScanEnable(enable: Bool, filterDuplicates: Bool)
    /// Extended scanning on LE 1M: passive or active, interval and window in 0.625 ms units.
    case leSetExtendedScanParameters(active: Bool, interval: UInt16, window: UInt16)
    case leSetExtendedScanEnable(enable: Bool, filterDuplicates: Bool)

    public var opcode: Opcode {
        switch self {
        case .reset: .reset
        case .setEventMask: .setEventMask
        case .readLocalVersionInformation: .readLocalVersionInformation
        case .readLocalSupportedCommands: .readLocalSupportedCommands
        case .readBDAddr: .readBDAddr
        case .leSetEventMask: .leSetEventMask
        case .leReadLocalSupportedFeatures: .leReadLocalSupportedFeatures
        case .leSetRandomAddress: .leSetRandomAddress
        case .leSetAdvertisingParameters: .leSetAdvertisingParameters
        case .leReadAdvertisingPhysicalChannelTxPower: .leReadAdvertisingPhysicalChannelTxPower
        case .leSetAdvertisingData: .leSetAdvertisingData
        case .leSetScanResponseData: .leSetScanResponseData
        case .leSetAdvertisingEnable: .leSetAdvertisingEnable
        case .leSetExtendedAdvertisingParameters: .leSetExtendedAdvertisingParameters
        case .leSetAdvertisingSetRandomAddress: .leSetAdvertisingSetRandomAddress
        case .leReadNumberOfSupportedAdvertisingSets: .leReadNumberOfSupportedAdvertisingSets
        case .leReadTransmitPower: .leReadTransmitPower
        case .leSetExtendedAdvertisingData: .leSetExtendedAdvertisingData
        case .leSetExtendedScanResponseData: .leSetExtendedScanResponseData
        case .leSetExtendedAdvertisingEnable: .leSetExtendedAdvertisingEnable
        case .leRemoveAdvertisingSet: .leRemoveAdvertisingSet
        case .leClearAdvertisingSets: .leClearAdvertisingSets
        case .leSetScanParameters: .leSetScanParameters
        case .leSetScanEnable: .leSetScanEnable
        case .leSetExtendedScanParameters: .leSetExtendedScanParameters
        case .leSetExtendedScanEnable: .leSetExtendedScanEnable
        }
    }

    /// The parameter bytes, exactly as long as the spec says.
    public var parameters: [UInt8] {
        var w = ByteWriter()
        switch self {
        case .reset, .readLocalVersionInformation, .readLocalSupportedCommands, .readBDAddr,
            .leReadLocalSupportedFeatures, .leReadAdvertisingPhysicalChannelTxPower, .leClearAdvertisingSets,
            .leReadNumberOfSupportedAdvertisingSets, .leReadTransmitPower:
            break
        case .setEventMask(let mask), .leSetEventMask(let mask):
            w.u32(UInt32(truncatingIfNeeded: mask))
            w.u32(UInt32(truncatingIfNeeded: mask >> 32))
        case .leSetRandomAddress(let address):
            w.append(contentsOf: address.wire)
        case .leSetAdvertisingSetRandomAddress(let handle, let address):
            w.u8(handle)
            w.append(contentsOf: address.wire)
        case .leSetAdvertisingParameters(let p):
            w.u16(p.intervalMin.units)
            w.u16(p.intervalMax.units)
            w.u8(p.type.rawValue)
            w.u8(p.ownAddressType)
            w.u8(p.peerAddressType)
            w.append(contentsOf: p.peerAddress.wire)
            w.u8(p.channelMap)
            w.u8(p.filterPolicy)
        case .leSetAdvertisingData(let data), .leSetScanResponseData(let data):
            w.u8(UInt8(data.bytes.count))
            w.append(contentsOf: data.padded)
        case .leSetAdvertisingEnable(let enable):
            w.u8(enable ? 1 : 0)
        case .leSetExtendedAdvertisingParameters(let p):
            w.u8(p.handle)
            w.u16(p.eventProperties)
            w.u24(p.primaryIntervalMin)
            w.u24(p.primaryIntervalMax)
            w.u8(p.primaryChannelMap)
            w.u8(p.ownAddressType)
            w.u8(p.peerAddressType)
            w.append(contentsOf: p.peerAddress.wire)
            w.u8(p.filterPolicy)
            w.i8(p.txPower)
            w.u8(p.primaryPHY)
            w.u8(p.secondaryMaxSkip)
            w.u8(p.secondaryPHY)
            w.u8(p.sid)
            w.u8(p.scanRequestNotification)
        case .leSetExtendedAdvertisingData(let handle, let data), .leSetExtendedScanResponseData(let handle, let data):
            w.u8(handle)
            w.u8(0x03)  // complete extended advertising data
            w.u8(0x01)  // the controller should not fragment
            w.u8(UInt8(data.bytes.count))
            w.append(contentsOf: data.bytes)
        case .leSetExtendedAdvertisingEnable(let enable, let sets):
            w.u8(enable ? 1 : 0)
            w.u8(UInt8(sets.count))
            for s in sets {
                w.u8(s.handle)
                w.u16(s.duration)
                w.u8(s.maxEvents)
            }
        case .leRemoveAdvertisingSet(let handle):
            w.u8(handle)
        case .leSetScanParameters(let active, let interval, let window):
            w.u8(active ? 1 : 0)
            w.u16(interval)
            w.u16(window)
            w.u8(0)  // own address type: public
            w.u8(0)  // accept all advertising packets
        case .leSetScanEnable(let enable, let filterDuplicates):
            w.u8(enable ? 1 : 0)
            w.u8(filterDuplicates ? 1 : 0)
        case .leSetExtendedScanParameters(let active, let interval, let window):
            w.u8(0)  // own address type: public
            w.u8(0)  // accept all advertising packets
            w.u8(0x01)  // scanning PHYs: LE 1M only
            w.u8(active ? 1 : 0)
            w.u16(interval)
            w.u16(window)
        case .leSetExtendedScanEnable(let enable, let filterDuplicates):
            w.u8(enable ? 1 : 0)
            w.u8(filterDuplicates ? 1 : 0)
            w.u16(0)  // duration: until disabled
            w.u16(0)  // period: none
        }
        return w.bytes
    }

    /// The command packet without the H4 type byte: opcode, length, parameters.
    public var packet: [UInt8] {
        let params = parameters
        var w = ByteWriter(capacity: 3 + params.count)
        w.u16(opcode.rawValue)
        w.u8(UInt8(params.count))
        w.append(contentsOf: params)
        return w.bytes
    }

    /// The command as an H4 frame (type byte 0x01 first).
    public var h4Frame: [UInt8] { [H4PacketType.command.rawValue] + packet }

    public var description: String { opcode.description }
}
