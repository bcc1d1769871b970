// Text for JSON lines without Foundation: string escaping and total number formatting.

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
