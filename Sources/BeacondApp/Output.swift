// Writing to stdout/stderr by file descriptor (Swift 6 forbids the C stdio globals), and exit codes.
import Glibc

/// Exit codes (sysexits.h, as systemd and swift-argument-parser use them).
public enum ExitCode: Int32, Sendable {
    case success = 0
    case failure = 1
    case usage = 64
    /// No controller reachable.
    case unavailable = 69
    /// Missing privilege (a capability).
    case noPermission = 77
    /// Config file errors.
    case config = 78
}

enum Output {
    /// Writes all of `text` to `fd`, retrying short writes and EINTR; gives up silently on a closed pipe.
    static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += n
        }
        bytes.removeAll()
    }

    static func out(_ text: String) { write(text, to: 1) }
    static func err(_ text: String) { write(text, to: 2) }
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
