// The proximity UUID: 16 bytes, written 8-4-4-4-12, sent on air in the order it is written.
import BluetoothHCI

/// A 128-bit UUID as iBeacon uses it.
public struct BeaconUUID: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// Why a UUID string was refused: the offending character's 0-based offset and what was expected there.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public let offset: Int
        public let message: String
        public var description: String { message }
    }

    /// Parses `E2C56DB5-DFFB-48D2-B060-D0F5A71096E0` (any case). Nothing else: no braces, no `urn:uuid:`.
    public init(parsing text: String) throws(ParseError) {
        let scalars = Array(text.unicodeScalars)
        let hyphens: Set<Int> = [8, 13, 18, 23]
        var out: [UInt8] = []
        out.reserveCapacity(16)
        var high: UInt8? = nil
        for (i, c) in scalars.enumerated() {
            if i >= 36 {
                throw ParseError(offset: i, message: "UUID is too long: expected 36 characters (8-4-4-4-12), found \(scalars.count)")
            }
            if hyphens.contains(i) {
                guard c == "-" else {
                    throw ParseError(offset: i, message: "expected '-' at character \(i + 1), found \(Self.show(c))")
                }
                continue
            }
            guard let v = Self.hexValue(c) else {
                throw ParseError(offset: i, message: "expected a hex digit at character \(i + 1), found \(Self.show(c))")
            }
            if let h = high { out.append(h << 4 | v); high = nil } else { high = v }
        }
        guard scalars.count == 36 else {
            throw ParseError(offset: scalars.count,
                             message: "UUID is too short: expected 36 characters (8-4-4-4-12), found \(scalars.count)")
        }
        bytes = out
    }

    /// A version-4 (random) UUID from 16 random bytes, with the RFC 9562 version and variant bits set.
    public static func version4(random: [UInt8]) -> BeaconUUID {
        precondition(random.count == 16, "version4 needs 16 random bytes")
        var b = random
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        return BeaconUUID(bytes: b)!
    }

    public var isVersion4: Bool { bytes[6] >> 4 == 4 && bytes[8] >> 6 == 0b10 }

    /// Uppercase and hyphenated, like macOS `uuidgen`.
    public var description: String { formatted(uppercase: true) }

    public func formatted(uppercase: Bool) -> String {
        var out: [UInt8] = []
        for (i, c) in hexString(bytes, uppercase: uppercase).utf8.enumerated() {
            if i == 8 || i == 12 || i == 16 || i == 20 { out.append(0x2D) }
            out.append(c)
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: Unicode.Scalar) -> UInt8? {
        switch c.value {
        case 0x30...0x39: UInt8(c.value - 0x30)
        case 0x41...0x46: UInt8(c.value - 0x41 + 10)
        case 0x61...0x66: UInt8(c.value - 0x61 + 10)
        default: nil
        }
    }

    static func show(_ c: Unicode.Scalar) -> String {
        c.isASCII && c.value >= 0x20 && c.value < 0x7F ? "'\(Character(c))'" : "U+\(hexString([UInt8(c.value >> 8 & 0xFF), UInt8(c.value & 0xFF)], uppercase: true))"
    }
}
