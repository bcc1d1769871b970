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
    let traits = ControllerTraits()
    var onEvent: (BackendEvent) -> Void = { _ in }

    private let device: DeviceSpec
    private let loop: EventLoop
    private let log: Logger
    private let mayBringUp: Bool
    private var connection: ControllerConnection?
    /// Every decision about what goes to the controller (HCIHost's HCIAdvertiser); nil until the probe is done.
    private var advertiser: HCIAdvertiser?
    private let owned: OwnershipStore
    private var sliceTimer: EventSource?
    /// Armed while the controller refuses beacond's addresses (another program scans): tries them again.
    private var addressRetryTimer: EventSource?
    /// Armed while beacond advertises: turns the advertiser off and on again, for a controller that stops by itself.
    private var refreshTimer: EventSource?
    /// An apply or a stop that came while a refresh's commands were out: each runs when they are back.
    private var afterRefresh: [() -> Void] = []
    /// The address of each beacon in use, as STATUS names it, and the address itself.
    private var addressNotes: [String] = []
    private var ownAddresses: [OwnAddress] = []
    /// Which address the controller is told (DaemonCore's AddressChoice; the state directory and the kernel's random
    /// bytes come from here).
    private var addresses = AddressChoice()
    private var closed = false

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
                self.onEvent(.lost(BackendFailure(message: "The controller on \(self.device) gave no command credit back within \(formatDuration(d)) and is treated as hung", unanswered: true)))
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
                let make = { [weak self] (capacity: Int) in
                    guard let self else { return }
                    let owns = c.transport.ownsController
                    // On a kernel hciN, the sets a killed run left (the state directory's record): the first apply
                    // removes those no beacon needs, and the stop every one.
                    self.advertiser = HCIAdvertiser(device: self.device.description, info: probed, capacity: capacity, ownsController: owns,
                                                    leftOver: owns ? [] : self.owned[self.device.description, .hciSets])
                    self.logProbe(probed, capacity: capacity)
                    done(nil)
                }
                guard probed.preferredFamily == .extended else { return make(1) }
                // How many beacons can have their own set. A controller that sets the feature bit without the
                // commands (BlueZ's emulator) refuses it; it ends up on legacy commands anyway.
                c.run([Step(.leReadNumberOfSupportedAdvertisingSets, tolerating: [.unknownHCICommand, .unsupportedFeatureOrParameterValue, .commandDisallowed])]) { [weak self] result in
                    guard let self, !self.closed else { return }
                    switch result {
                    case .success(let replies):
                        make(replies.first.flatMap { $0.count >= 2 ? max(1, Int($0[1])) : nil } ?? 1)
                    case .failure(let f):
                        done(self.failure("read the number of advertising sets on \(self.device)", f))
                    }
                }
            }
        }
    }

    private func logProbe(_ probed: ControllerInfo, capacity: Int) {
        let sets = probed.preferredFamily == .extended ? ", \(capacity) advertising set\(capacity == 1 ? "" : "s")" : ""
        log.info("Controller on \(device): Bluetooth \(probed.version.coreVersionName), "
            + "manufacturer \(hex16(probed.version.manufacturer)), using \(probed.preferredFamily) advertising commands\(sets)")
        if probed.bitmapDisagrees {
            log.debug("The controller's Supported Commands bitmap and its LE Extended Advertising feature bit disagree; following the feature bit, as the kernel does")
        }
    }

    /// Takes hciINDEX down and up again (Transport.powerCycle): nil, or why it failed.
    static func powerCycle(index: UInt16) -> BackendFailure? {
        do throws(TransportError) {
            try Transport.powerCycle(index: index)
            return nil
        } catch {
            return BackendFailure(message: "\(error)", level: .warning)
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
            return .noBluetooth(device.description)
        default:
            return BackendFailure(message: "Cannot open \(error)", level: .warning)
        }
    }

    func apply(_ schedule: AdvertisingSchedule, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        guard let c = connection, advertiser != nil, !schedule.beacons.isEmpty else {
            return done(.failure(BackendFailure(message: "The controller on \(device) is not open")))
        }
        // A refresh's off and on must not land between the apply's own commands.
        if refreshing { return afterRefresh.append { [weak self] in self?.apply(schedule, dataOnlyAllowed: dataOnlyAllowed, done) } }
        var chosen = Set<BluetoothAddress>()
        for case .chosen(let a)? in schedule.addresses.map(\.setting) { chosen.insert(a) }
        let own: [OwnAddress]
        let choice = addresses.choose(schedule.addresses, generation: schedule.addressGeneration, loadStatic: { keys in
            do throws(AddressStore.Failure) { return .success(try AddressStore.load(keys, avoiding: chosen)) } catch {
                return .failure(error.damaged ? .damaged(error.description) : .unavailable(error.description))
            }
        }, randomBytes: { try? RandomID.bytes(6) })
        switch choice {
        case .success(let c):
            own = c.addresses
            if let w = c.warning { log.warning(w, ["HCI_DEVICE=\(device)"]) }
        case .failure(let r): return done(.failure(BackendFailure(message: r.message, fields: ["HCI_DEVICE=\(device)"])))
        }
        let wanted = zip(schedule.beacons, own).map { r, a in var e = r; e.ownAddress = a; return e }
        let notes = zip(schedule.addresses, own).map { w, a in AddressPlan.describe(a, w.setting) }
        let outcome = advertiser!.apply(wanted, dataOnlyAllowed: dataOnlyAllowed)
        carry(outcome, on: c) { [weak self] result in
            guard let self else { return }
            if case .success = result { (self.addressNotes, self.ownAddresses) = (notes, own) }
            done(result.map { self.onAir! })
        }
    }

    /// Runs what the advertiser asked for until it is done or failed (a family switch or a raised interval floor
    /// asks for a second round of steps).
    private func carry(_ outcome: HCIAdvertiser.Outcome, on c: ControllerConnection, _ done: @escaping (Result<Void, BackendFailure>) -> Void) {
        say(advertiser?.takeNotes() ?? [])
        syncSliceTimer()
        syncAddressRetry()
        syncRefreshTimer()
        // Before the steps go out: a run killed halfway still names every set they may enable.
        recordSets()
        switch outcome {
        case .done: done(.success(()))
        case .failed(let message, let error):
            done(.failure(BackendFailure(message: message, fields: error.map(fields) ?? ["HCI_DEVICE=\(device)"], unanswered: error?.unanswered ?? false)))
        case .send(let steps):
            c.run(steps) { [weak self] result in
                guard let self, !self.closed, self.advertiser != nil else { return }
                self.carry(self.advertiser!.finished(result), on: c, done)
            }
        }
    }

    private func say(_ notes: [HCIAdvertiser.Note]) {
        for n in notes {
            switch n {
            case .warning(let m): warnOnce(m)
            case .info(let m): log.info(m, ["HCI_DEVICE=\(device)"])
            case .notice(let m, let e): log.notice(m, fields(e))
            case .refused(let m, let e, .retryingWithFloor): log.warning(m, fields(e))
            case .refused(let m, let e, .checkConfig): log.error(m, fields(e))
            }
        }
    }

    /// On a kernel hciN, the state directory's record follows the advertiser's sets (written only when they change).
    private func recordSets() {
        if let a = advertiser, !a.ownsController { owned[device.description, .hciSets] = a.usedHandles }
    }

    // MARK: time slicing (legacy controllers, several beacons)

    /// The slot timer runs exactly while the advertiser time-slices.
    private func syncSliceTimer() {
        guard let d = advertiser?.slotDuration, !closed else { sliceTimer?.disarm(); return }
        if sliceTimer == nil { sliceTimer = try? loop.addIdleTimer { [weak self] in self?.nextSlice() } }
        if sliceTimer?.isArmed != true { sliceTimer?.rearm(after: d) }
    }

    private func nextSlice() {
        guard let c = connection, !closed, let d = advertiser?.slotDuration else { return }
        sliceTimer?.rearm(after: d)
        let steps = advertiser!.nextSlice()
        guard !steps.isEmpty else { return }
        let started = monotonicMicroseconds()
        c.run(steps) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .success:
                self.advertiser?.sliceFinished(true, took: .microseconds(Int64(monotonicMicroseconds() &- started)))
                self.say(self.advertiser?.takeNotes() ?? [])
            case .failure(let f):
                if f.error.unanswered { return self.onEvent(.lost(self.failure("send the next time slice on \(self.device)", f))) }
                if let again = self.advertiser?.sliceFailed(f) { return self.carryOnItsOwn(again, on: c) }
                self.oddity("slice", "The controller on \(self.device) refused the next time slice's data (\(f.error)); trying again at the next slot")
            }
        }
    }

    /// The advertiser changes what is on the air by itself (the public address while the controller refuses beacond's
    /// own, and back): the lifecycle hears of the result, or of the loss.
    private func carryOnItsOwn(_ outcome: HCIAdvertiser.Outcome, on c: ControllerConnection) {
        carry(outcome, on: c) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .success: if let o = self.onAir { self.onEvent(.changed(o)) }
            case .failure(let f): self.onEvent(.lost(f))
            }
        }
    }

    private func syncAddressRetry() {
        guard advertiser?.publicWhileScanning == true, !closed else { addressRetryTimer?.disarm(); return }
        if addressRetryTimer == nil {
            addressRetryTimer = try? loop.addIdleTimer { [weak self] in
                guard let self, let c = self.connection, !self.closed else { return }
                guard let o = self.advertiser?.retryOwnAddresses() else { return self.syncAddressRetry() }
                self.carryOnItsOwn(o, on: c)
            }
        }
        if addressRetryTimer?.isArmed != true { addressRetryTimer?.rearm(after: HCIAdvertiser.addressRetryPeriod) }
    }

    // MARK: a controller that stops by itself (HCIAdvertiser.refreshSteps)

    private var refreshing = false

    private func syncRefreshTimer() {
        guard advertiser?.isAdvertising == true, !closed else { refreshTimer?.disarm(); return }
        if refreshTimer == nil { refreshTimer = try? loop.addIdleTimer { [weak self] in self?.refresh() } }
        if refreshTimer?.isArmed != true { refreshTimer?.rearm(after: HCIAdvertiser.refreshPeriod) }
    }

    private func refresh() {
        guard let c = connection, !closed, let steps = advertiser?.refreshSteps() else { return }
        defer { syncRefreshTimer() }
        guard !steps.isEmpty else { return }
        refreshing = true
        c.run(steps) { [weak self] result in
            guard let self, !self.closed else { return }
            self.refreshing = false
            self.advertiser?.refreshFinished()
            if case .failure(let f) = result {
                if f.error.unanswered {
                    self.afterRefresh = []
                    return self.onEvent(.lost(self.failure("turn the advertising on \(self.device) off and on again", f)))
                }
                self.oddity("refresh", "The controller on \(self.device) refused \(f.step.command.opcode) when beacond turned its advertising off and on again (\(f.error)); trying again in \(HCIAdvertiser.refreshPeriod.components.seconds) s")
            }
            let waiting = self.afterRefresh
            self.afterRefresh = []
            waiting.forEach { $0() }
        }
    }

    /// The advertiser's report, with each beacon's address: once for all when they share one, else per beacon.
    private var onAir: OnAir? {
        guard let a = advertiser, let r = a.report else { return nil }
        let n = a.applied?.count ?? 1
        let controller = ControllerSummary(backend: .hci, family: "\(a.family)", bluetoothVersion: a.info.version.coreVersionName,
                                           manufacturer: a.info.version.manufacturer, sets: a.family == .extended ? a.capacity : nil,
                                           timeSliced: a.family == .legacy && n > 1)
        if a.publicWhileScanning {
            // Every beacon from the public address until the controller takes beacond's own again.
            return OnAir(interval: r.interval, details: r.details + ["public address while another program scans on \(device)"], txPower: r.txPower,
                         beacons: r.beacons.map { BeaconOnAir(every: $0.every, details: $0.details, txPower: $0.txPower) },
                         controller: controller, addresses: Array(repeating: "public", count: n))
        }
        let shared = Set(addressNotes).count <= 1
        var beacons = r.beacons.map { BeaconOnAir(every: $0.every, details: $0.details, txPower: $0.txPower) }
        if !shared {
            for k in beacons.indices where k < addressNotes.count {
                beacons[k].details.append(addressNotes[k])
                beacons[k].address = k < ownAddresses.count ? ownAddresses[k].description : nil
            }
        }
        return OnAir(interval: r.interval, details: r.details + (shared ? addressNotes.prefix(1) : []), txPower: r.txPower, beacons: beacons,
                     controller: controller, addresses: ownAddresses.map { $0.description })
    }

    func stop(_ done: @escaping () -> Void) {
        guard let c = connection, advertiser != nil, !c.isClosed else { return done() }
        // A refresh's enable must not come after the stop's disable.
        if refreshing { return afterRefresh.append { [weak self] in self.map { $0.stop(done) } ?? done() } }
        let steps = advertiser!.stopSteps()
        syncSliceTimer()
        syncRefreshTimer()
        c.run(steps) { [weak self] result in
            guard let self else { return done() }
            switch result {
            case .success:
                self.advertiser?.stopped()
                self.recordSets()
                self.log.info("Advertising disabled on \(self.device)")
            case .failure(let f): self.log.warning("Failed to disable advertising on \(self.device): \(f.error)", self.fields(f.error))
            }
            done()
        }
    }

    func close() {
        closed = true
        sliceTimer?.cancel()
        addressRetryTimer?.cancel()
        refreshTimer?.cancel()
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
        guard let why = event.connectableAdvertisingInterruption, advertiser?.connectableInterrupted() == true else { return }
        onEvent(.reapply(reason: "Connectable advertising on \(device) stopped: \(why)", delay: .zero, fields: ["HCI_DEVICE=\(device)"]))
    }

    /// Another program talked to our kernel device. If what it sent can take our advertising off the air, ask
    /// for it to be put back shortly (after that program's own sequence has had time to finish).
    private func foreignCommand(_ opcode: Opcode, _ p: [UInt8]) {
        guard advertiser?.foreignCommand(opcode, p) == true else { return }
        syncSliceTimer()
        onEvent(.reapply(reason: "Another program sent \(opcode) to \(device)",
                         delay: opcode == .reset ? .milliseconds(500) : .milliseconds(100),
                         fields: ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(opcode.rawValue))"]))
    }

    private func failure(_ what: String, _ f: StepFailure) -> BackendFailure {
        BackendFailure(message: "Failed to \(what): \(f.error)", fields: fields(f.error), unanswered: f.error.unanswered)
    }

    private func fields(_ e: CommandError) -> [String] {
        var f = ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(e.opcode.rawValue))"]
        if let s = e.status { f.append("HCI_STATUS=\(hex8(s.rawValue))") }
        return f
    }
}
