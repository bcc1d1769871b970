// Byte pipes to a controller: the kernel's raw HCI socket, or H4 over TCP, a unix socket or a serial line.
import CBluetooth
import Glibc
import SystemCalls

/// Why a transport could not be opened or used. Each case carries what a good message needs.
public enum TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// hciN does not exist (yet).
    case deviceAbsent(String)
    /// hciN is down and we may not bring it up.
    case deviceDown(String, needsCapability: String)
    /// The operation needs a capability the process lacks.
    case permissionDenied(String, capability: String, SystemError)
    /// The peer closed the connection or the device went away.
    case closed(String)
    /// The byte stream cannot be trusted any more (framing lost, malformed data).
    case broken(String, reason: String)
    case system(String, SystemError)

    public var description: String {
        switch self {
        case .deviceAbsent(let name): "\(name) does not exist"
        case .deviceDown(let name, let cap): "\(name) is down and bringing it up needs \(cap)"
        case .permissionDenied(let name, let cap, let e): "\(name): \(e) (needs \(cap))"
        case .closed(let name): "\(name): connection closed"
        case .broken(let name, let reason): "\(name): \(reason)"
        case .system(let name, let e): "\(name): \(e)"
        }
    }
}

/// An open connection to a controller. Reads and writes whole H4 frames' bytes (type byte first).
public final class Transport {
    public let spec: DeviceSpec
    private let descriptor: FileDescriptor
    /// True for H4 streams: beacond owns the controller and may reset it. False for hciN: never reset.
    public var ownsController: Bool { !spec.isKernelDevice }
    private var readBuffer = [UInt8](repeating: 0, count: 4096)

    init(spec: DeviceSpec, descriptor: FileDescriptor) {
        self.spec = spec
        self.descriptor = descriptor
    }

    public var fd: Int32 { descriptor.rawValue }

    public func close() { descriptor.close() }

    /// Whatever bytes are available now: empty when nothing is (EAGAIN). Throws `.closed` at end of stream and when
    /// the kernel unregistered the device (EPIPE/ENODEV on a raw HCI socket).
    public func read() throws(TransportError) -> [UInt8] {
        let name = spec.description
        let n: Int
        do {
            n = try descriptor.read(into: &readBuffer)
        } catch {
            switch error.errno {
            case .wouldBlock: return []
            case .brokenPipe, .noDevice, .connectionReset, .networkDown, .ioError: throw .closed(name)
            default: throw .system(name, error)
            }
        }
        if n == 0 { throw .closed(name) }
        return Array(readBuffer[0..<n])
    }

    /// Writes one whole frame. Frames are small (≤ 260 bytes), so a short write or EAGAIN means the peer is stuck.
    public func write(_ frame: [UInt8]) throws(TransportError) {
        let name = spec.description
        do { try descriptor.writeAll(frame) } catch {
            switch error.errno {
            case .brokenPipe, .noDevice, .connectionReset, .networkDown, .ioError: throw .closed(name)
            // The kernel refuses LE commands on the raw channel without CAP_NET_RAW.
            case .notPermitted, .accessDenied: throw .permissionDenied(name, capability: "CAP_NET_RAW", error)
            default: throw .system(name, error)
            }
        }
    }

    /// Opens the controller named by `spec`. For hciN: binds the raw channel and brings the device up when it is
    /// down and `mayBringUp` (CAP_NET_ADMIN); otherwise reports it down.
    public static func open(_ spec: DeviceSpec, mayBringUp: Bool = true) throws(TransportError) -> Transport {
        let name = spec.description
        do {
            switch spec {
            case .kernel(let index): return try openKernel(spec, index: Int32(index), mayBringUp: mayBringUp)
            case .tcp(let host, let port): return Transport(spec: spec, descriptor: try connectTCP(host: host, port: port))
            case .unix(let path): return Transport(spec: spec, descriptor: try connectUnix(path: path))
            case .serial(let path, let baud): return Transport(spec: spec, descriptor: try openSerial(path: path, baud: baud))
            }
        } catch let error as TransportError {
            throw error
        } catch let error as SystemError {
            throw .system(name, error)
        } catch {
            fatalError("unexpected error \(error)")
        }
    }

    static func openKernel(_ spec: DeviceSpec, index: Int32, mayBringUp: Bool) throws -> Transport {
        let name = spec.description
        let socket: FileDescriptor
        do { socket = try hciSocket() } catch { throw TransportError.system(name, error) }
        let fd = socket.rawValue
        var info = hci_dev_info()
        let r = beacond_hci_dev_info(fd, index, &info)
        if r == -ENODEV { throw TransportError.deviceAbsent(name) }
        try SystemError.check("ioctl(HCIGETDEVINFO)", negatedErrno: r)
        if beacond_hci_dev_is_up(&info) == 0 {
            guard mayBringUp else { throw TransportError.deviceDown(name, needsCapability: "CAP_NET_ADMIN") }
            let up = beacond_hci_dev_up(fd, index)
            if up == -EPERM || up == -EACCES { throw TransportError.deviceDown(name, needsCapability: "CAP_NET_ADMIN") }
            if up == -ERFKILL {
                throw TransportError.system(name, SystemError("ioctl(HCIDEVUP) — blocked by rfkill (try 'rfkill unblock bluetooth')", errno: .rfkilled))
            }
            if up != -EALREADY { try SystemError.check("ioctl(HCIDEVUP)", negatedErrno: up) }
        }
        try SystemError.check("bind(HCI_CHANNEL_RAW)", negatedErrno: beacond_hci_bind(fd, index, Int32(HCI_CHANNEL_RAW)))
        try SystemError.check("setsockopt(HCI_FILTER)", negatedErrno: beacond_hci_set_event_filter(fd))
        return Transport(spec: spec, descriptor: socket)
    }

    static func connectTCP(host: String, port: UInt16) throws -> FileDescriptor {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let g = getaddrinfo(host, String(port), &hints, &list)
        guard g == 0, let first = list else {
            throw TransportError.system("tcp:\(host):\(port)", SystemError("getaddrinfo(\(host)): \(String(cString: gai_strerror(g)))", errno: .hostUnreachable))
        }
        defer { freeaddrinfo(list) }
        var lastError = SystemError("connect", errno: .connectionRefused)
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            ai = a.pointee.ai_next
            let socket = try FileDescriptor.socket(a.pointee.ai_family, a.pointee.ai_socktype, a.pointee.ai_protocol)
            do {
                try connectWithTimeout(socket, a.pointee.ai_addr, a.pointee.ai_addrlen)
                var one: Int32 = 1
                setsockopt(socket.rawValue, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return socket
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    static func connectUnix(path: String) throws -> FileDescriptor {
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
        try withUnsafePointer(to: &addr) { p in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                try connectWithTimeout(socket, sa, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return socket
    }

    /// connect() on a non-blocking socket, waiting at most 2 s for it to finish.
    static func connectWithTimeout(_ socket: FileDescriptor, _ addr: UnsafePointer<sockaddr>, _ len: socklen_t) throws(SystemError) {
        let fd = socket.rawValue
        if Glibc.connect(fd, addr, len) == 0 { return }
        let e = Errno.current
        guard e == .inProgress || e == .wouldBlock || e == .interrupted else { throw SystemError("connect", errno: e) }
        guard socket.poll(events: Int16(POLLOUT), milliseconds: 2000) else { throw SystemError("connect", errno: .timedOut) }
        var soError: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        _ = try retryingInterrupts("getsockopt(SO_ERROR)") { getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len) }
        if soError != 0 { throw SystemError("connect", errno: soError) }
    }

    static func openSerial(path: String, baud: Int) throws -> FileDescriptor {
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

    static func speedConstant(_ baud: Int) -> speed_t {
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
