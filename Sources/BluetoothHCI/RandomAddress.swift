// Random device addresses (Core Vol 6 Part B §1.3.2): the two kinds beacond makes, from random bytes it is given.

public enum RandomAddress {
    /// A random static address: the two most significant bits 1, the other 46 bits neither all 0 nor all 1.
    /// `random`: 6 bytes, least significant first (as on the wire). Nil when the bits are all 0 or all 1 (draw again).
    public static func makeStatic(from random: [UInt8]) -> [UInt8]? {
        make(random, top: 0b11)
    }

    /// A non-resolvable private address: the two most significant bits 0, the other 46 bits neither all 0 nor all 1.
    public static func makeNonResolvable(from random: [UInt8]) -> [UInt8]? {
        make(random, top: 0b00)
    }

    /// True for a valid random static address (least significant byte first).
    public static func isStatic(_ a: [UInt8]) -> Bool {
        a.count == 6 && a[5] >> 6 == 0b11 && randomPartIsValid(a)
    }

    /// `C3:12:34:56:78:9A` (most significant first) → wire order; nil unless exactly six hex pairs.
    public static func parse(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var bytes: [UInt8] = []
        for p in parts {
            guard p.utf8.count == 2, p.unicodeScalars.allSatisfy(\.properties.isASCIIHexDigit), let b = UInt8(p, radix: 16) else { return nil }
            bytes.append(b)
        }
        return bytes.reversed()
    }

    /// Most significant first, upper case, colons.
    public static func format(_ a: [UInt8]) -> String {
        a.reversed().map { hexString([$0], uppercase: true) }.joined(separator: ":")
    }

    private static func make(_ random: [UInt8], top: UInt8) -> [UInt8]? {
        guard random.count >= 6 else { return nil }
        var a = Array(random.prefix(6))
        a[5] = (a[5] & 0x3F) | (top << 6)
        return randomPartIsValid(a) ? a : nil
    }

    private static func randomPartIsValid(_ a: [UInt8]) -> Bool {
        let low = a[0..<5]
        let top6 = a[5] & 0x3F
        let allZero = low.allSatisfy { $0 == 0 } && top6 == 0
        let allOne = low.allSatisfy { $0 == 0xFF } && top6 == 0x3F
        return !allZero && !allOne
    }
}
