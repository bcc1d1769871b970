// Advertising through the kernel's management interface: the kernel schedules beacond's instance next to
// bluetoothd's, picks legacy or extended HCI commands itself and keeps the instance across power cycles. This
// class only sequences steps: the command flow is MgmtCommandFlow (in MgmtConnection), the steps MgmtAdvertisingPlan.
import BeaconCore
import BluetoothHCI
import Connections
import DaemonCore
import HCIHost
import HCITransport
import Mgmt
import SystemCalls
import SystemdSupport

final class MgmtBackend: AdvertisingBackend {
    let kind = BackendKind.mgmt
    /// Whether the controller has advertising sets: the kernel says so in Read Advertising Features (hardware offload).
    var traits: ControllerTraits { ControllerTraits(advertisingSets: advertiser.map { $0.features.supportedFlags.contains(.hardwareOffload) }) }
    var onEvent: (BackendEvent) -> Void = { _ in }

    private let device: DeviceSpec
    private let index: UInt16
    private let loop: EventLoop
    private let log: Logger
    private let mayPowerOn: Bool
    private var connection: MgmtConnection?
    /// Every decision about beacond's instances (Mgmt's MgmtAdvertiser); nil until the features are read.
    private var advertiser: MgmtAdvertiser? {
        didSet { if let a = advertiser { owned[device.description, .mgmtInstances] = a.ours } }
    }
    /// What beacond added, kept in the state directory per device (the advertiser starts from it).
    private let owned: OwnershipStore
    private var closed = false
    /// Read Controller Information's answer (for `beacond status`).
    private var controllerInfo: MgmtControllerInformation?
    /// What reaches the controller, through the raw channel (HCIHost's AirWatch), while beacond's instances are
    /// registered; nil before the first apply, after a stop, or when the raw channel cannot be opened.
    private var watch: AirWatch?
    private var watchConnection: ControllerConnection?
    private var watchTimer: EventSource?
    private var watchUnavailableSaid = false

    /// Kernel devices only.
    init(device: DeviceSpec, index: UInt16, loop: EventLoop, log: Logger, mayPowerOn: Bool, owned: OwnershipStore) {
        self.device = device
        self.index = index
        self.loop = loop
        self.log = log
        self.mayPowerOn = mayPowerOn
        self.owned = owned
    }

    /// Removes what the kernel keeps of beacond's (its instances) when no backend is open, for example after the
    /// adapter was powered off: the kernel would put the instances back on the air at the next power-on while beacond
    /// is stopped.
    static func removeLeftovers(owned: OwnershipStore, index: UInt16, device: DeviceSpec, loop: EventLoop, log: Logger,
                                _ done: @escaping () -> Void) {
        let instances = owned[device.description, .mgmtInstances]
        guard !instances.isEmpty, let c = try? MgmtConnection(index: index, loop: loop) else { return done() }
        removeAll(instances.sorted(by: >), through: c, device: device, log: log) { gone in
            owned[device.description, .mgmtInstances].subtract(gone)
            c.close()
            done()
        }
    }

    /// Removes the instances one by one; `done` gets the ones the kernel no longer has.
    private static func removeAll(_ instances: [UInt8], through c: MgmtConnection, device: DeviceSpec, log: Logger,
                                  gone: Set<UInt8> = [], _ done: @escaping (Set<UInt8>) -> Void) {
        guard let first = instances.first else { return done(gone) }
        remove(first, through: c, device: device, log: log) { removed in
            removeAll(Array(instances.dropFirst()), through: c, device: device, log: log,
                      gone: removed ? gone.union([first]) : gone, done)
        }
    }

    /// Removes the instance. The kernel refuses Remove Advertising on a powered-off adapter (ENETDOWN): then the
    /// adapter is powered on for a moment, the instance removed and the adapter powered off again — it ends as it was
    /// found, and the beacon is on the air only between the power-on and the removal (a few milliseconds).
    private static func remove(_ instance: UInt8, through c: MgmtConnection, device: DeviceSpec, log: Logger,
                               _ done: @escaping (_ gone: Bool) -> Void) {
        c.send(.removeAdvertising(instance: instance)) { result in
            switch result {
            case .success:
                log.info("Advertising instance \(instance) removed on \(device)")
                done(true)
            case .failure(let f) where f.status == .invalidParameters:
                done(true)  // the kernel has no such instance (any more): nothing to remove
            case .failure(let f) where f.status == .notPowered:
                c.run(MgmtAdvertisingPlan.removeWhilePoweredOff(instance: instance)) { result in
                    switch result {
                    case .success:
                        log.info("\(device) was powered off: powered it on for a moment to remove advertising instance \(instance), and off again")
                        done(true)
                    case .failure(let f):
                        log.warning("Advertising instance \(instance) stays in the kernel for \(device), which is powered off: \(f.step.command.opcode) → \(f.failure.status.map(\.description) ?? "no answer"); the kernel advertises it again at the next power-on until beacond runs again")
                        done(false)
                    }
                }
            case .failure(let f):
                log.warning("Failed to remove advertising instance \(instance) on \(device): \(MgmtOpcode.removeAdvertising) → \(f.status.map(\.description) ?? "no answer")")
                done(false)
            }
        }
    }

    private func handle(_ e: MgmtEvent) {
        guard !closed, e.index == index else { return }
        switch e.kind {
        case .advertisingAdded, .advertisingRemoved:
            if let why = advertiser?.event(e.kind) {
                onEvent(.reapply(reason: why, delay: .zero, fields: ["HCI_DEVICE=\(device)"]))
            }
        case .indexRemoved:
            lose("\(device) was removed", level: .warning)
        case .newSettings(let settings) where settings & MgmtSettings.powered == 0:
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
                guard Transport.kernelDeviceExists(index: self.index) == true else {
                    return done(BackendFailure(message: "Waiting for \(self.device) to appear", level: .notice))
                }
                // It is there, but the kernel's setup of it failed when it was registered (dmesg: "Opcode 0x0c03
                // failed: -110", the Pi's "command tx timeout"): mgmt leaves such a device out until it is
                // registered again. Raw HCI can bring it up (HCIDEVUP runs the kernel's setup again).
                done(BackendFailure(
                    message: "\(self.device) exists, but the kernel's management interface calls it an invalid index: the kernel's setup of it failed when it was registered (dmesg says why); mgmt offers it again after a re-plug or a driver reload",
                    level: .warning, fields: ["HCI_DEVICE=\(self.device)", "MGMT_STATUS=\(hex8(MgmtStatus.invalidIndex.rawValue))"],
                    rawHCIMayWork: true))
            case .failure(let f):
                done(self.failure("read the controller information of \(self.device)", .readControllerInformation, f.status))
            case .success(let params):
                guard let info = try? MgmtControllerInformation(returnParameters: params) else {
                    return done(BackendFailure(message: "The kernel sent a malformed controller information reply for \(self.device)"))
                }
                self.controllerInfo = info
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
                let a = MgmtAdvertiser(device: self.device.description, features: f, ours: self.owned[self.device.description, .mgmtInstances])
                self.advertiser = a
                if !a.foreign.isEmpty {
                    self.log.debug("\(self.device): advertising instance\(a.foreign.count == 1 ? "" : "s") \(a.foreign.sorted().map(String.init).joined(separator: ", ")) belong\(a.foreign.count == 1 ? "s" : "") to another program")
                }
                done(nil)
            }
        }
    }

    func apply(_ schedule: AdvertisingSchedule, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        guard let c = connection, advertiser != nil else { return done(.failure(BackendFailure(message: "The management interface is not open"))) }
        carry(advertiser!.apply(schedule.beacons, dataOnlyAllowed: dataOnlyAllowed), on: c, done)
    }

    /// Runs what the advertiser asked for until it is done or failed (a fall back to Add Advertising asks for a
    /// second round of steps).
    private func carry(_ outcome: MgmtAdvertiser.Outcome, on c: MgmtConnection, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        for n in advertiser?.takeNotes() ?? [] {
            switch n {
            case .warning(let m, let op):
                log.warning(m, ["HCI_DEVICE=\(device)"] + (op.map { ["MGMT_OPCODE=\(hex16($0.rawValue))"] } ?? []))
            case .notice(let m): log.notice(m, ["HCI_DEVICE=\(device)"])
            }
        }
        switch outcome {
        case .done:
            syncWatch()
            done(.success(describe()))
        case .shortage(let m): done(.failure(BackendFailure(message: m, fields: ["HCI_DEVICE=\(device)"])))
        case .failed(let what, let opcode, let status): done(.failure(failure(what, opcode, status)))
        case .send(let steps):
            c.run(steps) { [weak self] result in
                guard let self, !self.closed, self.advertiser != nil else { return }
                self.carry(self.advertiser!.finished(result), on: c, done)
            }
        }
    }

    private func describe() -> OnAir {
        let a = advertiser!
        let (wanted, slots, using, flags, features, txPowers) = (a.applied ?? [], a.beaconInstances, a.commands, a.flags, a.features, a.txPowers)
        let n = wanted.count
        // Without advertising sets of its own the controller has one advertiser: the kernel gives each instance its
        // turn (2 s by default), and picks the interval of non-connectable advertising itself.
        let rotated = !features.supportedFlags.contains(.hardwareOffload)
        let kernel: KernelInterval? = using == .legacy ? .addAdvertisingDefault
            : rotated && !flags.contains(.connectable) ? .legacyNonConnectable : nil
        func tx(_ i: UInt8) -> String? {
            guard using == .extended, let selected = txPowers[i], selected != 0x7F, flags.contains(.txPowerValid) || selected != 0 else { return nil }
            return "TX \(selected) dBm"
        }
        let kernelNote = kernel == .addAdvertisingDefault ? ["kernel default interval"] : []
        let controller = ControllerSummary(backend: .mgmt, family: using == .legacy ? "legacy" : "extended",
                                           bluetoothVersion: controllerInfo.map { LocalVersionInformation.coreVersionName(hciVersion: $0.bluetoothVersion) },
                                           manufacturer: controllerInfo?.manufacturer, instances: Int(features.maxInstances), timeSliced: rotated && n > 1)
        // The kernel picks the address of each instance (beacond's own commands never run here).
        let addresses = [String?](repeating: nil, count: n)
        if n == 1 {
            return OnAir(interval: kernel?.typical ?? wanted[0].interval,
                         details: ["mgmt instance \(slots[0])"] + kernelNote + (tx(slots[0]).map { [$0] } ?? []), kernelInterval: kernel,
                         controller: controller, addresses: addresses)
        }
        var details = ["mgmt", "\(n) instances"]
        if rotated { details.append("the kernel rotates them, \(formatDuration(KernelInterval.rotation)) each") }
        details += kernelNote
        let beacons = zip(wanted, slots).map { r, i in
            let interval = kernel?.typical ?? r.interval
            // Rotated, a beacon has one n-th of the time: on average an advertising event every n intervals.
            let every = Duration.microseconds(Int64(interval.units) * 625) * (rotated ? n : 1)
            var d = ["instance \(i)"]
            if let t = tx(i) { d.append(t) }
            if rotated {
                d.append("on the air \(formatDuration(KernelInterval.rotation)) of every \(formatDuration(KernelInterval.rotation * n)), every \(kernel?.description ?? interval.description) then")
            }
            return BeaconOnAir(every: every, details: d)
        }
        return OnAir(interval: kernel?.typical ?? wanted[0].interval, details: details, kernelInterval: kernel, beacons: beacons,
                     controller: controller, addresses: addresses)
    }

    // MARK: proving the air

    /// After each apply: follows the advertising enable commands that reach the controller (the raw channel opened
    /// the first time), so that "the kernel holds beacond's instances" is checked against what the controller was told.
    private func syncWatch() {
        guard let a = advertiser, a.applied != nil, !closed else { return }
        let ours = Set(a.beaconInstances)
        if watch != nil { watch!.applied(ours: ours); return armWatchTimer() }
        do {
            let c = try ControllerConnection(transport: try Transport.watchCommands(index: index), loop: loop)
            c.onForeignCommand = { [weak self] opcode, p in self?.watched(opcode, p) }
            c.onClosed = { [weak self] _ in self?.endWatch() }
            watchConnection = c
            watch = AirWatch(sets: traits.advertisingSets == true, ours: ours)
        } catch {
            if !watchUnavailableSaid {
                watchUnavailableSaid = true
                log.notice("Cannot watch the commands that reach \(device) (\(error)): beacond takes the kernel's word that its instances are on the air", ["HCI_DEVICE=\(device)"])
            }
        }
    }

    private func endWatch() {
        watchTimer?.disarm()
        watchConnection?.close()
        (watch, watchConnection) = (nil, nil)
    }

    private static func now() -> Duration { .microseconds(Int64(monotonicMicroseconds())) }

    private func watched(_ opcode: Opcode, _ p: [UInt8]) {
        guard watch != nil, !closed else { return }
        watch!.command(opcode, p, at: Self.now())
        armWatchTimer()
    }

    private func armWatchTimer() {
        guard let next = watch?.nextCheck, !closed else { watchTimer?.disarm(); return }
        if watchTimer == nil { watchTimer = try? loop.addIdleTimer { [weak self] in self?.checkWatch() } }
        let now = Self.now()
        watchTimer?.rearm(after: next > now ? next - now : .zero)
    }

    private func checkWatch() {
        guard watch != nil, advertiser?.applied != nil, !closed else { return }
        let now = Self.now()
        let off = watch!.offSince.map { now - $0 } ?? .zero
        if watch!.due(at: now) {
            advertiser!.airLost()
            let instances = advertiser!.beaconInstances.map(String.init).joined(separator: ", ")
            onEvent(.reapply(reason: "The controller on \(device) was told to stop advertising \(formatDuration(off)) ago and not to start again, while the kernel still holds beacond's instance\(advertiser!.beaconInstances.count == 1 ? "" : "s") \(instances) (a pause the kernel did not end, or another program's disable)",
                             delay: .zero, fields: ["HCI_DEVICE=\(device)"]))
        }
        armWatchTimer()
    }

    /// Removes the instances whenever they were added, on the air or not: the kernel keeps an instance through a
    /// power cycle and would put it back on air while beacond is stopped.
    func stop(_ done: @escaping () -> Void) {
        endWatch()
        // Not open that far yet (the features unread): the record says what is beacond's.
        let instances = advertiser?.stopping() ?? owned[device.description, .mgmtInstances].sorted(by: >)
        guard let c = connection, !c.isClosed, !instances.isEmpty else { return done() }
        Self.removeAll(instances, through: c, device: device, log: log) { [weak self] gone in
            guard let self else { return done() }
            if self.advertiser != nil { self.advertiser!.removed(gone) } else { self.owned[self.device.description, .mgmtInstances].subtract(gone) }
            done()
        }
    }

    func close() {
        closed = true
        endWatch()
        watchTimer?.cancel()
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
