// Advertising through the kernel's management interface: the kernel schedules beacond's instance next to
// bluetoothd's, picks legacy or extended HCI commands itself and keeps the instance across power cycles.
import BeaconCore
import BluetoothHCI
import Glibc
import HCIHost
import HCITransport
import Mgmt
import SystemdSupport

final class MgmtBackend: AdvertisingBackend {
    let name = "mgmt"
    var onEvent: (BackendEvent) -> Void = { _ in }

    private let device: DeviceSpec
    private let index: UInt16
    private let loop: EventLoop
    private let log: Logger
    private let mayPowerOn: Bool
    private var socket: MgmtSocket?
    private var reader: EventSource?
    private var timer: EventSource?
    private var pending: (opcode: MgmtOpcode, done: (Result<[UInt8], MgmtFailure>) -> Void)?
    private var queue: [(MgmtCommand, (Result<[UInt8], MgmtFailure>) -> Void)] = []
    private var features: MgmtAdvertisingFeatures?
    /// False on kernels without Add Extended Advertising Parameters (before 5.10): Add Advertising, default interval.
    private var extendedCommands = true
    private var instance: UInt8?
    private var applied: AdvertisingRequest?
    private var onAir: OnAir?
    private var closed = false

    /// Kernel devices only.
    init(device: DeviceSpec, index: UInt16, loop: EventLoop, log: Logger, mayPowerOn: Bool, instance: UInt8?) {
        self.device = device
        self.index = index
        self.loop = loop
        self.log = log
        self.mayPowerOn = mayPowerOn
        self.instance = instance
    }

    /// The instance in use, kept by the daemon so a reconnect takes the same one again.
    var currentInstance: UInt8? { instance }

    // MARK: command flow (one at a time, matched by opcode, 3 s timeout)

    private func send(_ command: MgmtCommand, _ done: @escaping (Result<[UInt8], MgmtFailure>) -> Void) {
        queue.append((command, done))
        sendNext()
    }

    private func sendNext() {
        guard pending == nil, !queue.isEmpty, let socket, !closed else { return }
        let (command, done) = queue.removeFirst()
        let idx = command.opcode == .readVersion || command.opcode == .readIndexList ? MgmtCommand.noIndex : index
        do { try socket.write(command.frame(index: idx)) } catch {
            done(.failure(MgmtFailure(status: nil)))
            return lose("the management socket failed: \(error)")
        }
        pending = (command.opcode, done)
        timer?.rearm(after: .seconds(3))
    }

    private func complete(_ opcode: MgmtOpcode, _ result: Result<[UInt8], MgmtFailure>) {
        guard let p = pending, p.opcode == opcode else { return }
        pending = nil
        timer?.disarm()
        p.done(result)
        sendNext()
    }

    private func readable() {
        guard let socket, !closed else { return }
        let frames: [[UInt8]]
        do { frames = try socket.read() } catch { return lose("the management socket failed: \(error)") }
        for frame in frames {
            guard let event = try? MgmtEvent(frame: frame) else { continue }
            handle(event)
            if closed { return }
        }
    }

    private func handle(_ e: MgmtEvent) {
        switch e.kind {
        case .commandComplete(let op, let status, let params):
            complete(op, status == .success ? .success(params) : .failure(MgmtFailure(status: status)))
        case .commandStatus(let op, let status):
            complete(op, status == .success ? .success([]) : .failure(MgmtFailure(status: status)))
        case .advertisingRemoved(let removed) where e.index == index && removed == instance && applied != nil:
            // bluetoothd removes every instance when it starts; so may btmgmt or a power-off of timed instances.
            applied = nil
            onEvent(.reapply(reason: "Advertising instance \(removed) on \(device) was removed by another program (bluetoothd removes every instance when it starts)",
                             delay: .zero, fields: ["HCI_DEVICE=\(device)"]))
        case .indexRemoved where e.index == index:
            lose("\(device) was removed", level: .warning)
        case .newSettings(let settings) where e.index == index && settings & MgmtSettings.powered == 0:
            lose("\(device) was powered off; waiting for it to be powered on", level: .warning)
        default:
            break
        }
    }

    private func lose(_ message: String, level: LogLevel = .err) {
        guard !closed else { return }
        onEvent(.lost(BackendFailure(message: message, level: level, fields: ["HCI_DEVICE=\(device)"])))
    }

    // MARK: backend

    func open(_ done: @escaping (BackendFailure?) -> Void) {
        do {
            let s = try MgmtSocket()
            socket = s
            reader = try loop.addReader(fd: s.fd) { [weak self] _ in self?.readable() }
            timer = try loop.addIdleTimer { [weak self] in
                guard let self, let p = self.pending else { return }
                self.complete(p.opcode, .failure(MgmtFailure(status: nil)))
            }
        } catch let error as TransportError {
            if case .system(_, let e) = error, e.errno == EAFNOSUPPORT {
                return done(BackendFailure(message: "Cannot use \(device): this kernel or network namespace has no Bluetooth (AF_BLUETOOTH)", fatal: .unavailable))
            }
            return done(BackendFailure(message: "Cannot open the management interface: \(error)", level: .warning))
        } catch {
            return done(BackendFailure(message: "Cannot watch the management interface: \(error)", fatal: .failure))
        }
        send(.readControllerInformation) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .failure(let f) where f.status == .invalidIndex:
                done(BackendFailure(message: "Waiting for \(self.device) to appear", level: .notice))
            case .failure(let f):
                done(self.failure("read the controller information of \(self.device)", .readControllerInformation, f.status))
            case .success(let params):
                guard let info = try? MgmtControllerInformation(returnParameters: params) else {
                    return done(BackendFailure(message: "The kernel sent a malformed controller information reply for \(self.device)"))
                }
                guard info.supportsLE else {
                    return done(BackendFailure(message: "\(self.device) has no Bluetooth Low Energy: it cannot advertise an iBeacon"))
                }
                if info.isPowered { return self.readFeatures(done) }
                guard self.mayPowerOn else {
                    return done(BackendFailure(message: "Waiting for \(self.device) to be powered on", level: .notice))
                }
                self.send(.setPowered(true)) { [weak self] result in
                    guard let self, !self.closed else { return }
                    switch result {
                    case .success:
                        self.log.info("Powered on \(self.device)")
                        self.readFeatures(done)
                    case .failure(let f):
                        done(self.failure("power on \(self.device)", .setPowered, f.status))
                    }
                }
            }
        }
    }

    private func readFeatures(_ done: @escaping (BackendFailure?) -> Void) {
        send(.readAdvertisingFeatures) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .failure(let f):
                done(self.failure("read the advertising features of \(self.device)", .readAdvertisingFeatures, f.status))
            case .success(let params):
                guard let f = try? MgmtAdvertisingFeatures(returnParameters: params) else {
                    return done(BackendFailure(message: "The kernel sent a malformed advertising features reply for \(self.device)"))
                }
                self.features = f
                self.instance = f.chooseInstance(preferred: self.instance)
                self.log.debug("\(self.device): \(f.maxInstances) advertising instances, in use \(f.instances), beacond takes \(self.instance.map(String.init) ?? "none")")
                done(nil)
            }
        }
    }

    func apply(_ wanted: AdvertisingRequest, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        guard let features else { return done(.failure(BackendFailure(message: "The management interface is not open"))) }
        guard let instance else {
            return done(.failure(BackendFailure(message: "All \(features.maxInstances) advertising instances on \(device) are in use (\(features.instances)); waiting for one to be free")))
        }
        let data = wanted.data.bytes
        if dataOnlyAllowed, extendedCommands, let applied, let onAir, !applied.needsRestart(for: wanted) {
            guard applied != wanted else { return done(.success(onAir)) }
            send(.addExtendedAdvertisingData(instance: instance, data: data, scanResponse: [])) { [weak self] result in
                guard let self, !self.closed else { return }
                switch result {
                case .success:
                    self.applied = wanted
                    done(.success(onAir))
                case .failure(let f):
                    done(.failure(self.failure("update the advertising data on \(self.device)", .addExtendedAdvertisingData, f.status)))
                }
            }
            return
        }
        applied = nil
        let connectable: MgmtAdvertisingFlags = wanted.type == .connectableUndirected ? [.connectable] : []
        guard extendedCommands else {
            // Twice, for the same reason as below: the kernel's copy of the controller's data may be stale.
            send(.addAdvertising(instance: instance, flags: connectable, duration: 0, timeout: 0, data: data + [0], scanResponse: [])) { _ in }
            send(.addAdvertising(instance: instance, flags: connectable, duration: 0, timeout: 0, data: data, scanResponse: [])) { [weak self] result in
                guard let self, !self.closed else { return }
                switch result {
                case .success:
                    self.applied = wanted
                    let onAir = OnAir(interval: AdvertisingInterval(units: 0x0800)!, details: ["mgmt instance \(instance)", "kernel default interval"],
                                      intervalIsKernelDefault: true)
                    self.onAir = onAir
                    done(.success(onAir))
                case .failure(let f):
                    done(.failure(self.failure("add advertising instance \(instance) on \(self.device)", .addAdvertising, f.status)))
                }
            }
            return
        }
        var flags = connectable.union(.intervalsValid)
        var tx: Int8 = 0
        if let want = wanted.txPower {
            if features.supportedFlags.contains(.canSetTxPower) {
                flags.insert(.txPowerValid)
                tx = want
            } else {
                log.warning("tx_power = \(want) is ignored: the kernel cannot set the TX power on \(device)")
            }
        }
        let units = UInt32(wanted.interval.units)
        send(.addExtendedAdvertisingParameters(instance: instance, flags: flags, duration: 0, timeout: 0,
                                               minInterval: units, maxInterval: units, txPower: tx)) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .failure(let f) where f.status == .unknownCommand:
                self.extendedCommands = false
                self.log.warning("The kernel has no Add Extended Advertising Parameters (it is older than 5.10): advertising through Add Advertising, at the kernel's default interval of about 1.28 s instead of \(wanted.interval); use backend = \"hci\" when the interval matters")
                self.apply(wanted, dataOnlyAllowed: false, done)
            case .failure(let f):
                done(.failure(self.failure("set the advertising parameters of instance \(instance) on \(self.device)", .addExtendedAdvertisingParameters, f.status)))
            case .success(let ret):
                let selected = ret.count >= 2 ? Int8(bitPattern: ret[1]) : nil
                // The kernel skips sending data it believes the controller already has. If another program (a raw
                // HCI client, hcitool, beacond's own hci backend) changed the controller's data behind the kernel's
                // back, that belief is wrong and a stale beacon stays on the air. So the data goes in twice: first
                // with one padding byte (an empty AD structure, invisible to scanners), then as it is — the second
                // always differs from the kernel's copy and so always reaches the controller.
                self.send(.addExtendedAdvertisingData(instance: instance, data: data + [0], scanResponse: [])) { _ in }
                self.send(.addExtendedAdvertisingData(instance: instance, data: data, scanResponse: [])) { [weak self] result in
                    guard let self, !self.closed else { return }
                    switch result {
                    case .success:
                        self.applied = wanted
                        var details = ["mgmt instance \(instance)"]
                        if let selected, selected != 0x7F, flags.contains(.txPowerValid) || selected != 0 { details.append("TX \(selected) dBm") }
                        let onAir = OnAir(interval: wanted.interval, details: details)
                        self.onAir = onAir
                        done(.success(onAir))
                    case .failure(let f):
                        done(.failure(self.failure("set the advertising data of instance \(instance) on \(self.device)", .addExtendedAdvertisingData, f.status)))
                    }
                }
            }
        }
    }

    func stop(_ done: @escaping () -> Void) {
        guard let instance, applied != nil, socket != nil, !closed else { return done() }
        send(.removeAdvertising(instance: instance)) { [weak self] result in
            guard let self else { return done() }
            switch result {
            case .success: self.log.info("Advertising instance \(instance) removed on \(self.device)")
            case .failure(let f): self.log.warning("Failed to remove advertising instance \(instance) on \(self.device): \(MgmtOpcode.removeAdvertising) → \(f.status.map(\.description) ?? "no answer")")
            }
            done()
        }
    }

    func close() {
        closed = true
        reader?.cancel()
        timer?.cancel()
        socket?.close()
        socket = nil
        let waiting = (pending.map { [$0.done] } ?? []) + queue.map(\.1)
        pending = nil
        queue = []
        for w in waiting { w(.failure(MgmtFailure(status: nil))) }
    }

    private func failure(_ what: String, _ opcode: MgmtOpcode, _ status: MgmtStatus?) -> BackendFailure {
        let fields = ["HCI_DEVICE=\(device)", "MGMT_OPCODE=\(hex16(opcode.rawValue))"] + (status.map { ["MGMT_STATUS=\(hex8($0.rawValue))"] } ?? [])
        guard let status else {
            return BackendFailure(message: "Failed to \(what): \(opcode) → no answer from the kernel (timeout)", fields: fields)
        }
        if status == .permissionDenied {
            return BackendFailure(message: "Failed to \(what): \(opcode) → \(status); the management interface needs CAP_NET_ADMIN",
                                  fields: fields, fatal: .noPermission)
        }
        if status == .notPowered || status == .rejected {
            return BackendFailure(message: "Failed to \(what): \(opcode) → \(status) (\(device) is not powered)", level: .warning, fields: fields)
        }
        return BackendFailure(message: "Failed to \(what): \(opcode) → \(status)", fields: fields)
    }
}

/// A management command that did not succeed: the kernel's status, or nil when no answer came (timeout, closed).
struct MgmtFailure: Error {
    let status: MgmtStatus?
}
