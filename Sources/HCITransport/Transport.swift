// Byte pipes to a controller: the kernel's raw HCI socket, or H4 over TCP, a unix socket or a serial line.
import BluetoothHCI
import CBluetooth
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
            case .tcp(let host, let port):
                return Transport(spec: spec, descriptor: try FileDescriptor.connectTCP(host: host, port: port, timeoutMilliseconds: 2000))
            case .unix(let path):
                return Transport(spec: spec, descriptor: try FileDescriptor.connectUnix(path: path, timeoutMilliseconds: 2000))
            case .serial(let path, let baud):
                return Transport(spec: spec, descriptor: try FileDescriptor.openSerial(path: path, baud: baud))
            }
        } catch let error as TransportError {
            throw error
        } catch let error as SystemError {
            throw .system(name, error)
        } catch {
            fatalError("unexpected error \(error)")
        }
    }

    /// Whether the kernel has hciINDEX at all (HCIGETDEVINFO answers for it), whatever mgmt says of it. Nil when
    /// that cannot be asked (no HCI socket).
    public static func kernelDeviceExists(index: UInt16) -> Bool? {
        deviceInfo(index: index).map { $0.result != -ENODEV }
    }

    /// Whether this kernel and network namespace have Bluetooth at all: an HCI socket opens (EAFNOSUPPORT says no,
    /// as for `run`'s exit 69). Nil when the socket fails for another reason.
    public static func kernelHasBluetooth() -> Bool? {
        do throws(SystemError) {
            let socket = try hciSocket()
            socket.close()
            return true
        } catch {
            return error.errno == .addressFamilyNotSupported ? false : nil
        }
    }

    /// Whether hciINDEX is up (HCIGETDEVINFO; no privilege needed). Nil when it does not exist or cannot be asked.
    public static func kernelDeviceIsUp(index: UInt16) -> Bool? {
        guard let (r, info) = deviceInfo(index: index), r == 0 else { return nil }
        var i = info
        return beacond_hci_dev_is_up(&i) != 0
    }

    /// HCIGETDEVINFO for hciINDEX: 0 or -errno, and the info; nil when there is no HCI socket to ask through.
    private static func deviceInfo(index: UInt16) -> (result: Int32, info: hci_dev_info)? {
        guard let socket = try? hciSocket() else { return nil }
        defer { socket.close() }
        var info = hci_dev_info()
        let r = beacond_hci_dev_info(socket.rawValue, Int32(index), &info)
        return (r, info)
    }

    /// Takes hciINDEX down and up again (HCIDEVDOWN, HCIDEVUP; CAP_NET_ADMIN), as `hciconfig hci0 down` and `up`
    /// do: the kernel closes the device whatever the controller answers (on a Raspberry Pi's UART radio the driver
    /// switches the chip's power pin) and runs its setup again. Blocks while the kernel does: with a controller
    /// that answers nothing its setup gives up after its own timeout (10 s).
    public static func powerCycle(index: UInt16) throws(TransportError) {
        let name = DeviceSpec.kernel(index: index).description
        let socket: FileDescriptor
        do { socket = try hciSocket() } catch { throw .system(name, error) }
        defer { socket.close() }
        for (what, r) in [("HCIDEVDOWN", { beacond_hci_dev_down(socket.rawValue, Int32(index)) }), ("HCIDEVUP", { beacond_hci_dev_up(socket.rawValue, Int32(index)) })] {
            let e = r()
            if e == 0 || (what == "HCIDEVUP" && Errno(negated: e) == .alreadyInProgress) { continue }
            if Errno(negated: e).isPermission { throw .permissionDenied(name, capability: "CAP_NET_ADMIN", SystemError("ioctl(\(what))", errno: Errno(negated: e))) }
            do { try SystemError.check("ioctl(\(what))", negatedErrno: e) } catch { throw .system(name, error) }
        }
    }

    /// Watches hciINDEX through the raw channel without sending anything: every command sent to it (the kernel's,
    /// bluetoothd's through the kernel, another program's), no events. The device must be up.
    public static func watchCommands(index: UInt16) throws(TransportError) -> Transport {
        let spec = DeviceSpec.kernel(index: index)
        do { return try openKernel(spec, index: Int32(index), mayBringUp: false, commandsOnly: true) }
        catch let error as TransportError { throw error }
        catch let error as SystemError { throw .system(spec.description, error) }
        catch { fatalError("unexpected error \(error)") }
    }

    static func openKernel(_ spec: DeviceSpec, index: Int32, mayBringUp: Bool, commandsOnly: Bool = false) throws -> Transport {
        let name = spec.description
        let socket: FileDescriptor
        do { socket = try hciSocket() } catch { throw TransportError.system(name, error) }
        let fd = socket.rawValue
        var info = hci_dev_info()
        let r = beacond_hci_dev_info(fd, index, &info)
        if Errno(negated: r) == .noDevice { throw TransportError.deviceAbsent(name) }
        try SystemError.check("ioctl(HCIGETDEVINFO)", negatedErrno: r)
        if beacond_hci_dev_is_up(&info) == 0 {
            guard mayBringUp else { throw TransportError.deviceDown(name, needsCapability: "CAP_NET_ADMIN") }
            let up = beacond_hci_dev_up(fd, index)
            if Errno(negated: up).isPermission { throw TransportError.deviceDown(name, needsCapability: "CAP_NET_ADMIN") }
            if Errno(negated: up) == .rfkilled {
                throw TransportError.system(name, SystemError("ioctl(HCIDEVUP) — blocked by rfkill (try 'rfkill unblock bluetooth')", errno: .rfkilled))
            }
            if Errno(negated: up) != .alreadyInProgress { try SystemError.check("ioctl(HCIDEVUP)", negatedErrno: up) }
        }
        try SystemError.check("bind(HCI_CHANNEL_RAW)", negatedErrno: beacond_hci_bind(fd, index, Int32(HCI_CHANNEL_RAW)))
        try SystemError.check("setsockopt(HCI_FILTER)", negatedErrno: beacond_hci_set_event_filter(fd, commandsOnly ? 1 : 0))
        return Transport(spec: spec, descriptor: socket)
    }
}
