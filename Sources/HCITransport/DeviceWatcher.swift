// Watches the kernel's hciN devices come and go: a raw HCI socket bound to no device gets a stack-internal event
// for every registration, removal, up and down. No capability is needed to listen.
import BluetoothHCI
import CBluetooth
import SystemCalls

public final class DeviceWatcher {
    private let socket: FileDescriptor
    private var buffer = [UInt8](repeating: 0, count: 1024)

    public init() throws(SystemError) {
        socket = try hciSocket()
        try SystemError.check("bind(HCI_DEV_NONE)", negatedErrno: beacond_hci_watch_devices(socket.rawValue))
    }

    public var fd: Int32 { socket.rawValue }

    /// The device events that arrived since the last call (each read is one packet, type byte first).
    public func read() -> [KernelDeviceEvent] {
        let packets = (try? readPackets(socket, buffer: &buffer)) ?? []
        return packets.compactMap(KernelDeviceEvent.init(h4Packet:))
    }
}
