// The kernel's management interface: a raw HCI socket bound to HCI_CHANNEL_CONTROL. Each read is one event frame,
// each write one command frame.
import CBluetooth
import Glibc

public final class MgmtSocket {
    public private(set) var fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 4096)

    public init() throws(TransportError) {
        let fd: Int32
        do { fd = try hciSocket() } catch { throw .system("mgmt", error) }
        let r = beacond_mgmt_bind(fd)
        if r < 0 {
            Glibc.close(fd)
            throw .system("mgmt", SystemError("bind(HCI_CHANNEL_CONTROL)", errno: -r))
        }
        self.fd = fd
    }

    deinit { close() }

    public func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// The frames available now (empty when none).
    public func read() throws(TransportError) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                frames.append(Array(buffer[0..<n]))
                continue
            }
            if n == 0 { throw .closed("mgmt") }
            let e = Glibc.errno
            if e == EINTR { continue }
            if e == EAGAIN { return frames }
            throw .system("mgmt", SystemError("read", errno: e))
        }
    }

    /// Sends one command frame. The kernel takes a frame whole or not at all; when it answers a command at once
    /// with a status event (an invalid index, for one) the write returns 0 instead of the length, so any
    /// non-negative result means "sent, the answer is on its way".
    public func write(_ frame: [UInt8]) throws(TransportError) {
        while true {
            let n = frame.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n >= 0 { return }
            let e = Glibc.errno
            if e == EINTR { continue }
            throw .system("mgmt", SystemError("write", errno: e))
        }
    }
}
