// Raw HCI sockets (AF_BLUETOOTH, BTPROTO_HCI) and the C helpers that bind and filter them; the system calls
// themselves go through SystemCalls.
import CBluetooth
import SystemCalls

/// A raw HCI socket: socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI), non-blocking, close-on-exec. EAFNOSUPPORT is
/// spelled out: it means no Bluetooth in this kernel or network namespace (PrivateNetwork=, a container).
func hciSocket() throws(SystemError) -> FileDescriptor {
    do throws(SystemError) {
        return try FileDescriptor.socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue), BTPROTO_HCI, call: "socket(AF_BLUETOOTH)")
    } catch {
        guard error.errno == .addressFamilyNotSupported else { throw error }
        throw SystemError("socket(AF_BLUETOOTH) — no Bluetooth in this kernel or network namespace", errno: error.errno)
    }
}

/// Reads packets (one per read) until the socket has none; end of file and errors other than EAGAIN are thrown.
func readPackets(_ fd: FileDescriptor, buffer: inout [UInt8]) throws(SystemError) -> [[UInt8]] {
    var packets: [[UInt8]] = []
    while true {
        let n: Int
        do throws(SystemError) { n = try fd.read(into: &buffer) } catch {
            if error.errno == .wouldBlock { return packets }
            throw error
        }
        if n == 0 { throw SystemError("read", errno: .brokenPipe) }
        packets.append(Array(buffer[0..<n]))
    }
}
