// Advertising through the kernel's management interface: the kernel schedules beacond's instance next to
// bluetoothd's, picks legacy or extended HCI commands itself and keeps the instance across power cycles. This
// class only sequences steps: the command flow is MgmtCommandFlow (in MgmtConnection), the steps MgmtAdvertisingPlan.
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import HCITransport
import Mgmt
import SystemdSupport

final class MgmtBackend: AdvertisingBackend {
    let kind = BackendKind.mgmt
    var onEvent: (BackendEvent) -> Void = { _ in }

    private let device: DeviceSpec
    private let index: UInt16
    private let loop: EventLoop
    private let log: Logger
    private let mayPowerOn: Bool
    private var connection: MgmtConnection?
    private var features: MgmtAdvertisingFeatures?
    /// Extended until the kernel shows it cannot (older than 5.10, or a kernel that refuses the extended data).
    private var commands = MgmtAdvertisingPlan.Commands.extended
    private var instance: UInt8?
    /// The instance was added (or its parameters were), by this backend or an earlier one: the kernel keeps it
    /// until it is removed.
    private var added: Bool
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
        added = instance != nil
    }

    var kernelInstance: UInt8? { instance }

    /// Removes what the kernel keeps of beacond's (its instance) when no backend is open, for example after the
    /// adapter was powered off: the kernel would put the instance back on the air at the next power-on while beacond
    /// is stopped.
    static func removeLeftover(instance: UInt8, index: UInt16, device: DeviceSpec, loop: EventLoop, log: Logger,
                               _ done: @escaping () -> Void) {
        guard let c = try? MgmtConnection(index: index, loop: loop) else { return done() }
        remove(instance, through: c, device: device, log: log) {
            c.close()
            done()
        }
    }

    /// Removes the instance. The kernel refuses Remove Advertising on a powered-off adapter (ENETDOWN): then the
    /// adapter is powered on for a moment, the instance removed and the adapter powered off again — it ends as it was
    /// found, and the beacon is on the air only between the power-on and the removal (a few milliseconds).
    private static func remove(_ instance: UInt8, through c: MgmtConnection, device: DeviceSpec, log: Logger,
                               _ done: @escaping () -> Void) {
        c.send(.removeAdvertising(instance: instance)) { result in
            switch result {
            case .success:
                log.info("Advertising instance \(instance) removed on \(device)")
                done()
            case .failure(let f) where f.status == .invalidParameters:
                done()  // the kernel has no such instance (any more): nothing to remove
            case .failure(let f) where f.status == .notPowered:
                c.run(MgmtAdvertisingPlan.removeWhilePoweredOff(instance: instance)) { result in
                    switch result {
                    case .success:
                        log.info("\(device) was powered off: powered it on for a moment to remove advertising instance \(instance), and off again")
                    case .failure(let f):
                        log.warning("Advertising instance \(instance) stays in the kernel for \(device), which is powered off: \(f.step.command.opcode) → \(f.failure.status.map(\.description) ?? "no answer"); the kernel advertises it again at the next power-on until beacond runs again")
                    }
                    done()
                }
            case .failure(let f):
                log.warning("Failed to remove advertising instance \(instance) on \(device): \(MgmtOpcode.removeAdvertising) → \(f.status.map(\.description) ?? "no answer")")
                done()
            }
        }
    }

    private func handle(_ e: MgmtEvent) {
        guard !closed else { return }
        switch e.kind {
        case .advertisingRemoved(let removed) where e.index == index && removed == instance && applied != nil:
            // bluetoothd removes every instance when it starts; so may btmgmt or a power-off of timed instances.
            applied = nil
            added = false
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
        let c: MgmtConnection
        do { c = try MgmtConnection(index: index, loop: loop) } catch {
            if case .system(_, let e) = error, e.errno == .addressFamilyNotSupported {
                return done(BackendFailure(message: "Cannot use \(device): this kernel or network namespace has no Bluetooth (AF_BLUETOOTH)", fatal: .unavailable))
            }
            return done(BackendFailure(message: "Cannot open the management interface: \(error)", level: .warning))
        }
        connection = c
        c.onEvent = { [weak self] e in self?.handle(e) }
        c.onClosed = { [weak self] error in self?.lose("the management socket failed: \(error)") }
        c.send(.readControllerInformation) { [weak self] result in
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
                c.send(.setPowered(true)) { [weak self] result in
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
        connection?.send(.readAdvertisingFeatures) { [weak self] result in
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
        guard let c = connection, let features else { return done(.failure(BackendFailure(message: "The management interface is not open"))) }
        guard let instance else {
            return done(.failure(BackendFailure(message: "All \(features.maxInstances) advertising instances on \(device) are in use (\(features.instances)); waiting for one to be free")))
        }
        let data = wanted.data.bytes
        if dataOnlyAllowed, commands == .extended, let applied, let onAir, !applied.needsRestart(for: wanted) {
            guard applied != wanted else { return done(.success(onAir)) }
            c.run(MgmtAdvertisingPlan.updateData(instance: instance, data: data)) { [weak self] result in
                guard let self, !self.closed else { return }
                switch result {
                case .success:
                    self.applied = wanted
                    done(.success(onAir))
                case .failure(let f):
                    done(.failure(self.failure("update the advertising data on \(self.device)", f.step.command.opcode, f.failure.status)))
                }
            }
            return
        }
        applied = nil
        var flags: MgmtAdvertisingFlags = wanted.type == .connectableUndirected ? [.connectable] : []
        flags.insert(.intervalsValid)
        var tx: Int8 = 0
        if commands == .extended, let want = wanted.txPower {
            if features.supportedFlags.contains(.canSetTxPower) {
                flags.insert(.txPowerValid)
                tx = want
            } else {
                log.warning("tx_power = \(want) is ignored: the kernel cannot set the TX power on \(device)")
            }
        }
        let plan = MgmtAdvertisingPlan.Instance(number: instance, flags: flags, interval: UInt32(wanted.interval.units), txPower: tx, data: data)
        let using = commands
        added = true
        c.run(MgmtAdvertisingPlan.add(plan, using: using)) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .failure(let f):
                if using == .extended, let why = MgmtAdvertisingPlan.fallbackReason(after: f) {
                    self.commands = .legacy
                    self.log.warning("\(why): advertising through Add Advertising, at the kernel's default interval of about 1.28 s instead of \(wanted.interval); use backend = \"hci\" when the interval matters",
                                     ["HCI_DEVICE=\(self.device)", "MGMT_OPCODE=\(hex16(f.step.command.opcode.rawValue))"])
                    return self.apply(wanted, dataOnlyAllowed: false, done)
                }
                let what = f.step.command.opcode == .addExtendedAdvertisingParameters
                    ? "set the advertising parameters of instance \(instance) on \(self.device)"
                    : using == .extended ? "set the advertising data of instance \(instance) on \(self.device)"
                                         : "add advertising instance \(instance) on \(self.device)"
                done(.failure(self.failure(what, f.step.command.opcode, f.failure.status)))
            case .success(let replies):
                self.applied = wanted
                let onAir: OnAir
                switch using {
                case .legacy:
                    onAir = OnAir(interval: AdvertisingInterval(units: 0x0800)!, details: ["mgmt instance \(instance)", "kernel default interval"],
                                  intervalIsKernelDefault: true)
                case .extended:
                    let ret = replies.first ?? []
                    let selected = ret.count >= 2 ? Int8(bitPattern: ret[1]) : nil
                    var details = ["mgmt instance \(instance)"]
                    if let selected, selected != 0x7F, flags.contains(.txPowerValid) || selected != 0 { details.append("TX \(selected) dBm") }
                    onAir = OnAir(interval: wanted.interval, details: details)
                }
                self.onAir = onAir
                done(.success(onAir))
            }
        }
    }

    /// Removes the instance whenever one was added, on the air or not: the kernel keeps an instance through a
    /// power cycle and would put it back on air while beacond is stopped.
    func stop(_ done: @escaping () -> Void) {
        guard let instance, added, let c = connection, !c.isClosed else { return done() }
        applied = nil
        Self.remove(instance, through: c, device: device, log: log) { [weak self] in
            self?.added = false
            done()
        }
    }

    func close() {
        closed = true
        connection?.close()
        connection = nil
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
