// The one place that calls into the kernel for transports: EINTR retried, errors carry the call's name and errno.
import CBluetooth
import Glibc

/// A failed system call: which call and why.
public struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    public let call: String
    public let errno: Int32
    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }
    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// Runs `body` until it does not fail with EINTR; a negative result becomes a SystemError with `call`.
/// EBADF and EFAULT are bugs in this program, not the world's doing: trap.
@inline(__always)
func syscall<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let r = body()
        if r >= 0 { return r }
        let e = Glibc.errno
        if e == EINTR { continue }
        precondition(e != EBADF && e != EFAULT, "\(call) failed with \(e == EBADF ? "EBADF" : "EFAULT"): a bug in beacond")
        throw SystemError(call, errno: e)
    }
}

/// For wrappers that return -errno themselves.
@inline(__always)
func negErrno(_ call: String, _ r: Int32) throws(SystemError) {
    if r < 0 { throw SystemError(call, errno: -r) }
}

/// A raw HCI socket: socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI), non-blocking, close-on-exec. EAFNOSUPPORT is
/// spelled out: it means no Bluetooth in this kernel or network namespace (PrivateNetwork=, a container).
func hciSocket() throws(SystemError) -> Int32 {
    let fd = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), BTPROTO_HCI)
    if fd >= 0 { return fd }
    let e = Glibc.errno
    throw SystemError(e == EAFNOSUPPORT ? "socket(AF_BLUETOOTH) — no Bluetooth in this kernel or network namespace" : "socket(AF_BLUETOOTH)", errno: e)
}
