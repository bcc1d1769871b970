// Watches the kernel's hciN devices come and go: a raw HCI socket bound to no device gets a stack-internal event
// for every registration, removal, up and down. No capability is needed to listen.
import BluetoothHCI
import CBluetooth
import Glibc

public final class DeviceWatcher {
    public private(set) var fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 1024)

    public init() throws(SystemError) {
        let fd = try hciSocket()
        let r = beacond_hci_watch_devices(fd)
        if r < 0 {
            Glibc.close(fd)
            throw SystemError("bind(HCI_DEV_NONE)", errno: -r)
        }
        self.fd = fd
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// The device events that arrived since the last call (each read is one packet, type byte first).
    public func read() -> [KernelDeviceEvent] {
        var events: [KernelDeviceEvent] = []
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            if buffer[0] == H4PacketType.event.rawValue, let e = KernelDeviceEvent(eventPacket: Array(buffer[1..<n])) {
                events.append(e)
            }
        }
        return events
    }
}
