// H4 (UART transport, Core Vol 4 Part A) framing: a type byte, then a packet whose header says its length.

public enum H4PacketType: UInt8, Sendable, Hashable {
    case command = 0x01
    case acl = 0x02
    case sco = 0x03
    case event = 0x04
    case iso = 0x05

    /// Header length and where the payload length sits in it (offset, size in bytes).
    var header: (length: Int, lengthOffset: Int, lengthSize: Int) {
        switch self {
        case .command: (3, 2, 1)  // opcode u16, length u8
        case .acl: (4, 2, 2)  // handle+flags u16, length u16
        case .sco: (3, 2, 1)  // handle+flags u16, length u8
        case .event: (2, 1, 1)  // code u8, length u8
        case .iso: (4, 2, 2)  // handle+flags u16, length u14 (top two bits reserved)
        }
    }
}

/// One complete H4 packet: its type and the packet bytes after the type byte.
public struct H4Packet: Sendable, Hashable {
    public var type: H4PacketType
    public var bytes: [UInt8]
    public init(type: H4PacketType, bytes: [UInt8]) {
        self.type = type
        self.bytes = bytes
    }
}

/// Incremental H4 framer: feed bytes as they arrive, take whole packets out. The same packets come out however the
/// input is split. An unknown type byte breaks the stream for good: there is no way to find the next packet
/// boundary, so the owner must reopen the transport rather than guess.
public struct H4Framer: Sendable {
    public struct FramingError: Error, Sendable, Equatable, CustomStringConvertible {
        public let badTypeByte: UInt8
        public let offset: Int
        public var description: String { "unknown H4 packet type \(hex8(badTypeByte)) at stream offset \(offset)" }
    }

    private var buffer: [UInt8] = []
    private var start = 0
    private var consumed = 0
    private var broken: FramingError?

    public init() {}

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete packet, nil when more bytes are needed.
    public mutating func next() throws(FramingError) -> H4Packet? {
        if let broken { throw broken }
        let available = buffer.count - start
        guard available >= 1 else { compact(); return nil }
        guard let type = H4PacketType(rawValue: buffer[start]) else {
            let e = FramingError(badTypeByte: buffer[start], offset: consumed)
            broken = e
            throw e
        }
        let h = type.header
        guard available >= 1 + h.length else { compact(); return nil }
        var payload = Int(buffer[start + 1 + h.lengthOffset])
        if h.lengthSize == 2 { payload |= Int(buffer[start + 2 + h.lengthOffset]) << 8 }
        if type == .iso { payload &= 0x3FFF }
        let total = 1 + h.length + payload
        guard available >= total else { compact(); return nil }
        let packet = H4Packet(type: type, bytes: Array(buffer[(start + 1)..<(start + total)]))
        start += total
        consumed += total
        return packet
    }

    /// Bytes received but not yet part of a whole packet.
    public var pendingCount: Int { buffer.count - start }

    private mutating func compact() {
        if start > 0 {
            buffer.removeFirst(start)
            start = 0
        }
    }
}
