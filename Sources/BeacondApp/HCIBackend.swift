// Advertising with raw HCI commands: on an H4 stream beacond owns (reset, probe, advertise) or on a kernel hciN
// through the raw channel (never reset; watch what other programs send to the same device).
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import HCITransport
import SystemCalls
import SystemdSupport

final class HCIBackend: AdvertisingBackend {
    let kind = BackendKind.hci
    let kernelInstance: UInt8? = nil
    var onEvent: (BackendEvent) -> Void = { _ in }

    private let device: DeviceSpec
    private let loop: EventLoop
    private let log: Logger
    private let mayBringUp: Bool
    private var connection: ControllerConnection?
    private var info: ControllerInfo?
    private var family: CommandFamily?
    /// The request last confirmed on air (as asked, before any interval adjustment), how it went out, and the TX
    /// power the controller reported.
    private var applied: AdvertisingRequest?
    private var effectiveInterval: AdvertisingInterval?
    private var txPower: Int8?
    /// The controller refused a short interval although its version allows it: use the 100 ms floor from now on.
    private var intervalFloorForced = false
    /// The extended advertising set beacond uses.
    private let handle: UInt8 = 0
    private var closed = false
    /// True between the Reset of a controller beacond owns and the first advertising sequence.
    private var freshlyReset = false

    init(device: DeviceSpec, loop: EventLoop, log: Logger, mayBringUp: Bool) {
        self.device = device
        self.loop = loop
        self.log = log
        self.mayBringUp = mayBringUp
    }

    func open(_ done: @escaping (BackendFailure?) -> Void) {
        let transport: Transport
        do {
            transport = try Transport.open(device, mayBringUp: mayBringUp)
        } catch {
            return done(Self.failure(opening: device, error, mayBringUp: mayBringUp))
        }
        let c: ControllerConnection
        do { c = try ControllerConnection(transport: transport, loop: loop) } catch {
            return done(BackendFailure(message: "Failed to watch \(device): \(error)", fatal: .failure))
        }
        connection = c
        // The backend may be gone by the time the connection reports (the daemon drops it on the first failure).
        c.onClosed = { [weak self] reason in
            guard let self, !self.closed else { return }
            switch reason {
            case .transport(.permissionDenied(_, let cap, let e)):
                self.onEvent(.lost(BackendFailure(message: "Cannot send commands to \(self.device): \(e); beacond needs \(cap)", fatal: .noPermission)))
            case .hung(let d):
                self.onEvent(.lost(BackendFailure(message: "The controller on \(self.device) gave no command credit back within \(formatDuration(d)) and is treated as hung")))
            case .transport(let e):
                self.onEvent(.lost(BackendFailure(message: "Lost the controller (\(e))", level: .warning)))
            }
        }
        c.onUnsolicited = { [weak self] event in self?.unsolicited(event) }
        c.onMalformed = { [weak self] code, reason in
            guard let self else { return }
            self.oddity("malformed-\(code)", "The controller on \(self.device) sent a malformed event \(hex8(code)) (\(reason)); ignoring it")
        }
        c.onForeignCommand = { [weak self] opcode, params in self?.foreignCommand(opcode, params) }

        // beacond owns an H4 controller and resets it to a known state; a kernel-owned one is never reset.
        c.probe { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .failure(.step(let f)):
                done(self.failure("probe the controller on \(self.device)", f))
            case .failure(.malformedReply):
                done(BackendFailure(message: "The controller on \(self.device) sent a malformed probe reply"))
            case .success(let probed):
                self.info = probed
                self.family = probed.preferredFamily
                self.freshlyReset = c.transport.ownsController
                self.log.info("Controller on \(self.device): Bluetooth \(probed.version.coreVersionName), "
                    + "manufacturer \(hex16(probed.version.manufacturer)), using \(probed.preferredFamily) advertising commands")
                if probed.bitmapDisagrees {
                    self.log.debug("The controller's Supported Commands bitmap and its LE Extended Advertising feature bit disagree; following the feature bit, as the kernel does")
                }
                done(nil)
            }
        }
    }

    static func failure(opening device: DeviceSpec, _ error: TransportError, mayBringUp: Bool) -> BackendFailure {
        switch error {
        case .deviceAbsent:
            return BackendFailure(message: "Waiting for \(device) to appear", level: .notice)
        case .deviceDown(_, let cap):
            return mayBringUp
                ? BackendFailure(message: "\(device) is down and beacond lacks \(cap) to bring it up; waiting for it to come up", level: .warning)
                : BackendFailure(message: "Waiting for \(device) to come up", level: .notice)
        case .permissionDenied(_, let cap, let e):
            return BackendFailure(message: "Cannot use \(device): \(e); beacond needs \(cap)", fatal: .noPermission)
        case .system(_, let e) where e.errno == .addressFamilyNotSupported:
            return BackendFailure(message: "Cannot use \(device): this kernel or network namespace has no Bluetooth (AF_BLUETOOTH)", fatal: .unavailable)
        default:
            return BackendFailure(message: "Cannot open \(error)", level: .warning)
        }
    }

    func apply(_ wanted: AdvertisingRequest, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        apply(wanted, dataOnlyAllowed: dataOnlyAllowed, allowSwitch: true, done)
    }

    private func apply(_ wanted: AdvertisingRequest, dataOnlyAllowed: Bool, allowSwitch: Bool,
                       _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        guard let c = connection, let info, let family else {
            return done(.failure(BackendFailure(message: "The controller on \(device) is not open")))
        }
        if dataOnlyAllowed, let applied, !applied.needsRestart(for: wanted), let onAir = currentOnAir {
            guard applied != wanted else { return done(.success(onAir)) }
            c.run(AdvertisingPlan.updateData(wanted.data, family: family, handle: handle)) { [weak self] result in
                guard let self, !self.closed else { return }
                switch result {
                case .success:
                    self.applied = wanted
                    done(.success(onAir))
                case .failure(let f):
                    done(.failure(self.failure("update the advertising data on \(self.device)", f)))
                }
            }
            return
        }
        var effective = wanted
        var (interval, raised) = AdvertisingPlan.effectiveInterval(wanted, on: info)
        if intervalFloorForced && wanted.type != .connectableUndirected && interval < .pre50NonConnectableFloor {
            (interval, raised) = (.pre50NonConnectableFloor, false)
        }
        effective.interval = interval
        if raised {
            log.warning("The controller on \(device) is Bluetooth \(info.version.coreVersionName); before 5.0 non-connectable advertising cannot go below 100 ms: raising the interval from \(wanted.interval) to \(interval)")
        }
        if family == .legacy, let tx = wanted.txPower {
            log.warning("tx_power = \(tx) is ignored: the controller on \(device) uses legacy advertising commands, which cannot set the TX power")
        }
        let steps = AdvertisingPlan.start(effective, family: family, handle: handle, afterReset: freshlyReset)
        freshlyReset = false
        applied = nil
        c.run(steps) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .success(let replies):
                let tx = zip(steps, replies).compactMap { AdvertisingPlan.reportedTxPower(for: $0.command, returnParameters: $1) }.last
                self.applied = wanted
                self.txPower = tx
                self.effectiveInterval = effective.interval
                done(.success(self.currentOnAir!))
            case .failure(let f):
                if allowSwitch, let why = family.switchReason(after: f, leadingSteps: AdvertisingPlan.familyProbeSteps) {
                    self.log.notice("\(f.error.opcode) was refused with \(f.error.status!) on \(self.device): \(why); switching to \(family.other) commands",
                                    self.fields(f.error))
                    self.family = family.other
                    return self.apply(wanted, dataOnlyAllowed: false, allowSwitch: false, done)
                }
                if let s = f.error.status, s == .invalidHCICommandParameters || s == .unsupportedFeatureOrParameterValue {
                    let isParameters: Bool
                    switch f.step.command {
                    case .leSetAdvertisingParameters, .leSetExtendedAdvertisingParameters: isParameters = true
                    default: isParameters = false
                    }
                    let refused = self.settingsRefused(by: f.step.command, effective)
                    if isParameters && !self.intervalFloorForced && effective.type != .connectableUndirected
                        && effective.interval < .pre50NonConnectableFloor
                    {
                        // A safe adjustment exists: many controllers still hold non-connectable advertising to the
                        // pre-5.0 floor of 100 ms. Use it and try again at once.
                        self.log.warning("The controller on \(self.device) refused \(refused) (\(f.error)); raising the interval to \(AdvertisingInterval.pre50NonConnectableFloor), the floor older controllers enforce",
                                         self.fields(f.error))
                        self.intervalFloorForced = true
                        return self.apply(wanted, dataOnlyAllowed: false, allowSwitch: false, done)
                    }
                    self.log.error("The controller on \(self.device) refused \(refused) (\(f.error)); check [advertising] in the config",
                                   self.fields(f.error))
                }
                done(.failure(self.failure("enable advertising on \(self.device)", f)))
            }
        }
    }

    private var currentOnAir: OnAir? {
        guard let effectiveInterval, let family else { return nil }
        var details = [family.description]
        if let tx = txPower, tx != 0x7F { details.append("TX \(tx) dBm") }
        return OnAir(interval: effectiveInterval, details: details)
    }

    func stop(_ done: @escaping () -> Void) {
        guard let c = connection, let family, info != nil, !c.isClosed else { return done() }
        applied = nil
        c.run(AdvertisingPlan.stop(family: family, handle: handle)) { [weak self] result in
            guard let self else { return done() }
            switch result {
            case .success: self.log.info("Advertising disabled on \(self.device)")
            case .failure(let f): self.log.warning("Failed to disable advertising on \(self.device): \(f.error)", self.fields(f.error))
            }
            done()
        }
    }

    func close() {
        closed = true
        connection?.close()
        connection = nil
    }

    /// What a misbehaving controller did, each kind logged once per connection as a warning (then at debug level),
    /// so a flood cannot flood the journal.
    private var oddities: Set<String> = []

    private func oddity(_ kind: String, _ message: String) {
        let first = oddities.insert(kind).inserted
        log.log(first ? .warning : .debug, message, ["HCI_DEVICE=\(device)"])
    }

    private func unsolicited(_ event: HCIEvent) {
        guard !closed else { return }
        if case .hardwareError(let code) = event {
            return onEvent(.lost(BackendFailure(message: "The controller on \(device) reported Hardware Error \(hex8(code)); its advertising state is gone, starting over")))
        }
        // On a kernel device, replies to other programs' commands arrive here too; on a controller beacond owns, a
        // reply to a command it did not send is the controller's mistake.
        if connection?.transport.ownsController == true {
            switch event {
            case .commandComplete(_, let op, _) where op.rawValue != 0, .commandStatus(_, _, let op) where op.rawValue != 0:
                oddity("unsolicited-\(op.rawValue)", "The controller on \(device) answered \(op), which beacond did not send or no longer waits for; ignoring it")
            case .other(let code, let p) where event.connectableAdvertisingInterruption == nil:
                oddity("event-\(code)", "The controller on \(device) sent event \(hex8(code)) (\(p.count) bytes), which beacond does not use; ignoring it")
            case .leMeta(let sub, let p) where event.connectableAdvertisingInterruption == nil:
                oddity("le-meta-\(sub)", "The controller on \(device) sent LE Meta subevent \(hex8(sub)) (\(p.count) bytes), which beacond does not use; ignoring it")
            default: break
            }
        }
        // A controller stops connectable advertising when a central connects, and nothing turns it back on by
        // itself. Put it back (controllers that cannot advertise while connected refuse, and beacond retries).
        guard let applied, applied.type == .connectableUndirected, let why = event.connectableAdvertisingInterruption else { return }
        self.applied = nil
        onEvent(.reapply(reason: "Connectable advertising on \(device) stopped: \(why)", delay: .zero, fields: ["HCI_DEVICE=\(device)"]))
    }

    /// Another program talked to our kernel device. If what it sent can take our advertising off the air, ask
    /// for it to be put back shortly (after that program's own sequence has had time to finish).
    private func foreignCommand(_ opcode: Opcode, _ p: [UInt8]) {
        guard applied != nil, let family else { return }
        let touchesUs: Bool
        switch opcode {
        case .reset, .leClearAdvertisingSets: touchesUs = true
        case .leSetAdvertisingEnable: touchesUs = family == .legacy && p.first == 0
        case .leSetAdvertisingParameters, .leSetAdvertisingData: touchesUs = family == .legacy
        case .leSetExtendedAdvertisingEnable:
            // Disable of all sets (count 0) or of a list that includes ours.
            let sets = p.count >= 2 ? Int(p[1]) : 0
            touchesUs = family == .extended && p.first == 0
                && (sets == 0 || (0..<sets).contains { 2 + $0 * 4 < p.count && p[2 + $0 * 4] == handle })
        case .leSetExtendedAdvertisingParameters, .leSetExtendedAdvertisingData, .leRemoveAdvertisingSet:
            touchesUs = family == .extended && p.first == handle
        default: touchesUs = false
        }
        guard touchesUs else { return }
        applied = nil
        onEvent(.reapply(reason: "Another program sent \(opcode) to \(device)",
                         delay: opcode == .reset ? .milliseconds(500) : .milliseconds(100),
                         fields: ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(opcode.rawValue))"]))
    }

    private func settingsRefused(by command: HCICommand, _ r: AdvertisingRequest) -> String {
        switch command {
        case .leSetAdvertisingParameters, .leSetExtendedAdvertisingParameters:
            "the advertising parameters (interval_ms \(r.interval), \(r.type.pduName)\(r.txPower.map { ", tx_power \($0) dBm" } ?? ""))"
        case .leSetAdvertisingData, .leSetExtendedAdvertisingData: "the advertising data"
        default: "\(command.opcode)"
        }
    }

    private func failure(_ what: String, _ f: StepFailure) -> BackendFailure {
        BackendFailure(message: "Failed to \(what): \(f.error)", fields: fields(f.error))
    }

    private func fields(_ e: CommandError) -> [String] {
        var f = ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(e.opcode.rawValue))"]
        if let s = e.status { f.append("HCI_STATUS=\(hex8(s.rawValue))") }
        return f
    }
}
