// Runs an HCIAdvertiser on an open controller connection: carries the steps it asks for, and the jobs that keep the
// beacons on the air between applies (time slices, the off-and-on refresh, beacond's own addresses again after the
// controller refused them), with the addresses from the state directory. HCIBackend opens the connection and hears
// its events; every decision here is the advertiser's or HCIDecisions'.
import BeaconCore
import BluetoothHCI
import Connections
import DaemonCore
import HCIHost
import SystemCalls
import SystemdSupport

final class HCIAdvertiserRunner {
    var onEvent: (BackendEvent) -> Void = { _ in }
    /// Every decision about what goes to the controller; nil until the probe is done.
    var advertiser: HCIAdvertiser?

    private let connection: ControllerConnection
    private let device: DeviceSpec
    private var name: String { device.description }
    private let log: Logger
    private let owned: OwnershipStore
    private lazy var slices = RepeatingJob(loop) { [weak self] in self?.nextSlice() }
    private lazy var addressRetry = RepeatingJob(loop) { [weak self] in self?.retryAddresses() }
    private lazy var refreshes = RepeatingJob(loop) { [weak self] in self?.refresh() }
    private let loop: EventLoop
    /// The apply's or the stop's completion while the advertiser holds it back for a slot's or a refresh's commands
    /// (HCIAdvertiser.resume gives its steps when they are back).
    private var waitingApply: ((Result<Void, BackendFailure>) -> Void)?
    private var waitingStop: (() -> Void)?
    /// Each beacon's address as STATUS names it, and the address itself.
    private var addressNotes: [String] = []
    private var ownAddresses: [OwnAddress] = []
    /// The daemon's addresses (AddressKeeper): they outlive this connection.
    private let addresses: AddressKeeper
    /// Settings warnings and misbehaviour kinds already said on this connection (said once, then at debug level).
    private var warned: Set<String> = []
    private var oddities: Set<String> = []
    private var closed = false

    init(connection: ControllerConnection, device: DeviceSpec, loop: EventLoop, log: Logger, owned: OwnershipStore, addresses: AddressKeeper) {
        (self.connection, self.device, self.loop, self.log, self.owned, self.addresses) = (connection, device, loop, log, owned, addresses)
    }

    func apply(_ schedule: AdvertisingSchedule, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        let c = connection
        guard advertiser != nil, !schedule.beacons.isEmpty else {
            return done(.failure(BackendFailure(message: "The controller on \(device) is not open")))
        }
        let choice: AddressChoice.Choice
        switch addresses.source.choose(schedule, device: device) {
        case .success(let got): choice = got
        case .failure(let f): return done(.failure(f))
        }
        if let w = choice.warning { log.warning(w, ["HCI_DEVICE=\(device)"]) }
        let wanted = zip(schedule.beacons, choice.addresses).map { r, a in var e = r; e.ownAddress = a; return e }
        let notes = zip(schedule.addresses, choice.addresses).map { w, a in AddressPlan.describe(a, w.setting) }
        carry(advertiser!.apply(wanted, dataOnlyAllowed: dataOnlyAllowed), on: c) { [weak self] result in
            guard let self else { return }
            if case .success = result { (self.addressNotes, self.ownAddresses) = (notes, choice.addresses) }
            done(result.map { self.onAir! })
        }
    }

    /// Runs what the advertiser asked for until it is done or failed (a family switch or a raised interval floor
    /// asks for a second round of steps).
    private func carry(_ outcome: HCIAdvertiser.Outcome, on c: ControllerConnection, _ done: @escaping (Result<Void, BackendFailure>) -> Void) {
        say()
        syncTimers()
        // Before the steps go out: a run killed halfway still names every set they may enable.
        if let a = advertiser, !a.ownsController { owned[name, .hciSets] = a.usedHandles }
        switch outcome {
        case .done:
            done(.success(()))
            owedWork()
        case .deferred:
            // The lifecycle asks for one apply at a time; a second one replaces the first, which is answered.
            waitingApply?(.failure(BackendFailure(message: "A newer apply on \(device) replaced this one before it went out")))
            waitingApply = done
        case .failed(let message, let error):
            done(.failure(BackendFailure(message: message, fields: error.map { HCIDecisions.fields($0, device: name) } ?? ["HCI_DEVICE=\(device)"],
                                         unanswered: error?.unanswered ?? false)))
        case .send(let steps):
            c.run(steps, withholding: withholding) { [weak self] result in
                guard let self, !self.closed, self.advertiser != nil else { return }
                self.carry(self.advertiser!.finished(result), on: c, done)
            }
        }
    }

    /// The advertiser's say on each step before it goes out (HCIAdvertiser.withholds).
    private var withholding: (Step) -> CommandError? { { [weak self] step in self?.advertiser?.withholds(step) } }

    private func say() {
        for n in advertiser?.takeNotes() ?? [] {
            let line = HCIDecisions.logLine(n, device: name)
            if !line.once || warned.insert(line.message).inserted { log.log(line.level, line.message, line.fields) }
        }
    }

    /// The advertiser changes what is on the air by itself (the public address while the controller refuses
    /// beacond's own, and back): the lifecycle hears of the result, or of the loss.
    private func carryOnItsOwn(_ outcome: HCIAdvertiser.Outcome, on c: ControllerConnection) {
        carry(outcome, on: c) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .success: if let o = self.onAir { self.onEvent(.changed(o)) }
            case .failure(let f): self.onEvent(.lost(f))
            }
        }
    }

    private func syncTimers() {
        slices.sync(active: !closed && advertiser?.slotDuration != nil, after: advertiser?.slotDuration ?? .zero)
        addressRetry.sync(active: !closed && advertiser?.publicWhileScanning == true, after: HCIAdvertiser.addressRetryPeriod)
        refreshes.sync(active: !closed && advertiser?.isAdvertising == true, after: HCIAdvertiser.refreshPeriod)
    }

    private func nextSlice() {
        guard !closed, let d = advertiser?.slotDuration else { return }
        slices.rearm(after: d)
        runSlice(advertiser!.nextSlice())
    }

    /// A slot's steps. The slots keep their cadence (the timer is rearmed when it fires): a slow controller shortens a
    /// beacon's time on the air rather than lengthening every other's time off it (a round stretched by each restart
    /// put a loaded VM run's gaps over 400 ms); a slot due while these are out is owed (`owedWork`).
    private func runSlice(_ steps: [Step]) {
        let c = connection
        guard !steps.isEmpty else { return }
        let started = monotonicMicroseconds()
        c.run(steps, withholding: withholding) { [weak self] result in
            guard let self, !self.closed else { return }
            if case .failure(let f) = result {
                if !f.error.unanswered, let again = self.advertiser?.sliceFailed(f) { return self.carryOnItsOwn(again, on: c) }
                guard self.timedStepsFailed(.slice, f) else { return }
            } else {
                let slot = self.advertiser?.slotDuration
                self.advertiser?.sliceFinished(true, took: .microseconds(Int64(monotonicMicroseconds() &- started)))
                self.say()
                // Slots lengthened for the measured restart cost: what each beacon gets changed (STATUS, status).
                if self.advertiser?.slotDuration != slot, let o = self.onAir { self.onEvent(.changed(o)) }
            }
            self.resumeWaiting()
        }
    }

    /// After a sequence's commands came back: what came due meanwhile, the retry of the own addresses
    /// (HCIAdvertiser.owedRetry) or else the slot (owedSlice).
    private func owedWork() {
        guard !closed, advertiser != nil else { return }
        if let o = advertiser!.owedRetry() { return carryOnItsOwn(o, on: connection) }
        runSlice(advertiser!.owedSlice())
    }

    private func retryAddresses() {
        guard !closed else { return }
        guard let o = advertiser?.retryOwnAddresses() else { return syncTimers() }
        carryOnItsOwn(o, on: connection)
    }

    private func refresh() {
        let c = connection
        guard !closed, let steps = advertiser?.refreshSteps() else { return }
        defer { syncTimers() }
        guard !steps.isEmpty else { return }
        c.run(steps) { [weak self] result in
            guard let self, !self.closed else { return }
            self.advertiser?.refreshFinished()
            if case .failure(let f) = result, !self.timedStepsFailed(.refresh, f) { return }
            self.resumeWaiting()
        }
    }

    /// A slot's or a refresh's commands failed (HCIDecisions says what it means): false when the connection is lost.
    private func timedStepsFailed(_ which: HCIDecisions.TimedSteps, _ f: StepFailure) -> Bool {
        switch HCIDecisions.failed(which, f, device: name) {
        case .lost(let failure): onEvent(.lost(failure)); return false
        case .oddity(let kind, let message): oddity(kind, message); return true
        }
    }

    /// A slot's or a refresh's commands are back: the apply or the stop that waited for them goes out now, else the
    /// public address if a scan started meanwhile.
    private func resumeWaiting() {
        switch advertiser?.resume() {
        case .apply(let outcome)?:
            let done = waitingApply ?? { _ in }
            waitingApply = nil
            carry(outcome, on: connection, done)
        case .stop(let steps)?:
            let done = waitingStop ?? {}
            waitingStop = nil
            runStop(steps, done)
        case nil:
            publicIfDue()
            owedWork()
        }
    }

    /// Another program's command that tells of a scan on a kernel device (HCIAdvertiser.otherProgramCommand): every
    /// beacon to the public address when it needs to go there now.
    func otherProgramCommand(_ opcode: Opcode, _ p: [UInt8]) {
        guard !closed, let o = advertiser?.otherProgramCommand(opcode, p) else { return say() }
        carryOnItsOwn(o, on: connection)
    }

    /// A scan started while commands of beacond's were out: the public address now that they are back.
    private func publicIfDue() {
        guard !closed, let o = advertiser?.switchToPublicIfDue() else { return }
        carryOnItsOwn(o, on: connection)
    }

    var onAir: OnAir? { advertiser.flatMap { OnAir(hci: $0, device: name, notes: addressNotes, own: ownAddresses) } }

    func stop(_ done: @escaping () -> Void) {
        let c = connection
        guard advertiser != nil, !c.isClosed else { return done() }
        // A slot's or a refresh's enable must not come after the stop's disable: the stop waits for them.
        guard let steps = advertiser!.stopSteps() else { waitingStop = done; return syncTimers() }
        runStop(steps, done)
    }

    private func runStop(_ steps: [Step], _ done: @escaping () -> Void) {
        syncTimers()
        connection.run(steps) { [weak self] result in
            guard let self else { return done() }
            switch result {
            case .success:
                self.advertiser?.stopped()
                if let a = self.advertiser, !a.ownsController { self.owned[self.name, .hciSets] = a.usedHandles }
                self.log.info("Advertising disabled on \(self.device)")
            case .failure(let f): self.log.warning("Failed to disable advertising on \(self.device): \(f.error)", HCIDecisions.fields(f.error, device: self.name))
            }
            done()
        }
    }

    func close() {
        closed = true
        [slices, addressRetry, refreshes].forEach { $0.cancel() }
    }

    /// What a misbehaving controller did: each kind a warning once per connection, then at debug level.
    func oddity(_ kind: String, _ message: String) {
        log.log(oddities.insert(kind).inserted ? .warning : .debug, message, ["HCI_DEVICE=\(device)"])
    }

    /// After another program's command or a stopped connectable advertising: the slices follow the advertiser.
    func syncAfterEvent() { syncTimers() }

}
