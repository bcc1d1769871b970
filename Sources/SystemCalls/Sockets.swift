// Connecting stream sockets and opening serial lines: the calls behind H4 transports (TCP, unix sockets, UARTs).
import Glibc

extension FileDescriptor {
    /// A TCP connection to `host:port` (every address getaddrinfo gives, in order), non-blocking, TCP_NODELAY;
    /// each attempt waits at most `timeoutMilliseconds`.
    public static func connectTCP(host: String, port: UInt16, timeoutMilliseconds: Int32) throws(SystemError) -> FileDescriptor {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let g = getaddrinfo(host, String(port), &hints, &list)
        guard g == 0, let first = list else {
            throw SystemError("getaddrinfo(\(host)): \(String(cString: gai_strerror(g)))", errno: .hostUnreachable)
        }
        defer { freeaddrinfo(list) }
        var lastError = SystemError("connect", errno: .connectionRefused)
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            ai = a.pointee.ai_next
            let socket = try FileDescriptor.socket(a.pointee.ai_family, a.pointee.ai_socktype, a.pointee.ai_protocol)
            do {
                try socket.connect(a.pointee.ai_addr, a.pointee.ai_addrlen, timeoutMilliseconds: timeoutMilliseconds)
                var one: Int32 = 1
                setsockopt(socket.rawValue, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return socket
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    /// A unix stream socket connected to `path`, non-blocking.
    public static func connectUnix(path: String, timeoutMilliseconds: Int32) throws(SystemError) -> FileDescriptor {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            throw SystemError("connect(\(path)) — path too long for a unix socket", errno: .nameTooLong)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let socket = try FileDescriptor.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, call: "socket(AF_UNIX)")
        let result: Result<Void, SystemError> = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                Result { () throws(SystemError) in
                    try socket.connect(sa, socklen_t(MemoryLayout<sockaddr_un>.size), timeoutMilliseconds: timeoutMilliseconds)
                }
            }
        }
        try result.get()
        return socket
    }

    /// connect() on this non-blocking socket, waiting at most `timeoutMilliseconds` for it to finish.
    public func connect(_ addr: UnsafePointer<sockaddr>, _ len: socklen_t, timeoutMilliseconds: Int32) throws(SystemError) {
        let fd = rawValue
        if Glibc.connect(fd, addr, len) == 0 { return }
        let e = Errno.current
        guard e == .inProgress || e == .wouldBlock || e == .interrupted else { throw SystemError("connect", errno: e) }
        guard poll(events: Int16(POLLOUT), milliseconds: timeoutMilliseconds) else { throw SystemError("connect", errno: .timedOut) }
        var soError: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        _ = try retryingInterrupts("getsockopt(SO_ERROR)") { getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len) }
        if soError != 0 { throw SystemError("connect", errno: soError) }
    }

    /// A serial line opened raw, 8N1, at `baud` (115200 when Linux has no constant for it), hardware flow control
    /// where the device supports it, non-blocking reads.
    public static func openSerial(path: String, baud: Int) throws(SystemError) -> FileDescriptor {
        let serial = try FileDescriptor.open(path, O_RDWR | O_NOCTTY | O_NONBLOCK)
        let fd = serial.rawValue
        var t = termios()
        _ = try retryingInterrupts("tcgetattr(\(path))") { tcgetattr(fd, &t) }
        cfmakeraw(&t)  // 8 data bits, no parity, no echo, no signals
        let speed = speedConstant(baud)
        _ = cfsetispeed(&t, speed)
        _ = cfsetospeed(&t, speed)
        t.c_cflag |= tcflag_t(CLOCAL | CREAD) | tcflag_t(CRTSCTS)
        t.c_cflag &= ~tcflag_t(CSTOPB)
        t.c_cc.6 = 0  // VMIN
        t.c_cc.5 = 0  // VTIME
        _ = try retryingInterrupts("tcsetattr(\(path))") { tcsetattr(fd, TCSANOW, &t) }
        // Hardware flow control where the device supports it: a pty or a 3-wire UART silently drops CRTSCTS.
        _ = tcflush(fd, TCIOFLUSH)
        return serial
    }

    private static func speedConstant(_ baud: Int) -> speed_t {
        switch baud {
        case 9600: speed_t(B9600)
        case 19200: speed_t(B19200)
        case 38400: speed_t(B38400)
        case 57600: speed_t(B57600)
        case 230_400: speed_t(B230400)
        case 460_800: speed_t(B460800)
        case 500_000: speed_t(B500000)
        case 576_000: speed_t(B576000)
        case 921_600: speed_t(B921600)
        case 1_000_000: speed_t(B1000000)
        case 1_152_000: speed_t(B1152000)
        case 1_500_000: speed_t(B1500000)
        case 2_000_000: speed_t(B2000000)
        case 2_500_000: speed_t(B2500000)
        case 3_000_000: speed_t(B3000000)
        case 3_500_000: speed_t(B3500000)
        case 4_000_000: speed_t(B4000000)
        default: speed_t(B115200)
        }
    }
}
