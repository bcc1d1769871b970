// Where the controller is: a kernel hciN device or an H4 byte stream (tcp, unix socket, serial line).

/// The `device` setting / `--device` argument.
public enum DeviceSpec: Sendable, Hashable, CustomStringConvertible {
    /// hciN: the kernel owns the controller.
    case kernel(index: UInt16)
    /// H4 over TCP; beacond owns the controller.
    case tcp(host: String, port: UInt16)
    /// H4 over a unix stream socket.
    case unix(path: String)
    /// H4 over a serial line, 8N1, raw.
    case serial(path: String, baud: Int)

    public static let defaultBaud = 115_200
    /// How a device is written, each form once: for messages, help texts and the config reference.
    public static let forms = ["hciN", "tcp:HOST:PORT", "unix:PATH", "serial:PATH[:BAUD]"]
    /// "hciN, tcp:HOST:PORT, unix:PATH or serial:PATH[:BAUD]".
    public static let formsText = proseList(forms, "or")
    /// Baud rates Linux termios can set by constant.
    public static let supportedBauds: [Int] = [
        9600, 19200, 38400, 57600, 115_200, 230_400, 460_800, 500_000, 576_000, 921_600, 1_000_000, 1_152_000,
        1_500_000, 2_000_000, 2_500_000, 3_000_000, 3_500_000, 4_000_000,
    ]

    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public init(parsing text: String) throws(ParseError) {
        let expected = "expected \(DeviceSpec.formsText)"
        if text.hasPrefix("hci") {
            let digits = text.dropFirst(3)
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), digits.count <= 5,
                let n = Int(digits), n < 0xFFFF
            else { throw ParseError(message: "'\(text)' is not a kernel device name; \(expected)") }
            self = .kernel(index: UInt16(n))
        } else if text.hasPrefix("tcp:") {
            let rest = text.dropFirst(4)
            guard let colon = rest.lastIndex(of: ":") else {
                throw ParseError(message: "'\(text)' has no port; expected tcp:HOST:PORT")
            }
            var host = String(rest[..<colon])
            let portText = rest[rest.index(after: colon)...]
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { throw ParseError(message: "'\(text)' has no host; expected tcp:HOST:PORT") }
            guard let port = UInt16(portText), port > 0 else {
                throw ParseError(message: "'\(portText)' is not a TCP port (1 to 65535) in '\(text)'")
            }
            self = .tcp(host: host, port: port)
        } else if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { throw ParseError(message: "'\(text)' has no path; expected unix:PATH") }
            self = .unix(path: path)
        } else if text.hasPrefix("serial:") {
            var path = String(text.dropFirst(7))
            var baud = Self.defaultBaud
            if let colon = path.lastIndex(of: ":") {
                let tail = path[path.index(after: colon)...]
                if !tail.isEmpty, tail.allSatisfy({ $0.isASCII && $0.isNumber }) {
                    guard let b = Int(tail), Self.supportedBauds.contains(b) else {
                        throw ParseError(message: "\(tail) is not a supported baud rate (e.g. 115200, 921600, 1000000, 3000000)")
                    }
                    baud = b
                    path = String(path[..<colon])
                }
            }
            guard !path.isEmpty else { throw ParseError(message: "'\(text)' has no path; expected serial:PATH[:BAUD]") }
            self = .serial(path: path, baud: baud)
        } else {
            throw ParseError(message: "unknown device '\(text)'; \(expected)")
        }
    }

    /// True when the kernel owns the controller: never reset it.
    public var isKernelDevice: Bool { if case .kernel = self { true } else { false } }

    public var description: String {
        switch self {
        case .kernel(let index): "hci\(index)"
        case .tcp(let host, let port): host.contains(":") ? "tcp:[\(host)]:\(port)" : "tcp:\(host):\(port)"
        case .unix(let path): "unix:\(path)"
        case .serial(let path, let baud): baud == Self.defaultBaud ? "serial:\(path)" : "serial:\(path):\(baud)"
        }
    }
}
