// A claim on a name in the abstract unix socket namespace: the socket bound to "\0NAME" is the claim. No file, no
// mode, no directory to trust or clean up; the kernel frees the name when the last descriptor closes, however the
// process ends. Who holds a name is asked of the socket itself: it listens, and a connection's SO_PEERCRED is the
// listener's pid and user.
import Glibc
import SystemConditions

public final class DeviceClaim {
    private let socket: FileDescriptor

    private init(_ socket: FileDescriptor) { self.socket = socket }

    /// Why a name was not claimed: another process holds it (its pid and user, when it answered), or a call failed.
    public enum Failure: Error, Sendable, Hashable {
        case held(pid: Int32?, uid: UInt32?)
        case system(SystemError)
    }

    /// The longest name: sun_path less the leading NUL.
    public static let maximumNameBytes = 107

    /// Claims `name` (at most `maximumNameBytes` bytes; a longer one traps: the caller shortens it).
    public static func claim(_ name: String) throws(Failure) -> DeviceClaim {
        let socket: FileDescriptor
        do { socket = try FileDescriptor.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, call: "socket(AF_UNIX)") } catch {
            throw .system(error)
        }
        var (addr, length) = address(name)
        let r = withUnsafePointer(to: &addr) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket.rawValue, $0, length) } }
        if r != 0 {
            let e = errno
            socket.close()
            guard e == EADDRINUSE else { throw .system(SystemError("bind(@\(name))", errno: e)) }
            let who = holder(name)
            throw .held(pid: who?.pid, uid: who?.uid)
        }
        guard listen(socket.rawValue, 16) == 0 else {
            let e = errno
            socket.close()
            throw .system(SystemError("listen(@\(name))", errno: e))
        }
        return DeviceClaim(socket)
    }

    /// The descriptor to watch: readable when another process asked who holds the name (`answerQuestions`).
    public var descriptor: Int32 { socket.rawValue }

    /// Accepts and closes every connection waiting: each was a question already answered by connecting (the
    /// listener's credentials), and would otherwise fill the queue.
    public func answerQuestions() {
        while true {
            let fd = accept(socket.rawValue, nil, nil)
            if fd < 0 { return }
            _ = Glibc.close(fd)
        }
    }

    /// Frees the name (so does the process's end, however it ends).
    public func release() { socket.close() }

    private static func address(_ name: String) -> (sockaddr_un, socklen_t) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(name.utf8)
        precondition(bytes.count <= maximumNameBytes, "an abstract socket name of \(bytes.count) bytes")
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw[0] = 0
            for (k, b) in bytes.enumerated() { raw[k + 1] = b }
        }
        let length = MemoryLayout<sa_family_t>.size + 1 + bytes.count
        return (addr, socklen_t(length))
    }

    /// The pid and user of the process listening on `name`, nil when it does not answer at once.
    static func holder(_ name: String) -> (pid: Int32, uid: UInt32)? {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc.close(fd) }
        var (addr, length) = address(name)
        let r = withUnsafePointer(to: &addr) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) } }
        guard r == 0 else { return nil }
        // struct ucred (pid, uid, gid), which Glibc shows only under _GNU_SOURCE.
        var cred: [Int32] = [0, 0, 0]
        var size = socklen_t(12)
        let got = cred.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, SO_PEERCRED, $0.baseAddress, &size) }
        guard got == 0, size == 12, cred[0] > 0 else { return nil }
        return (cred[0], UInt32(bitPattern: cred[1]))
    }
}

extension DeviceClaim.Failure {
    /// The failure in the pure modules' words: they decide what it means (StateProblem(claim:device:)).
    public var refusal: LockRefusal {
        switch self {
        case .held(let pid, _): .held(by: pid)
        case .system(let e): .system(e.condition, text: "\(e)")
        }
    }
}
