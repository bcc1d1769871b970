// Every decision of advertising through raw HCI on one open controller, as a value: the command family and the switch
// between them, the extended sets (which beacon on which set, what each carries, which a killed run left), the
// interval floor a refusal taught, the legacy time slicer, what is on the air, and what another program's command
// means for it. Requests in, steps out; replies in, outcomes out. Pure: HCIBackend carries the steps to the
// controller and arms the slot timer this value asks for.
import BluetoothHCI

public struct HCIAdvertiser: Sendable {
    public let device: String
    public let info: ControllerInfo
    /// Extended: how many advertising sets the controller has.
    public let capacity: Int
    /// beacond owns the controller (H4): it was reset, nothing else uses it.
    public let ownsController: Bool
    public internal(set) var family: CommandFamily

    /// The beacons last confirmed on air, as asked (before any interval adjustment).
    public internal(set) var applied: [AdvertisingRequest]?
    /// Those of `applied` paused while the controller refuses beacond's random address (PublicFallback).
    public private(set) var paused: Set<Int> = []
    /// Extended: what each set carries now (as sent), nil when unknown; the set of each beacon of `applied`.
    private var sets: [UInt8: AdvertisingRequest]?
    private var setHandles: [UInt8] = []
    /// Extended: every set that may carry something of beacond's (this run's, or a killed run's on a kernel hciN).
    public private(set) var usedHandles: Set<UInt8>
    /// Legacy: the one advertiser's parameters and the data and scan response it carries now.
    var legacyBase: AdvertisingRequest?
    /// Legacy with several beacons: the beacons taking turns, whose turn it is.
    var slicer = LegacySlicer()
    /// The one sequence of beacond's commands out at a time, whoever asks: an apply's, or a slot's or a refresh's (the
    /// steps a timer sends). A disable or a new advertiser sent between a slot's or a refresh's commands would be
    /// overtaken by their enable.
    var inFlight: InFlight?
    enum InFlight: Sendable {
        /// An apply's steps, and whether it may still switch family.
        case apply(Pending)
        /// A slot's or a refresh's.
        case timed
    }
    /// What came due while a sequence was out, done once it is back: the slot (`owedSlice`), the refresh that rides
    /// on the next slot while beacons take turns from one address, the retry of the own addresses (`owedRetry`).
    var owed: Set<Owed> = []
    enum Owed: Sendable, Hashable { case slice, refresh, retry }
    /// An apply or a stop asked for while a slot's or a refresh's commands were out: it goes out when they are back
    /// (`resume`).
    private var waiting: Waiting?
    private enum Waiting: Sendable {
        case apply([AdvertisingRequest], dataOnlyAllowed: Bool)
        case stop
    }
    /// Nothing of beacond's is out, and nothing waits for it.
    var idle: Bool { inFlight == nil && waiting == nil }
    var timedStepsInFlight: Bool { if case .timed? = inFlight { true } else { false } }
    /// The apply whose steps are out.
    var pending: Pending? { if case .apply(let p)? = inFlight { p } else { nil } }
    /// The intervals used, per beacon of `applied`; the TX power each set (legacy: 0) reported.
    private var effectiveIntervals: [AdvertisingInterval] = []
    private var txPowers: [UInt8: Int8] = [:]
    /// The controller refused a short interval although its version allows it: the 100 ms floor from now on.
    var intervalFloorForced = false
    /// Legacy, beacons from different addresses: each slot's length and the interval within it (SliceTiming), and
    /// what a slot's restart costs on this controller (measured on the first slots).
    var timing: SliceTiming?
    var switchCost: Duration?
    /// Between the Reset of a controller beacond owns and the first start sequence (its disable is left out).
    private var freshlyReset: Bool
    /// Legacy: whether the controller takes beacond's random addresses (OwnAddresses): refused while another program
    /// scans on it, the public address or a pause meanwhile (PublicFallback), and tried again every
    /// `addressRetryPeriod` (`retryOwnAddresses`).
    public internal(set) var own = OwnAddresses()
    /// The controller refuses beacond's random addresses now.
    public var publicWhileScanning: Bool { own.taken == .refused }
    /// Another program's scan on this controller, as its commands and the controller's refusals show it.
    public var scanner: OtherScanner { own.scanner }
    /// How often beacond tries its own addresses again while the controller refuses them: a disable, the address and
    /// a restart (public again if still refused), a few milliseconds off the air. Not while another program's scan
    /// shows signs of running (`OtherScanner.tick`).
    public static let addressRetryPeriod = Duration.seconds(10)

    enum Pending: Sendable {
        case extended(SetPlan, wanted: [AdvertisingRequest], adjusted: [AdvertisingRequest], full: Bool, allowSwitch: Bool)
        case legacyData(wanted: [AdvertisingRequest], slot: LegacySlicer.Slot, paused: Set<Int>)
        /// `adjusted`: the beacons on the air (the others paused).
        case legacyStart(wanted: [AdvertisingRequest], adjusted: [AdvertisingRequest], steps: [Step], allowSwitch: Bool, paused: Set<Int>, turn: Int)
        /// Every beacon paused (PublicFallback): the advertiser's disable.
        case legacyPaused(wanted: [AdvertisingRequest], adjusted: [AdvertisingRequest])
    }

    /// `capacity`: the sets an extended controller has; nil when it refused to say (LE Read Number of Supported
    /// Advertising Sets refused: the legacy family is in use, or the commands are missing), which puts the advertiser
    /// on legacy commands from the start. `leftOver`: the sets a killed run may have left on a kernel hciN (the state
    /// directory's record).
    public init(device: String, info: ControllerInfo, capacity: Int?, ownsController: Bool, leftOver: Set<UInt8> = []) {
        self.device = device
        self.info = info
        self.capacity = max(1, capacity ?? 1)
        self.ownsController = ownsController
        family = capacity == nil ? .legacy : info.preferredFamily
        freshlyReset = ownsController
        usedHandles = ownsController ? [] : leftOver
    }

    // MARK: apply

    /// What an apply leads to.
    public enum Outcome: Sendable {
        /// Send these steps and report the result with `finished(_:)`.
        case send([Step])
        /// On the air as asked.
        case done
        /// Not possible, with the sentence to say and the command error if there was one.
        case failed(String, CommandError?)
        /// A slot's or a refresh's commands are out: the apply waits for them (`resume` gives its outcome then).
        case deferred
    }

    /// What waited for a slot's or a refresh's commands, now that they are back.
    public enum Resumed: Sendable {
        /// The apply's outcome (report its steps with `finished(_:)`).
        case apply(Outcome)
        /// The stop's steps (report with `stopped()` once accepted).
        case stop([Step])
    }

    /// After a slot's or a refresh's commands came back (either way): the apply or the stop that waited for them, if
    /// one did.
    public mutating func resume() -> Resumed? {
        guard !timedStepsInFlight, let w = waiting else { return nil }
        waiting = nil
        switch w {
        case .apply(let wanted, let dataOnlyAllowed): return .apply(apply(wanted, dataOnlyAllowed: dataOnlyAllowed))
        case .stop: return .stop(stopSteps()!)
        }
    }

    /// Something worth saying while applying: a warning (the caller says each once) or a notice.
    public enum Note: Sendable, Hashable {
        case warning(String)
        case info(String)
        case notice(String, CommandError)
        case refused(String, CommandError, level: Refusal)
        public enum Refusal: Sendable, Hashable { case retryingWithFloor, checkConfig }
    }

    public internal(set) var notes: [Note] = []

    /// Takes the notes gathered since the last call.
    public mutating func takeNotes() -> [Note] {
        defer { notes = [] }
        return notes
    }

    /// Puts `wanted` (each with its own address) on the air. With `dataOnlyAllowed`, beacons already on the air as
    /// wanted are not touched and a change of data alone is made in place.
    public mutating func apply(_ wanted: [AdvertisingRequest], dataOnlyAllowed: Bool) -> Outcome {
        if timedStepsInFlight {
            waiting = .apply(wanted, dataOnlyAllowed: dataOnlyAllowed)
            return .deferred
        }
        return apply(wanted, dataOnlyAllowed: dataOnlyAllowed, allowSwitch: true)
    }

    /// The interval this controller can take for `r` (pre-5.0 floor, or the floor a refusal taught).
    private func adjusted(_ r: AdvertisingRequest) -> (AdvertisingRequest, raised: Bool) {
        var e = r
        var (interval, raised) = AdvertisingPlan.effectiveInterval(r, on: info)
        if intervalFloorForced && r.type != .connectableUndirected && interval < .pre50NonConnectableFloor {
            (interval, raised) = (.pre50NonConnectableFloor, false)
        }
        e.interval = interval
        return (e, raised)
    }

    mutating func apply(_ wanted: [AdvertisingRequest], dataOnlyAllowed: Bool, allowSwitch: Bool) -> Outcome {
        guard !wanted.isEmpty else { return .failed("The controller on \(device) was asked to advertise nothing", nil) }
        var adjustedRequests: [AdvertisingRequest] = []
        for r in wanted {
            let (e, raised) = adjusted(r)
            if raised && !adjustedRequests.contains(where: { $0.interval == e.interval }) {
                notes.append(.warning("The controller on \(device) is Bluetooth \(info.version.coreVersionName); before 5.0 non-connectable advertising cannot go below 100 ms: raising the interval from \(r.interval) to \(e.interval)"))
            }
            adjustedRequests.append(e)
        }
        if family == .legacy, let tx = wanted[0].txPower {
            notes.append(.warning("tx_power = \(tx) is ignored: the controller on \(device) uses legacy advertising commands, which cannot set the TX power"))
        }
        switch family {
        case .extended:
            guard let plan = SetPlan.make(adjustedRequests, current: dataOnlyAllowed ? sets : nil, capacity: capacity,
                                          stale: usedHandles, afterReset: freshlyReset) else {
                return .failed("The config has \(wanted.count) beacons, but the controller on \(device) has \(capacity) advertising set\(capacity == 1 ? "" : "s") (LE Read Number of Supported Advertising Sets); remove beacons or use a controller with more sets", nil)
            }
            let full = !dataOnlyAllowed || sets == nil
            freshlyReset = false
            if plan.steps.isEmpty, applied == wanted, !effectiveIntervals.isEmpty { return .done }
            if full { sets = nil }
            // Before the first command: a run killed halfway still names every set it may have enabled.
            usedHandles.formUnion(plan.handles)
            inFlight = .apply(.extended(plan, wanted: wanted, adjusted: adjustedRequests, full: full, allowSwitch: allowSwitch))
            return .send(plan.steps)
        case .legacy:
            // While the controller refuses beacond's random address: the public one, or a pause for a beacon that
            // never takes it (PublicFallback).
            let fallback = PublicFallback(adjustedRequests, refused: publicWhileScanning)
            guard !fallback.live.isEmpty else {
                // Every beacon paused: the advertiser off until the controller takes the addresses again.
                freshlyReset = false
                slicer.stop()
                legacyBase = nil
                inFlight = .apply(.legacyPaused(wanted: wanted, adjusted: adjustedRequests))
                return .send([Step(.leSetAdvertisingEnable(false), tolerating: [.commandDisallowed])])
            }
            adjustedRequests = fallback.live
            // Beacons from different addresses restart the advertiser every slot: a faster interval within the slot,
            // and slots that hold two events after the restart (SliceTiming).
            timing = nil
            if adjustedRequests.count > 1, LegacySlicing(adjustedRequests).restartsPerSlot {
                let t = sliceTiming(adjustedRequests)
                for k in adjustedRequests.indices { adjustedRequests[k].interval = t.interval }
                timing = t
            }
            let s = LegacySlicing(adjustedRequests)
            let base = s.base
            if dataOnlyAllowed, let legacyBase, !legacyBase.needsRestart(for: base) {
                // The advertiser's parameters stay: only the data of the beacon in the current slot may change.
                let (steps, slot) = slicer.update(to: s)
                self.legacyBase = base
                effectiveIntervals = wanted.map { _ in base.interval }
                if steps.isEmpty {
                    (applied, paused) = (wanted, fallback.paused)
                    return .done
                }
                inFlight = .apply(.legacyData(wanted: wanted, slot: slot, paused: fallback.paused))
                return .send(steps)
            }
            // The beacon whose turn it is goes on first, and turns that ran keep their cadence (`slotDuration`).
            let turn = slicer.turn(in: s, order: wanted.map(\.data))
            let steps = AdvertisingPlan.start(s.base(at: turn), family: .legacy, handle: 0, afterReset: freshlyReset)
            freshlyReset = false
            legacyBase = nil
            inFlight = .apply(.legacyStart(wanted: wanted, adjusted: adjustedRequests, steps: steps, allowSwitch: allowSwitch, paused: fallback.paused, turn: turn))
            return .send(steps)
        }
    }

    /// The result of the steps `apply` asked for.
    public mutating func finished(_ result: Result<[[UInt8]], StepFailure>) -> Outcome {
        guard let p = pending else { return .failed("The controller on \(device) answered an apply beacond did not make", nil) }
        inFlight = nil
        switch (p, result) {
        case (.extended(let plan, let wanted, let adjusted, _, _), .success(let replies)):
            var now: [UInt8: AdvertisingRequest] = [:]
            for (r, h) in zip(adjusted, plan.handles) { now[h] = r }
            sets = now
            usedHandles.subtract(plan.removed)
            setHandles = plan.handles
            for (step, reply) in zip(plan.steps, replies) {
                if case .leSetExtendedAdvertisingParameters(let params) = step.command,
                   let tx = AdvertisingPlan.reportedTxPower(for: step.command, returnParameters: reply) {
                    txPowers[params.handle] = tx
                }
            }
            for h in plan.removed { txPowers[h] = nil }
            effectiveIntervals = adjusted.map(\.interval)
            applied = wanted
            return .done
        case (.legacyData(let wanted, let slot, let p), .success):
            slicer.carrying(slot)
            (applied, paused) = (wanted, p)
            return switchToPublicIfDue() ?? .done
        case (.legacyPaused(let wanted, let adjusted), .success):
            txPowers[0] = nil
            effectiveIntervals = adjusted.map(\.interval)
            (applied, paused) = (wanted, Set(wanted.indices))
            return .done
        case (.legacyStart(let wanted, _, _, _, _, _), .success) where own.switchDue:
            // Another program's scan started while these steps were out: once more, from the public address.
            own.switchDue = false
            forget()
            return apply(wanted, dataOnlyAllowed: false, allowSwitch: false)
        case (.legacyStart(let wanted, let adjusted, let steps, _, let p, let turn), .success(let replies)):
            if own.taken == .retrying {
                own.taken = .yes
                notes.append(.info("The controller on \(device) takes beacond's random addresses again (no other program scans on it now): each beacon from its own address again"))
            }
            let s = LegacySlicing(adjusted)
            legacyBase = s.base
            slicer.started(s, at: turn)
            txPowers[0] = zip(steps, replies).compactMap { AdvertisingPlan.reportedTxPower(for: $0.command, returnParameters: $1) }.last
            effectiveIntervals = wanted.map { _ in s.base.interval }
            (applied, paused) = (wanted, p)
            return .done
        case (_, .failure(let f)):
            forget()
            let wanted: [AdvertisingRequest], adjusted: [AdvertisingRequest], full: Bool, allowSwitch: Bool
            switch p {
            case .extended(_, let w, let a, let fl, let sw): (wanted, adjusted, full, allowSwitch) = (w, a, fl, sw)
            case .legacyStart(let w, let a, _, let sw, _, _): (wanted, adjusted, full, allowSwitch) = (w, a, true, sw)
            case .legacyData(let w, _, _): (wanted, adjusted, full, allowSwitch) = (w, w, false, false)
            case .legacyPaused(let w, let a): (wanted, adjusted, full, allowSwitch) = (w, a, true, false)
            }
            if addressRefused(f, wanted) || ownAddressStillRefused(f) { return apply(wanted, dataOnlyAllowed: false, allowSwitch: false) }
            if case .withheld = f.error.reason {
                // Its enable was withheld (another program's address): from the public address, at once.
                own.switchDue = false
                return apply(wanted, dataOnlyAllowed: false, allowSwitch: false)
            }
            // Nothing of beacond's on the air from here on, unless an apply below puts it back: no slot is owed.
            owed.remove(.slice)
            if !full { return .failed("Failed to update the advertising data on \(device): \(f.error)", f.error) }
            if allowSwitch, let why = family.switchReason(after: f, leadingSteps: AdvertisingPlan.familyProbeSteps) {
                notes.append(.notice("\(f.error.opcode) was refused with \(f.error.status!) on \(device): \(why); switching to \(family.other) commands", f.error))
                family = family.other
                slicer.stop()
                return apply(wanted, dataOnlyAllowed: false, allowSwitch: false)
            }
            if let s = f.error.status, s == .invalidHCICommandParameters || s == .unsupportedFeatureOrParameterValue {
                let isParameters: Bool
                switch f.step.command {
                case .leSetAdvertisingParameters, .leSetExtendedAdvertisingParameters: isParameters = true
                default: isParameters = false
                }
                let refused = settingsRefused(by: f.step.command, adjusted)
                if isParameters && !intervalFloorForced && adjusted.contains(where: { $0.type != .connectableUndirected && $0.interval < .pre50NonConnectableFloor }) {
                    // A safe adjustment exists: many controllers still hold non-connectable advertising to the
                    // pre-5.0 floor of 100 ms. Use it and try again at once.
                    notes.append(.refused("The controller on \(device) refused \(refused) (\(f.error)); raising the interval to \(AdvertisingInterval.pre50NonConnectableFloor), the floor older controllers enforce", f.error, level: .retryingWithFloor))
                    intervalFloorForced = true
                    return apply(wanted, dataOnlyAllowed: false, allowSwitch: false)
                }
                notes.append(.refused("The controller on \(device) refused \(refused) (\(f.error)); check [advertising] in the config", f.error, level: .checkConfig))
            }
            return .failed("Failed to enable advertising on \(device): \(f.error)", f.error)
        }
    }

    /// What the controller holds of beacond's is unknown from now on (a failure, another program's command): the
    /// next apply sends everything in full.
    mutating func forget() {
        applied = nil
        paused = []
        sets = nil
        legacyBase = nil
        slicer.forget()
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

    // MARK: a controller that stops by itself

    /// A controller can stop advertising and say nothing: a Pi's radio gone from every scan until a reboot
    /// (noble/bleno#387), a BlueZ peripheral's advertising lost after a while (bluez/bluez#1015). No event reports it
    /// and no command reads the advertising state back, so every `refreshPeriod` the advertiser is turned off and on
    /// again: two commands, a few milliseconds off the air, whatever the controller thinks its state is (one that
    /// still thinks itself enabled may refuse a lone enable: Core 4.x, Zephyr's BT_CTLR_ADV_ENABLE_STRICT).
    public static let refreshPeriod = Duration.seconds(2)

    /// The refresh timer fired: the steps that turn beacond's advertising off and on again, or none (nothing on the
    /// air, an apply or another refresh out, or beacons taking turns). Report them with `refreshFinished`. While
    /// beacons take turns the refresh rides on the next slot, which `nextSlice` makes a restart (its own timer would
    /// otherwise land on a slot's: 2 s is a whole number of slots, and a slot due while the refresh is out is
    /// skipped, a beacon's turn lost); slots that restart the advertiser anyway, each beacon from its own address,
    /// need none.
    public mutating func refreshSteps() -> [Step] {
        guard applied != nil else { return [] }
        if let slicing = slicer.slicing {
            if slicing.restartsPerSlot { owed.remove(.refresh) } else { owed.insert(.refresh) }
            return []
        }
        guard idle else { return [] }
        let steps: [Step]
        switch family {
        case .legacy:
            guard legacyBase != nil else { return [] }
            steps = Self.restart([])
        case .extended:
            guard !setHandles.isEmpty else { return [] }
            let sets = setHandles.map { AdvertisingSetEnable(handle: $0) }
            steps = [Step(.leSetExtendedAdvertisingEnable(enable: false, sets: sets), tolerating: [.commandDisallowed]),
                     Step(.leSetExtendedAdvertisingEnable(enable: true, sets: sets))]
        }
        inFlight = .timed
        return steps
    }

    /// The refresh's steps came back (either way: a refused one is tried again at the next refresh).
    public mutating func refreshFinished() { if timedStepsInFlight { inFlight = nil } }

    /// `steps` with the legacy advertiser turned off before them and on after (the disable tolerated when it was off).
    static func restart(_ steps: [Step]) -> [Step] {
        [Step(.leSetAdvertisingEnable(false), tolerating: [.commandDisallowed])] + steps + [Step(.leSetAdvertisingEnable(true))]
    }

    /// Whether anything of beacond's is on the air (the refresh timer runs exactly then).
    public var isAdvertising: Bool { applied != nil }

    // MARK: stop

    /// The steps that take every beacon of beacond's off this controller; nil while a slot's or a refresh's commands
    /// are out (the stop waits for them: `resume`).
    public mutating func stopSteps() -> [Step]? {
        if timedStepsInFlight {
            waiting = .stop
            return nil
        }
        forget()
        slicer.stop()
        inFlight = nil
        switch family {
        case .legacy: return AdvertisingPlan.stop(family: .legacy, handle: 0)
        // Nothing but beacond's on this controller: all sets at once, within the stop deadline however many.
        case .extended where ownsController: return AdvertisingPlan.stopAll()
        case .extended:
            let handles = usedHandles.isEmpty ? [0] : usedHandles.sorted()
            return handles.flatMap { AdvertisingPlan.stop(family: .extended, handle: $0) }
        }
    }

    /// The stop's steps were accepted: no set carries anything of beacond's any more.
    public mutating func stopped() {
        if family == .extended { usedHandles = [] }
    }

    /// Another program sent `opcode` to this kernel device. True when it can take beacond's advertising off the air:
    /// then the state is forgotten and the caller applies again shortly.
    public mutating func foreignCommand(_ opcode: Opcode, _ p: [UInt8]) -> Bool {
        guard applied != nil else { return false }
        let touchesUs: Bool
        switch opcode {
        case .reset, .leClearAdvertisingSets: touchesUs = true
        case .leSetAdvertisingEnable: touchesUs = family == .legacy && p.first == 0
        case .leSetAdvertisingParameters, .leSetAdvertisingData: touchesUs = family == .legacy
        case .leSetExtendedAdvertisingEnable:
            // Disable of all sets (count 0) or of a list that includes ours.
            let n = p.count >= 2 ? Int(p[1]) : 0
            touchesUs = family == .extended && p.first == 0
                && (n == 0 || (0..<n).contains { 2 + $0 * 4 < p.count && usedHandles.contains(p[2 + $0 * 4]) })
        case .leSetExtendedAdvertisingParameters, .leSetExtendedAdvertisingData, .leRemoveAdvertisingSet, .leSetAdvertisingSetRandomAddress:
            touchesUs = family == .extended && p.first.map(usedHandles.contains) == true
        default: touchesUs = false
        }
        if touchesUs { forget() }
        return touchesUs
    }

    /// A central connected to connectable advertising, which the controller then stops: true when beacond's
    /// advertising was connectable (the caller applies again).
    public mutating func connectableInterrupted() -> Bool {
        guard let applied, applied.first?.type == .connectableUndirected else { return false }
        self.applied = nil
        return true
    }

    // MARK: what is on the air

    /// For STATUS: the interval, the facts (family, TX power, sets or slots), and per beacon when there are several.
    public struct Report: Sendable, Hashable {
        public var interval: AdvertisingInterval
        public var details: [String]
        /// The TX power the controller reported (a single beacon, or a time-sliced advertiser's).
        public var txPower: Int8?
        /// Per beacon when there are several: how often it is on the air, and its facts (set, TX power, slot).
        public var beacons: [Beacon]
        public struct Beacon: Sendable, Hashable {
            public var every: Duration
            public var details: [String]
            public var txPower: Int8?
            /// Off the air while the controller refuses beacond's random address (PublicFallback).
            public var paused = false
            /// Advertising events it gets each time it is on the air (a slot that holds two: SliceTiming).
            public var events = 1
        }
    }

    public var report: Report? {
        guard let applied, !effectiveIntervals.isEmpty else { return nil }
        let n = applied.count
        var details = [family.description]
        var beacons: [Report.Beacon] = []
        // 0x7F: the controller has no TX power to tell.
        func tx(_ h: UInt8) -> Int8? { txPowers[h].flatMap { $0 == 0x7F ? nil : $0 } }
        var single: Int8?
        switch family {
        case .extended:
            if n == 1, let t = tx(setHandles.first ?? 0) {
                details.append("TX \(t) dBm")
                single = t
            }
            if n > 1 { details.append("\(n) sets") }
            for (k, h) in setHandles.enumerated() where n > 1 {
                var d = ["set \(h)"]
                if let t = tx(h) { d.append("TX \(t) dBm") }
                beacons.append(Report.Beacon(every: .microseconds(Int64(effectiveIntervals[k].units) * 625), details: d, txPower: tx(h)))
            }
        case .legacy:
            single = tx(0)
            if let t = single { details.append("TX \(t) dBm") }
            let live = n - paused.count
            var slot = 0
            if live > 1, let base = legacyBase, let slicing = slicer.slicing {
                let slotLength = timing?.slot ?? .microseconds(Int64(base.interval.microseconds))
                details.append("time-sliced, \(formatMicroseconds(slotLength)) slots")
                if slicing.restartsPerSlot { details.append("each slot restarted from its beacon's address, advertising every \(base.interval) within it") }
                if timing?.lengthened == true { details.append("slots lengthened to hold two events") }
                let every = slotLength * slicing.beacons.count
                let eventsPerSlot = timing?.events(switchCost: switchCost) ?? 1
                beacons = (0..<n).map { k in
                    if paused.contains(k) { return Report.Beacon(every: .zero, details: [], paused: true) }
                    slot += 1
                    return Report.Beacon(every: every, details: ["slot \(slot) of \(live)"], txPower: single, events: eventsPerSlot)
                }
            } else if !paused.isEmpty {
                let every = Duration.microseconds(Int64(effectiveIntervals[0].units) * 625)
                beacons = (0..<n).map { paused.contains($0) ? Report.Beacon(every: .zero, details: [], paused: true) : Report.Beacon(every: every, details: [], txPower: single) }
            }
        }
        return Report(interval: effectiveIntervals[0], details: details, txPower: single, beacons: beacons)
    }
}

/// `1.4 ms`, `230 µs`: a short duration to a tenth of a millisecond.
func formatMicroseconds(_ d: Duration) -> String {
    let us = d.components.seconds * 1_000_000 + d.components.attoseconds / 1_000_000_000_000
    if us < 1000 { return "\(us) µs" }
    return "\(us / 1000).\((us % 1000) / 100) ms"
}
