// Advertising with raw HCI commands: on an H4 stream beacond owns (reset, probe, advertise) or on a kernel hciN
// through the raw channel (never reset; watch what other programs send to the same device).
import BeaconCore
import BluetoothHCI
import Connections
import DaemonCore
import HCIHost
import HCITransport
import SystemCalls
import SystemdSupport

final class HCIBackend: AdvertisingBackend {
    let kind = BackendKind.hci
    var onEvent: (BackendEvent) -> Void = { _ in }

    private let device: DeviceSpec
    private let loop: EventLoop
    private let log: Logger
    private let mayBringUp: Bool
    private var connection: ControllerConnection?
    private var info: ControllerInfo?
    private var family: CommandFamily?
    /// Extended: how many advertising sets the controller has (LE Read Number of Supported Advertising Sets).
    private var capacity = 1
    /// The schedule last confirmed on air (as asked, before any interval adjustment).
    private var applied: AdvertisingSchedule?
    /// Extended: what each set carries now (as sent), nil when unknown; the sets used on this connection; the set
    /// of each beacon of `applied`, in order.
    private var sets: [UInt8: AdvertisingRequest]?
    /// On a kernel hciN, kept in the state directory (a killed run's sets are removed by the next start); on a
    /// controller beacond owns, the Reset clears them.
    private var usedHandles: Set<UInt8> = [] {
        didSet { if recordsSets { owned[device.description, .hciSets] = usedHandles } }
    }
    private let owned: OwnershipStore
    private var recordsSets = false
    private var setHandles: [UInt8] = []
    /// Legacy: the one advertiser's parameters and the data it carries now.
    private var legacyBase: AdvertisingRequest?
    private var legacyData: AdvertisingData?
    private var legacyScanResponse: AdvertisingData?
    /// Legacy with several beacons: the beacons taking turns, whose turn it is, the slot timer.
    private var slicing: LegacySlicing?
    private var sliceIndex = 0
    private var sliceTimer: EventSource?
    private var sliceInFlight = false
    /// The intervals used, per beacon of `applied`; the TX power each set (legacy: 0) reported.
    private var effectiveIntervals: [AdvertisingInterval] = []
    private var txPowers: [UInt8: Int8] = [:]
    /// The address in use, as STATUS names it.
    private var addressNote = ""
    private var staticAddress: [UInt8]?
    private var warnedNoStateDirectory = false
    private var rotatingAddress: (generation: UInt64, address: [UInt8])?
    /// The controller refused a short interval although its version allows it: use the 100 ms floor from now on.
    private var intervalFloorForced = false
    private var closed = false
    /// True between the Reset of a controller beacond owns and the first advertising sequence.
    private var freshlyReset = false

    init(device: DeviceSpec, loop: EventLoop, log: Logger, mayBringUp: Bool, owned: OwnershipStore) {
        self.owned = owned
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
                if !c.transport.ownsController {
                    // What a killed run left: removed by the first apply (the sets no beacon needs) or the stop.
                    self.usedHandles = self.owned[self.device.description, .hciSets]
                    self.recordsSets = true
                }
                guard probed.preferredFamily == .extended else {
                    self.logProbe(probed)
                    return done(nil)
                }
                // How many beacons can have their own set. A controller that sets the feature bit without the
                // commands (BlueZ's emulator) refuses it; it ends up on legacy commands anyway.
                c.run([Step(.leReadNumberOfSupportedAdvertisingSets, tolerating: [.unknownHCICommand, .unsupportedFeatureOrParameterValue, .commandDisallowed])]) { [weak self] result in
                    guard let self, !self.closed else { return }
                    switch result {
                    case .success(let replies):
                        if let r = replies.first, r.count >= 2 { self.capacity = max(1, Int(r[1])) }
                        self.logProbe(probed)
                        done(nil)
                    case .failure(let f):
                        done(self.failure("read the number of advertising sets on \(self.device)", f))
                    }
                }
            }
        }
    }

    private func logProbe(_ probed: ControllerInfo) {
        let sets = probed.preferredFamily == .extended ? ", \(capacity) advertising set\(capacity == 1 ? "" : "s")" : ""
        log.info("Controller on \(device): Bluetooth \(probed.version.coreVersionName), "
            + "manufacturer \(hex16(probed.version.manufacturer)), using \(probed.preferredFamily) advertising commands\(sets)")
        if probed.bitmapDisagrees {
            log.debug("The controller's Supported Commands bitmap and its LE Extended Advertising feature bit disagree; following the feature bit, as the kernel does")
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

    func apply(_ schedule: AdvertisingSchedule, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        apply(schedule, dataOnlyAllowed: dataOnlyAllowed, allowSwitch: true, done)
    }

    /// The address policy as the controller is told: nil with the failure's message when the static address
    /// cannot be had.
    /// `chosen`: the config says `address`; unset, a static address that cannot be kept (no state directory: a
    /// hand-started beacond without root) falls back to the public address, with a warning, instead of nothing on
    /// the air.
    private func ownAddress(_ policy: AddressPolicy, chosen: Bool, generation: UInt64) -> Result<OwnAddress, BackendFailure> {
        switch policy {
        case .public:
            return .success(.public)
        case .static:
            if let a = staticAddress { return .success(.random(a)) }
            // Fallen back once on this connection: no new attempt (a mkdir) at every apply.
            if !chosen && warnedNoStateDirectory { return .success(.public) }
            do {
                let a = try StaticAddressStore.load()
                staticAddress = a
                return .success(.random(a))
            } catch {
                if !chosen && !error.damaged {
                    warnedNoStateDirectory = true
                    log.warning("\(error.description); advertising from the controller's public address until it can be kept",
                                ["HCI_DEVICE=\(device)"])
                    return .success(.public)
                }
                return .failure(BackendFailure(message: error.description, fields: ["HCI_DEVICE=\(device)"]))
            }
        case .rotating:
            if let r = rotatingAddress, r.generation == generation { return .success(.random(r.address)) }
            var a: [UInt8]?
            while a == nil {
                do { a = RandomAddress.makeNonResolvable(from: try RandomID.bytes(6)) } catch {
                    return .failure(BackendFailure(message: "Cannot make a private address: \(error)"))
                }
            }
            rotatingAddress = (generation, a!)
            return .success(.random(a!))
        }
    }

    /// The interval this controller can take for `r` (pre-5.0 floor, or the floor a refusal taught).
    private func adjusted(_ r: AdvertisingRequest, _ info: ControllerInfo) -> (AdvertisingRequest, raised: Bool) {
        var e = r
        var (interval, raised) = AdvertisingPlan.effectiveInterval(r, on: info)
        if intervalFloorForced && r.type != .connectableUndirected && interval < .pre50NonConnectableFloor {
            (interval, raised) = (.pre50NonConnectableFloor, false)
        }
        e.interval = interval
        return (e, raised)
    }

    private func apply(_ schedule: AdvertisingSchedule, dataOnlyAllowed: Bool, allowSwitch: Bool,
                       _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        guard let c = connection, let info, let family, !schedule.beacons.isEmpty else {
            return done(.failure(BackendFailure(message: "The controller on \(device) is not open")))
        }
        let policy = schedule.address ?? .static
        let own: OwnAddress
        switch ownAddress(policy, chosen: schedule.address != nil, generation: schedule.addressGeneration) {
        case .success(let a): own = a
        case .failure(let f): return done(.failure(f))
        }
        var wanted: [AdvertisingRequest] = []
        for r in schedule.beacons {
            var (e, raised) = adjusted(r, info)
            e.ownAddress = own
            if raised && !wanted.contains(where: { $0.interval == e.interval }) {
                warnOnce("The controller on \(device) is Bluetooth \(info.version.coreVersionName); before 5.0 non-connectable advertising cannot go below 100 ms: raising the interval from \(r.interval) to \(e.interval)")
            }
            wanted.append(e)
        }
        if family == .legacy, let tx = schedule.beacons[0].txPower {
            warnOnce("tx_power = \(tx) is ignored: the controller on \(device) uses legacy advertising commands, which cannot set the TX power")
        }
        let addressNote = own == .public ? "public address" : "\(policy.rawValue) address \(own)"
        let finish: (Result<Void, StepFailure>, _ full: Bool) -> Void = { [weak self] result, full in
            guard let self, !self.closed else { return }
            switch result {
            case .success:
                self.applied = schedule
                self.addressNote = addressNote
                done(.success(self.currentOnAir!))
            case .failure(let f):
                self.applied = nil
                self.sets = nil
                self.legacyBase = nil
                self.stopSlicing()
                if !full { return done(.failure(self.failure("update the advertising data on \(self.device)", f))) }
                if allowSwitch, let why = family.switchReason(after: f, leadingSteps: AdvertisingPlan.familyProbeSteps) {
                    self.log.notice("\(f.error.opcode) was refused with \(f.error.status!) on \(self.device): \(why); switching to \(family.other) commands",
                                    self.fields(f.error))
                    self.family = family.other
                    return self.apply(schedule, dataOnlyAllowed: false, allowSwitch: false, done)
                }
                if let s = f.error.status, s == .invalidHCICommandParameters || s == .unsupportedFeatureOrParameterValue {
                    let isParameters: Bool
                    switch f.step.command {
                    case .leSetAdvertisingParameters, .leSetExtendedAdvertisingParameters: isParameters = true
                    default: isParameters = false
                    }
                    let refused = self.settingsRefused(by: f.step.command, wanted)
                    if isParameters && !self.intervalFloorForced && wanted.contains(where: { $0.type != .connectableUndirected && $0.interval < .pre50NonConnectableFloor }) {
                        // A safe adjustment exists: many controllers still hold non-connectable advertising to the
                        // pre-5.0 floor of 100 ms. Use it and try again at once.
                        self.log.warning("The controller on \(self.device) refused \(refused) (\(f.error)); raising the interval to \(AdvertisingInterval.pre50NonConnectableFloor), the floor older controllers enforce",
                                         self.fields(f.error))
                        self.intervalFloorForced = true
                        return self.apply(schedule, dataOnlyAllowed: false, allowSwitch: false, done)
                    }
                    self.log.error("The controller on \(self.device) refused \(refused) (\(f.error)); check [advertising] in the config",
                                   self.fields(f.error))
                }
                done(.failure(self.failure("enable advertising on \(self.device)", f)))
            }
        }

        switch family {
        case .extended:
            guard let plan = SetPlan.make(wanted, current: dataOnlyAllowed ? sets : nil, capacity: capacity, stale: usedHandles,
                                          afterReset: freshlyReset) else {
                return done(.failure(BackendFailure(
                    message: "The config has \(wanted.count) beacons, but the controller on \(device) has \(capacity) advertising set\(capacity == 1 ? "" : "s") (LE Read Number of Supported Advertising Sets); remove beacons or use a controller with more sets",
                    fields: ["HCI_DEVICE=\(device)"])))
            }
            let full = !dataOnlyAllowed || sets == nil
            freshlyReset = false
            if plan.steps.isEmpty, applied == schedule, currentOnAir != nil { return done(.success(currentOnAir!)) }
            if full { sets = nil }
            // Recorded before the first command: a run killed halfway still names every set it may have enabled.
            usedHandles.formUnion(plan.handles)
            c.run(plan.steps) { [weak self] result in
                guard let self, !self.closed else { return }
                if case .success(let replies) = result {
                    var now: [UInt8: AdvertisingRequest] = [:]
                    for (r, h) in zip(wanted, plan.handles) { now[h] = r }
                    self.sets = now
                    self.usedHandles.subtract(plan.removed)
                    self.setHandles = plan.handles
                    for (step, reply) in zip(plan.steps, replies) {
                        if case .leSetExtendedAdvertisingParameters(let p) = step.command,
                           let tx = AdvertisingPlan.reportedTxPower(for: step.command, returnParameters: reply) {
                            self.txPowers[p.handle] = tx
                        }
                    }
                    for h in plan.removed { self.txPowers[h] = nil }
                    self.effectiveIntervals = wanted.map(\.interval)
                    finish(.success(()), full)
                } else if case .failure(let f) = result {
                    finish(.failure(f), full)
                }
            }
        case .legacy:
            let slicing = LegacySlicing(wanted)
            let base = slicing.base
            if dataOnlyAllowed, let legacyBase, !legacyBase.needsRestart(for: base) {
                // The advertiser's parameters stay: only the data of the beacon in the current slot may change.
                if sliceIndex >= wanted.count { sliceIndex = 0 }
                let steps = sliceSteps(slicing, sliceIndex)
                startSlicing(slicing)
                self.legacyBase = base
                effectiveIntervals = wanted.map { _ in base.interval }
                if steps.isEmpty { return finish(.success(()), false) }
                let (data, response) = (wanted[sliceIndex].data, slicing.scanResponse(sliceIndex))
                c.run(steps) { [weak self] result in
                    guard let self, !self.closed else { return }
                    if case .success = result { (self.legacyData, self.legacyScanResponse) = (data, response) }
                    finish(result.map { _ in () }, false)
                }
                return
            }
            let steps = AdvertisingPlan.start(base, family: .legacy, handle: 0, afterReset: freshlyReset)
            freshlyReset = false
            stopSlicing()
            legacyBase = nil
            c.run(steps) { [weak self] result in
                guard let self, !self.closed else { return }
                if case .success(let replies) = result {
                    self.legacyBase = base
                    self.legacyData = base.data
                    self.legacyScanResponse = base.scanResponse
                    self.sliceIndex = 0
                    self.txPowers[0] = zip(steps, replies).compactMap { AdvertisingPlan.reportedTxPower(for: $0.command, returnParameters: $1) }.last
                    self.effectiveIntervals = wanted.map { _ in base.interval }
                    self.startSlicing(slicing)
                }
                finish(result.map { _ in () }, true)
            }
        }
    }

    // MARK: time slicing (legacy controllers, several beacons)

    private func startSlicing(_ s: LegacySlicing) {
        guard s.beacons.count > 1 else { return stopSlicing() }
        slicing = s
        if sliceTimer == nil {
            sliceTimer = try? loop.addIdleTimer { [weak self] in self?.nextSlice() }
        }
        if sliceTimer?.isArmed != true { sliceTimer?.rearm(after: slotDuration) }
    }

    private var slotDuration: Duration {
        .microseconds(Int64((legacyBase ?? slicing!.base).interval.units) * 625)
    }

    /// What slot `i` needs sent: its data and its scan response, each only when it differs from what is there.
    private func sliceSteps(_ s: LegacySlicing, _ i: Int) -> [Step] {
        var steps: [Step] = []
        if s.beacons[i].data != legacyData { steps += AdvertisingPlan.updateData(s.beacons[i].data, family: .legacy, handle: 0) }
        if let r = s.scanResponse(i), r != legacyScanResponse { steps.append(Step(.leSetScanResponseData(r))) }
        return steps
    }

    private func stopSlicing() {
        slicing = nil
        sliceTimer?.disarm()
    }

    private func nextSlice() {
        guard let s = slicing, let c = connection, !closed, legacyBase != nil else { return }
        sliceTimer?.rearm(after: slotDuration)
        guard !sliceInFlight else { return }  // the controller has not answered the last one: skip this slot
        let i = s.next(after: sliceIndex)
        let data = s.beacons[i].data
        let response = s.scanResponse(i)
        let steps = sliceSteps(s, i)
        guard !steps.isEmpty else { sliceIndex = i; return }
        sliceInFlight = true
        c.run(steps) { [weak self] result in
            guard let self, !self.closed else { return }
            self.sliceInFlight = false
            switch result {
            case .success:
                self.sliceIndex = i
                self.legacyData = data
                self.legacyScanResponse = response
            case .failure(let f):
                self.oddity("slice", "The controller on \(self.device) refused the next time slice's data (\(f.error)); trying again at the next slot")
            }
        }
    }

    private var currentOnAir: OnAir? {
        guard let family, let applied, !effectiveIntervals.isEmpty else { return nil }
        let n = applied.beacons.count
        var details = [family.description]
        var beacons: [BeaconOnAir] = []
        switch family {
        case .extended:
            if n == 1, let tx = txPowers[setHandles.first ?? 0], tx != 0x7F { details.append("TX \(tx) dBm") }
            if n > 1 { details.append("\(n) sets") }
            for (k, h) in setHandles.enumerated() where n > 1 {
                var d = ["set \(h)"]
                if let tx = txPowers[h], tx != 0x7F { d.append("TX \(tx) dBm") }
                beacons.append(BeaconOnAir(every: .microseconds(Int64(effectiveIntervals[k].units) * 625), details: d))
            }
        case .legacy:
            if let tx = txPowers[0], tx != 0x7F { details.append("TX \(tx) dBm") }
            if n > 1, let base = legacyBase, let slicing {
                details.append("time-sliced, \(base.interval) slots")
                let every = slicing.effectiveInterval(slot: base.interval)
                beacons = (1...n).map { BeaconOnAir(every: every, details: ["slot \($0) of \(n)"]) }
            }
        }
        details.append(addressNote)
        return OnAir(interval: effectiveIntervals[0], details: details, beacons: beacons)
    }

    func stop(_ done: @escaping () -> Void) {
        guard let c = connection, let family, info != nil, !c.isClosed else { return done() }
        applied = nil
        stopSlicing()
        let steps: [Step]
        switch family {
        case .legacy: steps = AdvertisingPlan.stop(family: .legacy, handle: 0)
        case .extended where c.transport.ownsController:
            // Nothing but beacond's on this controller: all sets at once, within the stop deadline however many.
            steps = AdvertisingPlan.stopAll()
        case .extended:
            let handles = usedHandles.isEmpty ? [0] : usedHandles.sorted()
            steps = handles.flatMap { AdvertisingPlan.stop(family: .extended, handle: $0) }
        }
        sets = nil
        legacyBase = nil
        c.run(steps) { [weak self] result in
            guard let self else { return done() }
            switch result {
            case .success:
                if family == .extended { self.usedHandles = [] }
                self.log.info("Advertising disabled on \(self.device)")
            case .failure(let f): self.log.warning("Failed to disable advertising on \(self.device): \(f.error)", self.fields(f.error))
            }
            done()
        }
    }

    func close() {
        closed = true
        stopSlicing()
        sliceTimer?.cancel()
        connection?.close()
        connection = nil
    }

    /// Warnings about the settings, each said once per connection: an apply runs again for every Eddystone-TLM
    /// refresh and every reload, and the same setting is not news then (a changed one is: its text differs).
    private var warned: Set<String> = []

    private func warnOnce(_ message: String) {
        if warned.insert(message).inserted { log.warning(message, ["HCI_DEVICE=\(device)"]) }
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
        guard let applied, applied.beacons.first?.type == .connectableUndirected, let why = event.connectableAdvertisingInterruption else { return }
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
                && (sets == 0 || (0..<sets).contains { 2 + $0 * 4 < p.count && usedHandles.contains(p[2 + $0 * 4]) })
        case .leSetExtendedAdvertisingParameters, .leSetExtendedAdvertisingData, .leRemoveAdvertisingSet, .leSetAdvertisingSetRandomAddress:
            touchesUs = family == .extended && p.first.map(usedHandles.contains) == true
        default: touchesUs = false
        }
        guard touchesUs else { return }
        applied = nil
        sets = nil
        legacyBase = nil
        stopSlicing()
        onEvent(.reapply(reason: "Another program sent \(opcode) to \(device)",
                         delay: opcode == .reset ? .milliseconds(500) : .milliseconds(100),
                         fields: ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(opcode.rawValue))"]))
    }

    private func settingsRefused(by command: HCICommand, _ wanted: [AdvertisingRequest]) -> String {
        func parameters(_ r: AdvertisingRequest, _ set: String) -> String {
            "the advertising parameters\(set) (interval_ms \(r.interval), \(r.type.pduName)\(r.txPower.map { ", tx_power \($0) dBm" } ?? ""))"
        }
        switch command {
        case .leSetAdvertisingParameters:
            return parameters(wanted[0], "")
        case .leSetExtendedAdvertisingParameters(let p):
            let k = wanted.count > 1 ? setHandles.firstIndex(of: p.handle) ?? Int(p.handle) : 0
            return parameters(k < wanted.count ? wanted[k] : wanted[0], wanted.count > 1 ? " of set \(p.handle)" : "")
        case .leSetAdvertisingData, .leSetExtendedAdvertisingData: return "the advertising data"
        default: return "\(command.opcode)"
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
