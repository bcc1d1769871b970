// HCI events this project reads (Core Vol 4 Part E §7.7) and the return parameters it decodes.

/// A decoded HCI event. Anything not listed stays `.other` with its raw parameters.
public enum HCIEvent: Sendable, Hashable {
    /// Command Complete (0x0E): credits, opcode, return parameters (usually status first). Opcode 0 only returns credits.
    case commandComplete(credits: UInt8, opcode: Opcode, returnParameters: [UInt8])
    /// Command Status (0x0F).
    case commandStatus(status: HCIStatus, credits: UInt8, opcode: Opcode)
    /// Hardware Error (0x10): the controller needs a reset; advertising state is gone.
    case hardwareError(code: UInt8)
    /// LE Meta (0x3E): subevent code and its parameters.
    case leMeta(subevent: UInt8, parameters: [UInt8])
    case other(code: UInt8, parameters: [UInt8])

    public static let commandCompleteCode: UInt8 = 0x0E
    public static let commandStatusCode: UInt8 = 0x0F
    public static let hardwareErrorCode: UInt8 = 0x10
    public static let leMetaCode: UInt8 = 0x3E

    /// The error thrown for an event whose parameters do not match its code.
    public struct Malformed: Error, Sendable, Equatable {
        public let code: UInt8
        public let reason: String
    }

    /// Decodes an event packet (code, length, parameters) without the H4 type byte.
    public init(packet: [UInt8]) throws(Malformed) {
        guard packet.count >= 2 else { throw Malformed(code: packet.first ?? 0, reason: "shorter than its header") }
        let code = packet[0]
        let length = Int(packet[1])
        guard packet.count == 2 + length else {
            throw Malformed(code: code, reason: "length field says \(length), packet has \(packet.count - 2)")
        }
        var r = ByteReader(packet[2...])
        do {
            switch code {
            case Self.commandCompleteCode:
                let credits = try r.u8()
                let opcode = Opcode(rawValue: try r.u16())
                self = .commandComplete(credits: credits, opcode: opcode, returnParameters: r.rest())
            case Self.commandStatusCode:
                let status = HCIStatus(rawValue: try r.u8())
                let credits = try r.u8()
                let opcode = Opcode(rawValue: try r.u16())
                self = .commandStatus(status: status, credits: credits, opcode: opcode)
            case Self.hardwareErrorCode:
                self = .hardwareError(code: try r.u8())
            case Self.leMetaCode:
                let sub = try r.u8()
                self = .leMeta(subevent: sub, parameters: r.rest())
            default:
                self = .other(code: code, parameters: r.rest())
            }
        } catch {
            throw Malformed(code: code, reason: "parameters too short")
        }
    }

    /// Encodes the event packet (without the H4 type byte); used by tests and fakes.
    public var packet: [UInt8] {
        var w = ByteWriter()
        switch self {
        case .commandComplete(let credits, let opcode, let ret):
            w.u8(Self.commandCompleteCode); w.u8(UInt8(3 + ret.count)); w.u8(credits); w.u16(opcode.rawValue)
            w.append(contentsOf: ret)
        case .commandStatus(let status, let credits, let opcode):
            w.u8(Self.commandStatusCode); w.u8(4); w.u8(status.rawValue); w.u8(credits); w.u16(opcode.rawValue)
        case .hardwareError(let c):
            w.u8(Self.hardwareErrorCode); w.u8(1); w.u8(c)
        case .leMeta(let sub, let params):
            w.u8(Self.leMetaCode); w.u8(UInt8(1 + params.count)); w.u8(sub); w.append(contentsOf: params)
        case .other(let code, let params):
            w.u8(code); w.u8(UInt8(params.count)); w.append(contentsOf: params)
        }
        return w.bytes
    }
}

/// Return parameters of Read Local Version Information (Vol 4 Part E §7.4.1), after the status byte.
public struct LocalVersionInformation: Sendable, Hashable {
    public var hciVersion: UInt8
    public var hciSubversion: UInt16
    public var lmpVersion: UInt8
    public var manufacturer: UInt16
    public var lmpSubversion: UInt16

    public init(returnParameters p: [UInt8]) throws(ByteReader.Truncated) {
        var r = ByteReader(p.dropFirst())
        hciVersion = try r.u8()
        hciSubversion = try r.u16()
        lmpVersion = try r.u8()
        manufacturer = try r.u16()
        lmpSubversion = try r.u16()
    }

    public init(hciVersion: UInt8) {
        self.hciVersion = hciVersion
        hciSubversion = 0; lmpVersion = hciVersion; manufacturer = 0xFFFF; lmpSubversion = 0
    }

    /// HCI version 9 is Core 5.0 (Assigned Numbers §2.1).
    public var isAtLeastCore50: Bool { hciVersion >= 9 }

    /// `5.0`, `4.2`… as the Assigned Numbers name the HCI versions.
    public var coreVersionName: String { Self.coreVersionName(hciVersion: hciVersion) }

    /// The same for a bare version number (mgmt's Read Controller Information reports the HCI version too).
    public static func coreVersionName(hciVersion: UInt8) -> String {
        let names: [UInt8: String] = [0: "1.0b", 1: "1.1", 2: "1.2", 3: "2.0", 4: "2.1", 5: "3.0", 6: "4.0", 7: "4.1",
                                      8: "4.2", 9: "5.0", 10: "5.1", 11: "5.2", 12: "5.3", 13: "5.4", 14: "6.0", 15: "6.1"]
        return names[hciVersion] ?? "HCI version \(hciVersion)"
    }
}

/// The 64-octet Supported Commands bitmap (Vol 4 Part E §6.27).
public struct SupportedCommands: Sendable, Hashable {
    public let octets: [UInt8]

    public init(returnParameters p: [UInt8]) throws(ByteReader.Truncated) {
        var r = ByteReader(p.dropFirst())
        octets = try r.take(64)
    }

    public init(octets: [UInt8]) { self.octets = octets }

    public func contains(octet: Int, bit: Int) -> Bool {
        octet < octets.count && octets[octet] & (1 << bit) != 0
    }

    /// Octet 36 bit 2 (LE Set Extended Advertising Parameters) and bit 5 (… Enable).
    public var hasExtendedAdvertising: Bool { contains(octet: 36, bit: 2) && contains(octet: 36, bit: 5) }
    /// Octet 25 bit 5 (LE Set Advertising Parameters) and octet 26 bit 1 (LE Set Advertising Enable).
    public var hasLegacyAdvertising: Bool { contains(octet: 25, bit: 5) && contains(octet: 26, bit: 1) }
}

/// LE features (Vol 6 Part B §4.6).
public struct LEFeatures: Sendable, Hashable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public init(returnParameters p: [UInt8]) throws(ByteReader.Truncated) {
        var r = ByteReader(p.dropFirst())
        rawValue = try r.u64()
    }

    /// Bit 12: LE Extended Advertising. The Linux kernel decides its command family on this bit alone.
    public var extendedAdvertising: Bool { rawValue & (1 << 12) != 0 }
}

/// The kernel's stack-internal device event (event 0xFD, type EVT_SI_DEVICE), delivered to raw HCI sockets bound to
/// no device: hciN registered, unregistered, up or down. Linux-specific, not in the Core spec.
public struct KernelDeviceEvent: Sendable, Hashable {
    public enum Kind: UInt16, Sendable {
        case registered = 1, unregistered = 2, up = 3, down = 4
    }
    public let kind: Kind
    public let index: UInt16

    public init(kind: Kind, index: UInt16) {
        self.kind = kind
        self.index = index
    }

    /// Decodes an event packet (code 0xFD, length, type u16 = 1, event u16, dev_id u16); nil for anything else.
    public init?(eventPacket p: [UInt8]) {
        guard p.count >= 8, p[0] == 0xFD else { return nil }
        var r = ByteReader(p.dropFirst(2))
        guard let type = try? r.u16(), type == 0x0001, let event = try? r.u16(), let index = try? r.u16(),
              let kind = Kind(rawValue: event) else { return nil }
        self.kind = kind
        self.index = index
    }

    /// Decodes what one read of a device-watching socket returns (H4 type byte first); nil for anything else.
    public init?(h4Packet p: [UInt8]) {
        guard p.first == H4PacketType.event.rawValue else { return nil }
        self.init(eventPacket: Array(p.dropFirst()))
    }
}

/// One advertisement from an LE Advertising Report (subevent 0x02, Vol 4 Part E §7.7.65.2) or an LE Extended
/// Advertising Report (0x0D, §7.7.65.13). Reports are read one after another, as controllers send them.
public struct AdvertisingReport: Sendable, Hashable {
    /// Legacy event type (0 ADV_IND … 4 SCAN_RSP) or the extended event type bits.
    public var eventType: UInt16
    public var isExtended: Bool
    /// 0 public, 1 random, 2 public identity, 3 random identity.
    public var addressType: UInt8
    /// The sender's address (public for types 0 and 2).
    public var address: BluetoothAddress
    /// dBm; 127 = not available.
    public var rssi: Int8
    public var data: [UInt8]

    public static let legacySubevent: UInt8 = 0x02
    public static let extendedSubevent: UInt8 = 0x0D

    /// `address`: the six bytes as sent, least significant first.
    public init(eventType: UInt16, isExtended: Bool, addressType: UInt8, address: [UInt8], rssi: Int8, data: [UInt8]) {
        self.eventType = eventType
        self.isExtended = isExtended
        self.addressType = addressType
        self.address = BluetoothAddress(wire: address, public: addressType & 1 == 0) ?? [0, 0, 0, 0, 0, 0]
        self.rssi = rssi
        self.data = data
    }

    /// The reports in an LE Meta event's parameters (after the subevent code); empty for other subevents.
    /// Throws on reports that run past the end.
    public static func parse(subevent: UInt8, parameters p: [UInt8]) throws(ByteReader.Truncated) -> [AdvertisingReport] {
        var r = ByteReader(p)
        switch subevent {
        case legacySubevent:
            let n = try r.u8()
            var out: [AdvertisingReport] = []
            for _ in 0..<n {
                let type = try r.u8()
                let addressType = try r.u8()
                let address = try r.take(6)
                let length = try r.u8()
                let data = try r.take(Int(length))
                let rssi = try r.i8()
                out.append(AdvertisingReport(eventType: UInt16(type), isExtended: false, addressType: addressType,
                                             address: address, rssi: rssi, data: data))
            }
            return out
        case extendedSubevent:
            let n = try r.u8()
            var out: [AdvertisingReport] = []
            for _ in 0..<n {
                let type = try r.u16()
                let addressType = try r.u8()
                let address = try r.take(6)
                _ = try r.take(4)  // primary PHY, secondary PHY, SID, TX power
                let rssi = try r.i8()
                _ = try r.take(9)  // periodic advertising interval, direct address type and address
                let length = try r.u8()
                let data = try r.take(Int(length))
                out.append(AdvertisingReport(eventType: type, isExtended: true, addressType: addressType,
                                             address: address, rssi: rssi, data: data))
            }
            return out
        default:
            return []
        }
    }

    /// `F0:F1:F2:F3:F4:F5`, most significant byte first as people write addresses.
    public var addressString: String { address.description }

    public var addressTypeName: String {
        switch addressType {
        case 0: "public"
        case 1: "random"
        case 2: "public-identity"
        case 3: "random-identity"
        default: hex8(addressType)
        }
    }

    /// True for a scan response (legacy type 4, or extended bit 3).
    public var isScanResponse: Bool { isExtended ? eventType & 0x08 != 0 : eventType == 4 }
}
