// JSON without Foundation: string escaping, total number formatting, and the one value type beacond writes and reads.

/// Minimal JSON string escaping (RFC 8259): enough for the values beacond prints.
public func jsonString(_ s: String) -> String {
    var out = "\""
    for u in s.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if u.value < 0x20 {
                let h = Array("0123456789abcdef")
                out += "\\u00" + String(h[Int(u.value >> 4)]) + String(h[Int(u.value & 0xF)])
            } else {
                out.unicodeScalars.append(u)
            }
        }
    }
    return out + "\""
}

/// `x` with `digits` decimals, rounded half away from zero (no Foundation formatting). Total: any finite value
/// prints (beyond 10^12 in Swift's exponent form, which JSON accepts too); NaN and infinities print as `null`.
public func decimal(_ x: Double, _ digits: Int) -> String {
    guard x.isFinite else { return "null" }
    if abs(x) >= 1e12 { return "\(x)" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = (abs(x) * scale).rounded()
    let whole = Int(scaled / scale)
    var frac = "\(Int(scaled) - whole * Int(scale))"
    while frac.count < digits { frac = "0" + frac }
    let sign = x < 0 && scaled != 0 ? "-" : ""
    return digits == 0 ? "\(sign)\(whole)" : "\(sign)\(whole).\(frac)"
}

/// A JSON value (RFC 8259): what beacond writes (`text` is the one writer of its JSON, members named by OutputSchema)
/// and what it reads back, its own state file. The parser is strict, bounded in depth, and total: any input gives a
/// value or nil, never a crash.
public indirect enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    /// A number as the writer spells it ("100.000", "-3.5"): its fixed decimals stay as they are. Never parsed.
    case numeral(String)
    case string(String)
    case array([JSONValue])
    /// Members in document order.
    case object([String: JSONValue], order: [String])

    public static let maximumDepth = 64

    public init?(parsing text: [UInt8]) {
        var p = JSONParser(bytes: text)
        guard let v = p.value(depth: 0) else { return nil }
        p.skipSpace()
        guard p.at == text.count else { return nil }
        self = v
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let m, _) = self { return m[key] }
        return nil
    }
    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var number: Double? {
        switch self {
        case .number(let n): n
        case .numeral(let s): Double(s)
        default: nil
        }
    }
    public var int: Int? { number.flatMap { $0.isFinite && abs($0) < 9e15 && $0 == $0.rounded() ? Int($0) : nil } }
    public var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var array: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var isNull: Bool { self == .null }

    /// Compact JSON text again (members in their order).
    public var text: String {
        switch self {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .number(let n): n == n.rounded() && abs(n) < 9e15 ? "\(Int(n))" : "\(n)"
        case .numeral(let s): s
        case .string(let s): jsonString(s)
        case .array(let a): "[" + a.map(\.text).joined(separator: ",") + "]"
        case .object(let m, let order): "{" + order.map { jsonString($0) + ":" + m[$0]!.text }.joined(separator: ",") + "}"
        }
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var at = 0

    mutating func skipSpace() {
        while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0A || bytes[at] == 0x0D || bytes[at] == 0x09 { at += 1 }
    }

    mutating func literal(_ word: String) -> Bool {
        let w = Array(word.utf8)
        guard at + w.count <= bytes.count, Array(bytes[at..<at + w.count]) == w else { return false }
        at += w.count
        return true
    }

    mutating func value(depth: Int) -> JSONValue? {
        guard depth < JSONValue.maximumDepth else { return nil }
        skipSpace()
        guard at < bytes.count else { return nil }
        switch bytes[at] {
        case UInt8(ascii: "n"): return literal("null") ? .null : nil
        case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
        case UInt8(ascii: "\""): return string().map { .string($0) }
        case UInt8(ascii: "["):
            at += 1
            var items: [JSONValue] = []
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "]") { at += 1; return .array(items) }
            while true {
                guard let v = value(depth: depth + 1) else { return nil }
                items.append(v)
                skipSpace()
                guard at < bytes.count else { return nil }
                if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                if bytes[at] == UInt8(ascii: "]") { at += 1; return .array(items) }
                return nil
            }
        case UInt8(ascii: "{"):
            at += 1
            var members: [String: JSONValue] = [:]
            var order: [String] = []
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "}") { at += 1; return .object(members, order: order) }
            while true {
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: "\""), let k = string() else { return nil }
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { return nil }
                at += 1
                guard let v = value(depth: depth + 1) else { return nil }
                if members.updateValue(v, forKey: k) == nil { order.append(k) }
                skipSpace()
                guard at < bytes.count else { return nil }
                if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                if bytes[at] == UInt8(ascii: "}") { at += 1; return .object(members, order: order) }
                return nil
            }
        default:
            return number()
        }
    }

    mutating func number() -> JSONValue? {
        let start = at
        func digits() -> Int {
            let s = at
            while at < bytes.count, (0x30...0x39).contains(bytes[at]) { at += 1 }
            return at - s
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "-") { at += 1 }
        guard digits() > 0 else { return nil }
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            guard digits() > 0 else { return nil }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
            at += 1
            if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard digits() > 0 else { return nil }
        }
        // JSON has no infinities: 1e400 is refused, not read as one.
        guard let d = Double(String(decoding: bytes[start..<at], as: UTF8.self)), d.isFinite else { return nil }
        return .number(d)
    }

    mutating func hex4() -> UInt32? {
        guard at + 4 <= bytes.count else { return nil }
        var v: UInt32 = 0
        for b in bytes[at..<at + 4] {
            guard let d = ASCII.hexValue(b) else { return nil }
            v = v << 4 | UInt32(d)
        }
        at += 4
        return v
    }

    mutating func string() -> String? {
        at += 1  // the opening quote
        var out: [UInt8] = []
        while at < bytes.count {
            let b = bytes[at]
            at += 1
            switch b {
            case UInt8(ascii: "\""): return String(validating: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard at < bytes.count else { return nil }
                let e = bytes[at]
                at += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard var u = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(u) {
                        guard literal("\\u"), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                        u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(u) else { return nil }
                    out += Array(String(Character(scalar)).utf8)
                default: return nil
                }
            default:
                guard b >= 0x20 else { return nil }
                out.append(b)
            }
        }
        return nil
    }
}

/// `250 ms`, `4 s`, `1.5 s`.
public func formatDuration(_ d: Duration) -> String {
    let ms = Int(d.components.seconds) * 1000 + Int(d.components.attoseconds / 1_000_000_000_000_000)
    if ms < 1000 { return "\(ms) ms" }
    if ms % 1000 == 0 || ms >= 10_000 { return "\((ms + 500) / 1000) s" }
    return "\(ms / 1000).\((ms % 1000) / 100) s"
}
