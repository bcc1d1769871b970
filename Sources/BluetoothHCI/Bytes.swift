// Little-endian byte reader and writer used by every codec in the package.

/// Appends little-endian fields to a byte buffer.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 32) { bytes.reserveCapacity(capacity) }

    public mutating func u8(_ value: UInt8) { bytes.append(value) }
    public mutating func i8(_ value: Int8) { bytes.append(UInt8(bitPattern: value)) }
    public mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }
    /// A 24-bit field (HCI uses them for extended advertising intervals).
    public mutating func u24(_ value: UInt32) {
        precondition(value <= 0xFF_FFFF, "u24 field overflow")
        for shift in stride(from: 0, to: 24, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }
    public mutating func u32(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }
    public mutating func append<C: Collection>(contentsOf other: C) where C.Element == UInt8 {
        bytes.append(contentsOf: other)
    }
}

/// Reads little-endian fields; every read is bounds-checked and throws `ByteReader.Truncated` at the end.
public struct ByteReader: Sendable {
    /// Thrown when a packet is shorter than its fields.
    public struct Truncated: Error, Sendable, Equatable { public init() {} }

    private let bytes: ArraySlice<UInt8>
    public private(set) var offset: Int

    public init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.bytes = ArraySlice(bytes)
        self.offset = self.bytes.startIndex
    }

    public var remaining: Int { bytes.endIndex - offset }

    public mutating func u8() throws(Truncated) -> UInt8 {
        guard remaining >= 1 else { throw Truncated() }
        defer { offset += 1 }
        return bytes[offset]
    }
    public mutating func i8() throws(Truncated) -> Int8 { Int8(bitPattern: try u8()) }
    public mutating func u16() throws(Truncated) -> UInt16 {
        let lo = try u8(), hi = try u8()
        return UInt16(lo) | UInt16(hi) << 8
    }
    public mutating func u24() throws(Truncated) -> UInt32 {
        let raw = try take(3)
        return raw.reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }
    public mutating func u32() throws(Truncated) -> UInt32 {
        let raw = try take(4)
        return raw.reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }
    public mutating func u64() throws(Truncated) -> UInt64 {
        let raw = try take(8)
        return raw.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }
    public mutating func take(_ count: Int) throws(Truncated) -> [UInt8] {
        guard count >= 0, remaining >= count else { throw Truncated() }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }
    public mutating func rest() -> [UInt8] {
        defer { offset = bytes.endIndex }
        return Array(bytes[offset...])
    }
}

/// Lowercase hex without separators, e.g. `0201061a`.
public func hexString<C: Collection>(_ bytes: C, separator: String = "", uppercase: Bool = false) -> String
where C.Element == UInt8 {
    // ASCII bytes, made into one String at the end (Characters appended one at a time cost ~10× as much).
    let ten: UInt8 = uppercase ? 0x41 : 0x61
    let sep = Array(separator.utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * (2 + sep.count))
    func digit(_ n: UInt8) -> UInt8 { n < 10 ? 0x30 + n : ten + n - 10 }
    for (i, b) in bytes.enumerated() {
        if i > 0 { out += sep }
        out.append(digit(b >> 4))
        out.append(digit(b & 0x0F))
    }
    return String(decoding: out, as: UTF8.self)
}

/// `0x2008`-style formatting for opcodes and similar fields.
public func hex16(_ value: UInt16) -> String {
    let s = hexString([UInt8(value >> 8), UInt8(value & 0xFF)], uppercase: true)
    return "0x" + s
}

/// `0x0C`-style formatting for one-byte codes.
public func hex8(_ value: UInt8) -> String { "0x" + hexString([value], uppercase: true) }

/// Items as a list in prose: "a, b and c" (`conjunction` "or": "a, b or c"); one item alone.
public func proseList(_ items: [String], _ conjunction: String = "and") -> String {
    guard let last = items.last else { return "" }
    return items.count == 1 ? last : items.dropLast().joined(separator: ", ") + " \(conjunction) " + last
}

// Text searches on the standard library alone. The String methods that take a String pattern (contains, replacing,
// split(separator:) with a String) come from _StringProcessing, which would link Swift's whole regex engine into the
// binary (about 1 MB); beacond's targets are built without its implicit import (Package.swift).
extension StringProtocol {
    /// Whether `pattern` occurs in this text.
    public func includes(_ pattern: String) -> Bool { firstOffset(of: pattern) != nil }

    /// The text with every `pattern` replaced by `replacement`.
    public func replacingEvery(_ pattern: String, with replacement: String) -> String {
        precondition(!pattern.isEmpty, "an empty pattern")
        let text = Array(utf8), p = Array(pattern.utf8)
        var out: [UInt8] = [], i = 0
        while i < text.count {
            if i + p.count <= text.count, text[i..<(i + p.count)].elementsEqual(p) {
                out += replacement.utf8
                i += p.count
            } else {
                out.append(text[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The pieces between the occurrences of `separator` (empty pieces kept).
    public func pieces(separatedBy separator: String) -> [String] {
        precondition(!separator.isEmpty, "an empty separator")
        let text = Array(utf8), p = Array(separator.utf8)
        var out: [String] = [], start = 0, i = 0
        while i + p.count <= text.count {
            if text[i..<(i + p.count)].elementsEqual(p) {
                out.append(String(decoding: text[start..<i], as: UTF8.self))
                i += p.count
                start = i
            } else {
                i += 1
            }
        }
        out.append(String(decoding: text[start...], as: UTF8.self))
        return out
    }

    /// The UTF-8 offset of the first `pattern`, or nil.
    private func firstOffset(of pattern: String) -> Int? {
        let text = Array(utf8), p = Array(pattern.utf8)
        guard !p.isEmpty else { return 0 }
        guard p.count <= text.count else { return nil }
        return (0...(text.count - p.count)).first { text[$0..<($0 + p.count)].elementsEqual(p) }
    }
}
