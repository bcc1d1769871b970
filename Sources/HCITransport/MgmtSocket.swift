// The kernel's management interface: a raw HCI socket bound to HCI_CHANNEL_CONTROL. Each read is one event frame,
// each write one command frame.
import CBluetooth
import SystemCalls

public final class MgmtSocket {
    private let socket: FileDescriptor
    private var buffer = [UInt8](repeating: 0, count: 4096)

    public init() throws(TransportError) {
        do {
            socket = try hciSocket()
            try SystemError.check("bind(HCI_CHANNEL_CONTROL)", negatedErrno: beacond_mgmt_bind(socket.rawValue))
        } catch { throw .system("mgmt", error) }
    }

    public var fd: Int32 { socket.rawValue }

    public func close() { socket.close() }

    /// The frames available now (empty when none).
    public func read() throws(TransportError) -> [[UInt8]] {
        do { return try readPackets(socket, buffer: &buffer) } catch {
            if error.errno == .brokenPipe { throw .closed("mgmt") }
            throw .system("mgmt", error)
        }
    }

    /// Sends one command frame. The kernel takes a frame whole or not at all; when it answers a command at once
    /// with a status event (an invalid index, for one) the write returns 0 instead of the length, so any
    /// non-negative result means "sent, the answer is on its way".
    public func write(_ frame: [UInt8]) throws(TransportError) {
        do { _ = try socket.write(frame) } catch {
            throw .system("mgmt", error)
        }
    }
}
