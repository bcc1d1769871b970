// Writing to stdout/stderr by file descriptor (Swift 6 forbids the C stdio globals), and JSON strings.
import SystemCalls

enum Output {
    /// Writes all of `text`, retrying short writes; gives up silently on a closed pipe.
    static func out(_ text: String) { writeAll(toUnowned: 1, Array(text.utf8)) }
    static func err(_ text: String) { writeAll(toUnowned: 2, Array(text.utf8)) }
}

/// Minimal JSON string escaping (RFC 8259): enough for the values beacond prints.
func jsonString(_ s: String) -> String {
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
