// Advertising through the kernel's management interface, beside bluetoothd. This class only carries commands: the
// decisions are MgmtAdvertiser's (instances, steps) and DaemonCore's MgmtOpening and MgmtDecisions (opening, events,
// failures, what is on the air); removals are MgmtInstanceRemoval's, the proof of the air MgmtAirWatcher's.
import BeaconCore
import BluetoothHCI
import Connections
import DaemonCore
import HCIHost
import HCITransport
import Mgmt
import SystemCalls
import SystemdSupport

/// Kernel devices only.
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
    /// What reaches the controller, through the raw channel, while beacond's instances are registered; nil before
    /// the first apply.
    private var watcher: MgmtAirWatcher?

    init(device: DeviceSpec, index: UInt16, loop: EventLoop, log: Logger, mayPowerOn: Bool, owned: OwnershipStore) {
        (self.device, self.index, self.loop, self.log, self.mayPowerOn, self.owned) = (device, index, loop, log, mayPowerOn, owned)
    }

    private func handle(_ e: MgmtEvent) {
        guard !closed else { return }
        switch MgmtDecisions.meaning(of: e, index: index, device: device.description, advertiser: &advertiser) {
        case .reapply(let why): onEvent(.reapply(reason: why, delay: .zero, fields: ["HCI_DEVICE=\(device)"]))
        case .lost(let message, let level): lose(message, level: level)
        case .nothing: break
        }
    }

    private func lose(_ message: String, level: LogLevel = .err) {
        if !closed { onEvent(.lost(BackendFailure(message: message, level: level, fields: ["HCI_DEVICE=\(device)"]))) }
    }

    func open(_ done: @escaping (BackendFailure?) -> Void) {
        let c: MgmtConnection
        do { c = try MgmtConnection(index: index, loop: loop) } catch {
            if error.problem == .noBluetooth { return done(.noBluetooth(device.description)) }
            return done(BackendFailure(message: "Cannot open the management interface: \(error)", level: .warning))
        }
        connection = c
        c.onEvent = { [weak self] e in self?.handle(e) }
        c.onClosed = { [weak self] error in self?.lose("the management socket failed: \(error)") }
        var opening = MgmtOpening(device: device.description, mayPowerOn: mayPowerOn)
        func step(_ next: MgmtOpening.Next) {
            switch next {
            case .send(let command):
                c.send(command) { [weak self] result in
                    guard let self, !self.closed else { return }
                    step(opening.answered(command, result))
                }
            case .poweredOn(let then):
                log.info("Powered on \(device)")
                step(.send(then))
            case .askWhetherTheDeviceExists: step(opening.deviceExists(Transport.kernelDeviceExists(index: index) == true))
            case .failed(let failure): done(failure)
            case .opened(let info, let features):
                controllerInfo = info
                advertiser = MgmtAdvertiser(device: device.description, features: features, ours: owned[device.description, .mgmtInstances])
                if let m = MgmtDecisions.foreignInstances(advertiser!, device: device.description) { log.debug(m) }
                done(nil)
            }
        }
        step(opening.first)
    }

    func apply(_ schedule: AdvertisingSchedule, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        guard let c = connection, advertiser != nil else { return done(.failure(BackendFailure(message: "The management interface is not open"))) }
        carry(advertiser!.apply(schedule.beacons, dataOnlyAllowed: dataOnlyAllowed), on: c, done)
    }

    /// Runs what the advertiser asked for until it is done or failed (a fall back to Add Advertising asks for a
    /// second round of steps).
    private func carry(_ outcome: MgmtAdvertiser.Outcome, on c: MgmtConnection, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        for n in advertiser?.takeNotes() ?? [] {
            let (level, message, fields) = MgmtDecisions.logLine(n, device: device.description)
            log.log(level, message, fields)
        }
        switch outcome {
        case .done:
            syncWatch()
            done(.success(OnAir(mgmt: advertiser!, information: controllerInfo)))
        case .shortage(let m): done(.failure(BackendFailure(message: m, fields: ["HCI_DEVICE=\(device)"])))
        case .failed(let what, let opcode, let status): done(.failure(MgmtDecisions.failure(what, opcode, status, device: device.description)))
        case .send(let steps):
            c.run(steps) { [weak self] result in
                guard let self, !self.closed, self.advertiser != nil else { return }
                self.carry(self.advertiser!.finished(result), on: c, done)
            }
        }
    }

    /// After each apply: "the kernel holds beacond's instances" is checked against what the controller was told.
    private func syncWatch() {
        guard let a = advertiser, a.applied != nil, !closed else { return }
        if watcher == nil {
            watcher = MgmtAirWatcher(index: index, device: device, sets: traits.advertisingSets == true, loop: loop, log: log)
            watcher!.instances = { [weak self] in self.flatMap { !$0.closed && $0.advertiser?.applied != nil ? $0.advertiser!.beaconInstances : nil } }
            watcher!.onSilence = { [weak self] reason in
                guard let self else { return }
                self.advertiser!.airLost()
                self.onEvent(.reapply(reason: reason, delay: .zero, fields: ["HCI_DEVICE=\(self.device)"]))
            }
        }
        watcher!.applied(ours: Set(a.beaconInstances))
    }

    /// Removes the instances whenever they were added, on the air or not: the kernel keeps an instance through a
    /// power cycle and would put it back on air while beacond is stopped.
    func stop(_ done: @escaping () -> Void) {
        watcher?.end()
        // Not open that far yet (the features unread): the record says what is beacond's.
        let instances = advertiser?.stopping() ?? owned[device.description, .mgmtInstances].sorted(by: >)
        guard let c = connection, !c.isClosed, !instances.isEmpty else { return done() }
        MgmtInstanceRemoval.removeAll(instances, through: c, device: device, log: log) { [weak self] gone in
            guard let self else { return done() }
            if self.advertiser != nil { self.advertiser!.removed(gone) } else { self.owned[self.device.description, .mgmtInstances].subtract(gone) }
            done()
        }
    }

    func close() {
        closed = true
        watcher?.close()
        connection?.close()
        connection = nil
    }
}
