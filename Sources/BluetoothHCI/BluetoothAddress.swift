// Bluetooth device addresses (Core Vol 6 Part B §1.3): the one value every module uses, with the kinds beacond makes
// from random bytes it is given, and the text people write them as.

/// A 48-bit device address, public or random. Random addresses say their kind in their two top bits.
public struct BluetoothAddress: Sendable, Hashable, CustomStringConvertible, ExpressibleByArrayLiteral {
    /// The kinds of address (Core Vol 6 Part B §1.3).
    public enum Kind: String, Sendable, Hashable {
        /// A public address (the controller's own, from the IEEE).
        case `public`
        /// Random static: the two top bits 11; kept for a while (beacond keeps one per beacon).
        case staticRandom = "static"
        /// Non-resolvable private: the two top bits 00; changed often, links to nothing.
        case nonResolvable = "non-resolvable"
        /// Resolvable private: the two top bits 01, made from an identity resolving key.
        case resolvable
        /// A random address with the two top bits 10, which the Core reserves.
        case reserved
    }

    /// The six bytes as on the wire: least significant first.
    public let wire: [UInt8]
    /// A public address (the random kinds are told by the top bits).
    public let isPublic: Bool

    /// Nil unless exactly six bytes.
    public init?(wire: [UInt8], public isPublic: Bool = false) {
        guard wire.count == 6 else { return nil }
        self.wire = wire
        self.isPublic = isPublic
    }

    /// A random address from its six bytes as on the wire (tests and tables).
    public init(arrayLiteral bytes: UInt8...) {
        precondition(bytes.count == 6, "a Bluetooth address has 6 bytes")
        wire = bytes
        isPublic = false
    }

    /// `C3:12:34:56:78:9A` (most significant first, any case); nil unless exactly six pairs of hex digits.
    public init?(parsing text: String, public isPublic: Bool = false) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var bytes: [UInt8] = []
        for p in parts {
            guard p.utf8.count == 2, p.unicodeScalars.allSatisfy(\.properties.isASCIIHexDigit), let b = UInt8(p, radix: 16) else { return nil }
            bytes.append(b)
        }
        self.init(wire: bytes.reversed(), public: isPublic)
    }

    /// Byte `i` as on the wire (0: least significant).
    public subscript(i: Int) -> UInt8 { wire[i] }

    public var kind: Kind {
        if isPublic { return .public }
        switch wire[5] >> 6 {
        case 0b11: return .staticRandom
        case 0b00: return .nonResolvable
        case 0b01: return .resolvable
        default: return .reserved
        }
    }

    /// A random address whose kind is what its top bits say and whose other 46 bits are neither all 0 nor all 1.
    public var isValidRandom: Bool {
        guard !isPublic, kind != .reserved else { return false }
        let low = wire[0..<5]
        let top6 = wire[5] & 0x3F
        let allZero = low.allSatisfy { $0 == 0 } && top6 == 0
        let allOne = low.allSatisfy { $0 == 0xFF } && top6 == 0x3F
        return !allZero && !allOne
    }

    /// A valid random static address.
    public var isStatic: Bool { kind == .staticRandom && isValidRandom }

    /// Most significant first, upper case, colons: `C3:12:34:56:78:9A`.
    public var description: String { wire.reversed().map { hexString([$0], uppercase: true) }.joined(separator: ":") }

    /// A random static address from random bytes; nil when the 46 random bits are all 0 or all 1 (draw again).
    public static func makeStatic(from random: [UInt8]) -> BluetoothAddress? { make(random, top: 0b11) }

    /// A non-resolvable private address from random bytes; nil when the 46 random bits are all 0 or all 1.
    public static func makeNonResolvable(from random: [UInt8]) -> BluetoothAddress? { make(random, top: 0b00) }

    private static func make(_ random: [UInt8], top: UInt8) -> BluetoothAddress? {
        guard random.count >= 6 else { return nil }
        var bytes = Array(random.prefix(6))
        bytes[5] = (bytes[5] & 0x3F) | (top << 6)
        let a = BluetoothAddress(wire: bytes)!
        return a.isValidRandom ? a : nil
    }
}

/// The address an advertisement comes from, as the controller is told (Own_Address_Type and, for random, the address).
public enum OwnAddress: Sendable, Hashable, CustomStringConvertible {
    /// The controller's public address.
    case `public`
    /// A random address (static or private).
    case random(BluetoothAddress)

    /// Own Address Type in the parameters commands: 0 public, 1 random.
    public var type: UInt8 { if case .random = self { 1 } else { 0 } }

    /// `C3:12:…` most significant first, as people write addresses; "public" for the controller's own.
    public var description: String {
        switch self {
        case .public: "public"
        case .random(let a): a.description
        }
    }
}
