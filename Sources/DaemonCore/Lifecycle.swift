// The daemon's whole policy as a value: which backend, when to retry, how a reload and a stop go, what systemd
// is told. Events in, actions out, no I/O; `Daemon` in the app only carries the actions out.
import BeaconCore
import BluetoothHCI
import HCIHost
import Mgmt

public struct Lifecycle: Sendable {
    /// Where the daemon is. Every phase but `exited` has a timer armed or an open backend whose fd moves it on
    /// (tests check this after every event).
    public enum Phase: Sendable, Hashable {
        /// Before `start`.
        case idle
        /// The config has no beacon uuid yet (a fresh install): no backend, nothing on the air, nothing armed. A
        /// reload (SIGHUP) or a stop moves it on.
        case unprovisioned
        /// A backend is being opened (probe); the operation deadline is armed.
        case opening
        /// An apply is running; the operation deadline is armed.
        case applying
        /// The controller confirmed the beacon on the air. Nothing is armed: the backend's fd (loss, foreign
        /// commands, connections), signals and device events move it on.
        case advertising
        /// Open, but the beacon was taken off the air by someone else; the timer puts it back.
        case reapplyWait
        /// No backend; the retry timer is armed.
        case waiting
        /// A kernel controller answered nothing again and again (the "command tx timeout" family): no backend, and
        /// the executor takes the device down and up again; the operation deadline is armed.
        case powerCycling
        /// SIGTERM: taking the beacon off the air; the stop deadline is armed.
        case stopping
        /// Final.
        case exited(ExitCode)
    }

    public enum Event: Sendable {
        case start
        /// The answer to `powerCycle`: nil when the device was powered off and on again.
        case powerCycled(BackendFailure?)
        /// With what the open learned about the controller.
        case opened(ControllerTraits = ControllerTraits())
        case openFailed(BackendFailure)
        case applied(OnAir)
        case applyFailed(BackendFailure)
        /// The backend finished taking the beacon off the air (or there was nothing to take off).
        case stopped
        case lost(BackendFailure)
        /// What is on the air changed by itself, the beacons still on it (the controller refused beacond's addresses
        /// while another program scans, or takes them again): STATUS follows.
        case onAirChanged(OnAir)
        /// The beacon is off the air because of another program or a connection; `at` is CLOCK_MONOTONIC in µs.
        case reapply(reason: String, delay: Duration, fields: [String], at: UInt64)
        /// A kernel device event for our hciN.
        case device(KernelDeviceEvent.Kind)
        case hangup
        case terminate(signal: String)
        case timerFired
        case configLoaded(BeaconConfiguration)
        case configRefused(ConfigError)
        /// New values for the Eddystone-TLM beacons (every `telemetryPeriod` while the config has one).
        case telemetry(Telemetry)
        /// `address = "rotating"` or `"resolvable"`: time for a new private address (every `address_rotation_s`).
        case addressPeriod
        /// The wall clock (Unix seconds) and whether it is synchronized: before the start, and at every EID period
        /// boundary (the `eidRotation` timer) while the config has an Eddystone-EID beacon.
        /// The wall clock, and whether the kernel calls it synchronized (nil: it cannot tell, which counts as
        /// synchronized, said once).
        case clock(unixSeconds: UInt64, synchronized: Bool?)
        /// The answer to `supplySelfReport`.
        case selfReportSupplied(SelfReportSupply)
    }

    public enum Action: Sendable, Hashable {
        /// Make a backend of this kind and open it; answer with `opened` or `openFailed`.
        case open(BackendKind, mayBringUp: Bool)
        /// Answer with `applied` or `applyFailed`.
        /// With `dataOnlyAllowed`, what is on the air and did not change stays untouched, and a beacon whose data
        /// alone changed is updated in place.
        case apply(AdvertisingSchedule, dataOnlyAllowed: Bool)
        /// Take everything of beacond's off the controller (with no backend open: what the kernel still keeps for
        /// beacond, such as a mgmt instance). Answer with `stopped`, always.
        case stopAdvertising
        /// Release the backend; none of its callbacks may arrive after this.
        case closeBackend
        /// Take the kernel device down and up again, as `hciconfig hci0 down` and `up` do (the kernel closes it
        /// whatever the controller answers; on a Raspberry Pi's UART radio the driver switches the chip's power
        /// pin). Answer with `powerCycled`.
        case powerCycle
        /// Read and validate the config file; answer with `configLoaded` or `configRefused`.
        case loadConfig
        case armTimer(Duration)
        case cancelTimer
        /// The periodic timers: answer with `telemetry` or `addressPeriod` when it fires (it is then spent; the
        /// lifecycle arms it again while it is still wanted).
        case armPeriodic(PeriodicTimer, Duration)
        case cancelPeriodic(PeriodicTimer)
        /// The encrypted BTHome self-report's address and counters from the state directory (its kept static address,
        /// a block of counters written ahead). Answer with `selfReportSupplied` at once, before any other event.
        case supplySelfReport(SelfReportNeeds)
        /// Send these sd_notify assignments as one datagram.
        case notify([String])
        /// RELOADING=1 with MONOTONIC_USEC (the executor reads the clock).
        case notifyReloading
        case log(LogLevel, String, [String])
        case setLogLevel(LogLevel)
        case exit(ExitCode)
    }

    public enum PeriodicTimer: Sendable, Hashable {
        /// New Eddystone-TLM values, every `telemetryPeriod`, while the config has such a beacon or a BTHome
        /// self-report (whose uptime comes with them).
        case telemetry
        /// A new private address, every `address_rotation_s`, while beacond rotates it.
        case addressRotation
        /// The next EID period boundary: every 2^K seconds of the wall clock (the smallest K of the EID beacons);
        /// the executor arms it to fire at the boundary itself and answers with `clock`.
        case eidRotation
    }

    /// After a power cycle, the longest wait for the kernel's "up" before the device is opened anyway.
    static let afterPowerCycle = Duration.seconds(1)

    /// The bound on an open or an apply. Each command has its own timeout (2 s HCI, 3 s mgmt) and a hung
    /// controller is caught within 4 s; this is the backstop that keeps any backend from holding the daemon.
    public static let operationDeadline = Duration.seconds(45)
    /// How long a stop may take before beacond exits anyway.
    public static let stopDeadline = Duration.seconds(3)
    /// How often Eddystone-TLM frames get new values.
    public static let telemetryPeriod = Duration.seconds(10)
    /// The longest a BTHome self-report stays the same. It rides the telemetry's ticks (every 10 s, each armed when the
    /// last fired, so late ticks add up): a frame 45 s old is renewed at the next tick, normally the fifth, 50 s after
    /// it, which leaves a tick's worth of lateness before a receiver would wait more than a minute.
    public static let selfReportPeriod = Duration.seconds(60)
    static let selfReportRenewal = UInt32((selfReportPeriod - telemetryPeriod * 3 / 2).components.seconds)

    /// The phase with what only it needs: the apply in flight (and whether to apply again after it), and what a
    /// stop leads to (and whether it waits for an answer first). An illegal combination cannot be written.
    private enum State: Sendable {
        case idle, unprovisioned, opening, advertising, reapplyWait, waiting, powerCycling
        case applying(Apply)
        case stopping(Stop)
        case exited(ExitCode)
    }

    private struct Apply: Sendable {
        var request: AdvertisingSchedule
        var dataOnly: Bool
        /// Only new telemetry or the next EIDs: not news for the journal.
        var refresh: Refresh?
        /// A reload or another program changed things meanwhile: apply once more after this one, with what is
        /// wanted then.
        var again = false

        enum Refresh: Sendable { case telemetry, eid, selfReport }
    }

    private struct Stop: Sendable {
        /// An open or an apply is in flight: the disable goes out after its answer, or its enable would overtake it.
        var answerPending: Bool
        /// What follows the stop: nil exits; a controller change opens the new one; a withdrawn beacon waits.
        var then: AfterStop?
    }

    private var state: State = .idle

    public var phase: Phase {
        switch state {
        case .idle: .idle
        case .unprovisioned: .unprovisioned
        case .opening: .opening
        case .applying: .applying
        case .advertising: .advertising
        case .reapplyWait: .reapplyWait
        case .waiting: .waiting
        case .powerCycling: .powerCycling
        case .stopping: .stopping
        case .exited(let c): .exited(c)
        }
    }

    /// A stop from the current phase (an open or an apply in flight answers first).
    private func stop(then: AfterStop?) -> Stop {
        Stop(answerPending: phase == .opening || phase == .applying || phase == .powerCycling, then: then)
    }
    public private(set) var config: BeaconConfiguration
    private let deviceOverride: DeviceSpec?
    private let logLevelOverride: LogLevel?
    public let configPath: String

    /// The backend in use (nil when none is open).
    public private(set) var backend: BackendKind?
    /// Backend `auto` fell back to raw HCI because the management interface refused beacond.
    private var mgmtRefused = false
    /// Refused for lack of CAP_NET_ADMIN (that lasts); otherwise a device registered again gets mgmt again.
    private var mgmtRefusedForPermission = false
    /// Backend `auto` left the management interface because the kernel would not put the beacons on the air as
    /// configured on this controller (why, for the backend note); a device registered again is asked again.
    private var mgmtShortfall: String?
    private var lastBackendNote = ""
    /// What was last confirmed on air.
    private var applied: AdvertisingSchedule?
    private(set) var onAir: OnAir?
    private var backoff: Backoff
    /// Failures in a row on a kernel device in which the controller answered nothing (since the last time the
    /// beacons were on the air): the 2nd, 4th, 8th … power-cycle it.
    private var unanswered = 0
    private var reapplyTimes: [UInt64] = []
    /// False after the kernel reported our hciN taken down: someone meant it, so wait for it to come back up.
    private var mayBringUp = true
    private var readySent = false
    /// Between RELOADING=1 and its READY=1.
    private var reloading = false
    private(set) var lastStatus = ""
    /// What the Eddystone-TLM beacons report now (and the BTHome self-report's uptime).
    private var telemetry = Telemetry()
    /// The BTHome self-report: its frame, packet id, address and counters.
    private var selfReport = SelfReport()
    /// An apply that waits for the self-report's supply from the state directory: its arguments.
    private var deferredApply: (dataOnlyAllowed: Bool, refresh: Apply.Refresh?)?
    /// AES-CCM for an encrypted self-report (libgcrypt's, passed in by the executor).
    private let seal: CCMSeal?
    /// Bumped for every new rotating address.
    private var addressGeneration: UInt64 = 0
    /// The periodic timers armed now.
    private var periodicArmed: Set<PeriodicTimer> = []
    /// The wall clock as last told (Eddystone's time counter), and whether it was synchronized.
    private(set) var clock: (time: UInt32, synchronized: Bool)?
    /// AES-128 for the EID beacons (libgcrypt's, passed in by the executor; nil in configs without them).
    private let cipher: BlockCipher?
    /// It was said that the clock's synchronization cannot be told.
    private var clockUnknownSaid = false
    /// Whether the last clock told said if it is synchronized (false: adjtimex refused, no timesyncd flag; `clock`
    /// then counts it as synchronized, and the state file and STATUS say "unknown").
    public private(set) var clockSynchronizationKnown = true
    /// The unsynchronized clock was said (once until it is synchronized again).
    private var clockWarned = false

    /// Something the controller confirmed is on the air now (an apply under way replaces it).
    public var hasConfirmedAir: Bool { applied != nil && backend != nil }

    /// How a reload (SIGHUP) ended, for `beacond reload` and `beacond status`.
    public enum ReloadResult: String, Sendable, Hashable {
        /// The file was taken and what it asks for settled (on the air, or waiting for the controller).
        case applied
        /// The file has errors: the previous configuration stays.
        case refused
        case inProgress = "in-progress"
    }
    /// Reloads begun since the start (SIGHUPs taken; several before one is handled count once).
    public private(set) var reloadCount = 0
    public private(set) var reloadResult: ReloadResult?
    /// The last file refused, and how many were refused since the start (a new refusal of the same errors counts).
    public private(set) var lastRefusal: ConfigError?
    public private(set) var refusalCount = 0

    public init(config: BeaconConfiguration, configPath: String, device: DeviceSpec? = nil, logLevel: LogLevel? = nil,
                seed: UInt64, cipher: BlockCipher? = nil, seal: CCMSeal? = nil) {
        self.config = config
        self.seal = seal
        self.configPath = configPath
        deviceOverride = device
        logLevelOverride = logLevel
        backoff = Backoff(seed: seed)
        self.cipher = cipher
    }

    public var device: DeviceSpec { deviceOverride ?? config.controller.device }
    /// True while an open, an apply or a stop waits for the backend.
    public var isWaitingForBackend: Bool {
        switch phase {
        case .opening, .applying, .powerCycling: true
        case .stopping: backend != nil
        default: false
        }
    }

    // MARK: events

    public mutating func handle(_ event: Event) -> [Action] {
        if case .exited = phase { return [] }
        var out: [Action] = []
        switch event {
        case .start:
            guard phase == .idle else { return [] }
            guard config.beacon != nil else {
                out.append(.log(.info, "beacond \(beacondVersion) starting", []))
                unprovision(&out)
                break
            }
            out.append(.log(.info, "beacond \(beacondVersion) starting: \(beaconsSummary) on \(device)", beaconFields))
            if let why = config.uuidNeeded(path: configPath) { out.append(.log(.notice, "Not advertising yet: \(why), then reload", ["CONFIG_FILE=\(configPath)"])) }
            open(&out)
        case .powerCycled(let f):
            switch phase {
            case .powerCycling: powerCycled(f, &out)
            case .stopping: stopNow(&out)
            default: break
            }
        case .opened(let traits):
            switch phase {
            case .opening:
                if let why = kernelShortfall(traits) { leaveMgmt(why, &out) } else { apply(&out, dataOnlyAllowed: false) }
            case .stopping: stopNow(&out)
            default: break
            }
        case .openFailed(let f), .applyFailed(let f):
            switch phase {
            case .opening, .applying:
                applied = nil
                failed(f, &out)
            case .stopping: stopNow(&out)
            default: break
            }
        case .applied(let result):
            switch state {
            case .applying(let done): confirmed(done, result, &out)
            case .stopping: stopNow(&out)
            default: break
            }
        case .stopped:
            guard phase == .stopping else { break }
            finish(&out)
        case .lost(let f):
            guard backend != nil else { break }
            applied = nil
            if phase == .stopping { finish(&out); break }
            failed(f, &out)
        case .onAirChanged(let result):
            guard phase == .advertising else { break }
            onAir = result
            setStatus(advertisingStatus, &out)
        case .reapply(let reason, let delay, let fields, let at):
            reapply(reason, delay: delay, fields: fields, at: at, &out)
        case .device(let kind):
            deviceEvent(kind, &out)
        case .hangup:
            if case .stopping(let stop) = state, stop.then == nil {
                // Exiting: the file would never be used.
                out.append(.log(.notice, "Received SIGHUP while stopping; not reloading \(configPath)", ["CONFIG_FILE=\(configPath)"]))
                break
            }
            out.append(.notifyReloading)
            reloading = true
            reloadCount += 1
            reloadResult = .inProgress
            out.append(.log(.notice, "Reloading configuration from \(configPath)", ["CONFIG_FILE=\(configPath)"]))
            out.append(.loadConfig)
        case .configLoaded(let new):
            reload(new, &out)
        case .configRefused(let error):
            for d in error.diagnostics { out.append(.log(.err, d.formatted(path: error.path), configFields(error.path, d))) }
            let n = error.diagnostics.count
            out.append(.log(.warning, "Keeping the previous configuration: \(configPath) has \(n) error\(n == 1 ? "" : "s")", ["CONFIG_FILE=\(configPath)"]))
            // lastStatus stays the plain state: the note lasts in systemd until the state changes, and a second bad
            // reload does not stack notes.
            reloading = false
            reloadResult = .refused
            lastRefusal = error
            refusalCount += 1
            out.append(.notify(["READY=1", "STATUS=\(lastStatus); kept previous configuration: \(error.summary)"]))
        case .terminate(let signal):
            terminate(signal, &out)
        case .timerFired:
            timerFired(&out)
        case .telemetry(let t):
            telemetry = t
            guard phase == .advertising else { break }
            if config.beacons.contains(where: { $0.beacon.isTelemetry }) {
                apply(&out, dataOnlyAllowed: true, refresh: .telemetry)
            } else if let l = selfReport.last, uptime >= l.uptime &+ Self.selfReportRenewal {
                apply(&out, dataOnlyAllowed: true, refresh: .selfReport)
            }
        case .selfReportSupplied(let supply):
            if let (level, line) = selfReport.supplied(supply) {
                out.append(.log(level, line, ["BEACON_FORMAT=bthome"]))
            }
            guard let d = deferredApply else { break }
            deferredApply = nil
            switch phase {
            case .opening, .applying, .advertising, .reapplyWait: apply(&out, dataOnlyAllowed: d.dataOnlyAllowed, refresh: d.refresh)
            default: break
            }
        case .addressPeriod:
            guard rotatesAddress else { break }
            addressGeneration &+= 1
            // Not on the air now: the next apply takes the new address anyway.
            if phase == .advertising { apply(&out, dataOnlyAllowed: true) }
        case .clock(let seconds, let told):
            let before = eidPeriods
            // Unknown (adjtimex refused, no timesyncd) is not called unsynchronized: only what the kernel says is.
            if told == nil, hasEID, !clockUnknownSaid {
                clockUnknownSaid = true
                out.append(.log(.notice, "Cannot tell whether the system clock is synchronized (adjtimex refused, no systemd-timesyncd flag): the Eddystone-EID beacons assume it is", []))
            }
            let synchronized = told ?? true
            clockSynchronizationKnown = told != nil
            clock = (eidTimeCounter(unixSeconds: seconds), synchronized)
            if hasEID && !synchronized && !clockWarned {
                clockWarned = true
                out.append(.log(.warning, "The system clock is not synchronized: the Eddystone-EID beacons' identifiers come from the wall clock, and a resolver will not recognize them until it is (check timedatectl)", []))
            } else if synchronized && clockWarned {
                clockWarned = false
                out.append(.log(.notice, "The system clock is synchronized now", []))
            }
            // A new EID period: those beacons get their new identifier and address, the others are not touched.
            guard phase == .advertising, hasEID, eidPeriods != before else { break }
            apply(&out, dataOnlyAllowed: true, refresh: .eid)
        }
        syncPeriodic(after: event, &out)
        return out
    }

    /// Arms each periodic timer exactly while it is wanted (a tick spends it), cancels one no longer wanted.
    private mutating func syncPeriodic(after event: Event, _ out: inout [Action]) {
        switch event {
        case .telemetry: periodicArmed.remove(.telemetry)
        case .addressPeriod: periodicArmed.remove(.addressRotation)
        case .clock: periodicArmed.remove(.eidRotation)
        default: break
        }
        if case .exited = phase { return }
        for (timer, wanted, period) in [(PeriodicTimer.telemetry, hasTelemetry, Self.telemetryPeriod),
                                        (.addressRotation, rotatesAddress, config.advertising.addressRotation),
                                        (.eidRotation, hasEID, eidPeriod)] {
            if wanted && !periodicArmed.contains(timer) {
                periodicArmed.insert(timer)
                out.append(.armPeriodic(timer, period))
            } else if !wanted && periodicArmed.contains(timer) {
                periodicArmed.remove(timer)
                out.append(.cancelPeriodic(timer))
            }
        }
    }

    // MARK: bring-up and apply

    /// Nil without a beacon (unprovisioned).
    private var request: AdvertisingSchedule? {
        guard !config.beacons.isEmpty else { return nil }
        let time = clock?.time ?? 0
        var addresses = config.addressPlan.wanted
        for (k, b) in config.beacons.enumerated() {
            if let e = b.beacon.eid { addresses[k].period = UInt64(e.period(of: time)) }
        }
        return AdvertisingSchedule(beacons: config.beacons.map {
            AdvertisingRequest(data: onAirBeacon($0.beacon, at: time).advertisingData, type: config.advertising.legacyType,
                               interval: config.interval(of: $0), txPower: config.advertising.txPower, scanResponse: $0.scanResponse)
        }, addresses: addresses, addressGeneration: addressGeneration)
    }

    /// A beacon as it goes on the air now: the telemetry's values, the self-report's frame, an EID beacon's
    /// identifier for `time`.
    private func onAirBeacon(_ b: Beacon, at time: UInt32) -> Beacon {
        var t = b.withTelemetry(telemetry)
        if let data = selfReport.serviceData { t = t.withSelfReport(data) }
        guard let cipher, b.eid != nil else { return t }
        // The executor checked the cipher against FIPS-197 before the start: it does not fail on 16-byte input.
        return (try? t.withEphemeralID(time, cipher: cipher)) ?? t
    }

    /// The config has an Eddystone-EID beacon: the clock matters, and the EID timer runs.
    public var hasEID: Bool { config.beacons.contains { $0.beacon.eid != nil } }

    /// Each EID beacon's period now (empty without a clock or EID beacons).
    private var eidPeriods: [UInt32] {
        guard let time = clock?.time else { return [] }
        return config.beacons.compactMap { $0.beacon.eid?.period(of: time) }
    }

    /// The EID timer's period: 2^K seconds for the smallest K.
    public var eidPeriod: Duration {
        .seconds(1 << Int(config.beacons.compactMap { $0.beacon.eid?.exponent }.min() ?? 10))
    }

    /// `address = "rotating"` or `"resolvable"` where beacond drives the controller (through mgmt the kernel rotates
    /// its own): the address timer runs.
    public var rotatesAddress: Bool { config.addressPlan.rotates && backend != .mgmt }

    /// The config has an Eddystone-TLM beacon or a BTHome self-report: the telemetry timer runs.
    public var hasTelemetry: Bool { config.beacons.contains { $0.beacon.isTelemetry || $0.beacon.format == .bthome } }

    /// beacond's uptime in whole seconds, as of the last telemetry.
    private var uptime: UInt32 { telemetry.uptimeTenths / 10 }

    /// How often each beacon is on the air, when the controller confirmed them; nil when not advertising.
    public var onAirEvery: [Duration]? {
        guard phase == .advertising, let onAir else { return nil }
        if !onAir.beacons.isEmpty { return onAir.beacons.map(\.every) }
        return [.microseconds(Int64(onAir.interval.units) * 625)]
    }

    private mutating func chooseBackend(_ out: inout [Action]) -> BackendKind {
        let kind: BackendKind
        let why: String
        let ownCommandsNeeded = config.addressPlan.ownCommandsNeeded
        switch device {
        case .kernel:
            switch config.controller.backend {
            case .mgmt: (kind, why) = (.mgmt, "backend mgmt")
            case .hci: (kind, why) = (.hci, "backend hci")
            case .auto where mgmtRefused: (kind, why) = (.hci, "backend auto: the management interface cannot serve it")
            case .auto where mgmtShortfall != nil: (kind, why) = (.hci, "backend auto: \(mgmtShortfall!)")
            case .auto where ownCommandsNeeded != nil:
                (kind, why) = (.hci, "backend auto: \(ownCommandsNeeded!)")
            case .auto: (kind, why) = (.mgmt, "backend auto: cooperates with bluetoothd")
            }
        default:
            (kind, why) = (.hci, "H4 device: beacond owns the controller")
        }
        let note = kind == .mgmt ? "Using the kernel's management interface for \(device) (\(why))"
                                 : "Using raw HCI commands on \(device) (\(why))"
        if note != lastBackendNote {
            lastBackendNote = note
            out.append(.log(.info, note, ["HCI_DEVICE=\(device)"]))
        }
        return kind
    }

    /// Why, under backend `auto`, the kernel would not put this config's beacons on the air as configured on a
    /// controller with these traits; nil when it would (or the backend is not mgmt by auto's choice): Mgmt's
    /// KernelAdvertising for a controller without advertising sets.
    private func kernelShortfall(_ traits: ControllerTraits) -> String? {
        guard backend == .mgmt, config.controller.backend == .auto, traits.advertisingSets == false else { return nil }
        let n = config.beacons.count, kernel = KernelAdvertising(advertisingSets: false, connectable: config.advertising.connectable)
        guard !kernel.asConfigured(instances: n) else { return nil }
        let what = n > 1 ? "give each of the \(n) beacons a \(formatDuration(KernelAdvertising.turn)) turn in every \(formatDuration(kernel.cycle(n)))"
                         : "send the beacon every \(kernel.interval?.spoken ?? "") whatever interval_ms asks"
        return "\(device) has no advertising sets (legacy advertising only), where the kernel's management interface would \(what)"
    }

    /// Backend `auto` leaves mgmt for raw HCI beside bluetoothd: said once, then a stop through mgmt (what an earlier
    /// run or this one added there comes off, or the kernel would keep advertising it between beacond's own
    /// commands), then raw HCI.
    private mutating func leaveMgmt(_ why: String, _ out: inout [Action]) {
        mgmtShortfall = why
        out.append(.log(.notice, "\(why); backend auto uses raw HCI commands beside bluetoothd instead: each beacon at its interval (several in time slices), each from its own address. Set backend = \"mgmt\" to leave advertising to the kernel", ["HCI_DEVICE=\(device)"]))
        state = .stopping(Stop(answerPending: false, then: .reopen))
        out.append(.armTimer(Self.stopDeadline))
        out.append(.stopAdvertising)
    }

    private mutating func open(_ out: inout [Action]) {
        if backend != nil { closeBackend(&out) }
        let kind = chooseBackend(&out)
        backend = kind
        state = .opening
        out.append(.open(kind, mayBringUp: mayBringUp))
        out.append(.armTimer(Self.operationDeadline))
        setStatus(kind == .mgmt ? "Probing \(device) through the management interface" : "Probing the controller on \(device)", &out)
    }

    private mutating func apply(_ out: inout [Action], dataOnlyAllowed: Bool, refresh: Apply.Refresh? = nil) {
        guard !config.beacons.isEmpty else { return withdraw(&out) }
        // The self-report's frame first: an encrypted one may need its address and counters from the state directory.
        switch selfReport.prepare(config, uptime: uptime, period: Self.selfReportRenewal, seal: seal) {
        case .ready(let ahead):
            if let ahead { out.append(.supplySelfReport(ahead)) }
        case .needs(let needs):
            deferredApply = (dataOnlyAllowed, refresh)
            out.append(.supplySelfReport(needs))
            return
        case .failed(let why):
            return failed(BackendFailure(message: "Cannot put the BTHome self-report on the air: \(why)", fields: ["BEACON_FORMAT=bthome", "HCI_DEVICE=\(device)"]), &out)
        }
        if let line = selfReport.exhaustionLine() { out.append(.log(.err, line, ["BEACON_FORMAT=bthome"])) }
        guard let wanted = request else { return withdraw(&out) }
        let dataOnly = dataOnlyAllowed && applied.map { $0.addresses == wanted.addresses && $0.addressGeneration == wanted.addressGeneration
            && $0.beacons.count == wanted.beacons.count
            && !zip($0.beacons, wanted.beacons).contains { $0.needsRestart(for: $1) } } == true
        state = .applying(Apply(request: wanted, dataOnly: dataOnly, refresh: refresh))
        out.append(.apply(wanted, dataOnlyAllowed: dataOnlyAllowed))
        out.append(.armTimer(Self.operationDeadline))
    }

    private mutating func confirmed(_ done: Apply, _ result: OnAir, _ out: inout [Action]) {
        if backend == .mgmt, config.controller.backend == .auto, result.kernelInterval == .addAdvertisingDefault, !done.again {
            // The kernel took Add Advertising (an old kernel, or one that refuses the extended commands on this
            // controller): its default instead of the interval. Off the air through mgmt, then raw HCI.
            return leaveMgmt("the kernel's management interface advertises here only at its default interval of \(KernelInterval.addAdvertisingDefault.spoken)", &out)
        }
        let (wanted, dataOnly) = (done.request, done.dataOnly)
        let changed = applied != wanted
        applied = wanted
        unanswered = 0
        // New telemetry alone is not news for the journal.
        let quiet = ((done.refresh == .telemetry || done.refresh == .selfReport) && dataOnly) || done.refresh == .eid
        onAir = result
        backoff.reset()
        if done.again {
            // A reload or another program changed things while this apply ran: once more, with what is wanted now.
            return apply(&out, dataOnlyAllowed: true)
        }
        state = .advertising
        out.append(.cancelTimer)
        let s = advertisingStatus
        if (changed || !dataOnly) && !quiet {
            out.append(.log(.notice, dataOnly ? "\(s) (data updated)" : s, beaconFields))
            if config.beacons.count > 1 {
                // One journal line per beacon, with what it actually gets.
                let n = config.beacons.count
                for (k, b) in config.beacons.enumerated() {
                    let got = k < result.beacons.count ? result.beacons[k] : nil
                    let every = got.map { formatDuration($0.every) } ?? config.interval(of: b).description
                    let details = got.map { $0.details.isEmpty ? "" : " (\($0.details.joined(separator: ", ")))" } ?? ""
                    out.append(.log(.info, "Beacon \(k + 1) of \(n): \(describe(b.beacon)) every \(every) on \(device)\(details)",
                                    b.beacon.journalFields + ["HCI_DEVICE=\(device)", "BEACON_INDEX=\(k + 1)", "BEACON_COUNT=\(n)"]))
                }
            }
            if let k = result.kernelInterval {
                out.append(.log(.warning, k.warning(configured: config.beacons.map(config.interval(of:))), []))
            }
            txPowerLines(result, &out)
        }
        setStatus(s, ready: true, &out)
        settle(&out)
    }

    private var advertisingStatus: String {
        // EIDs from an unsynchronized clock do not resolve: say so where `systemctl status` shows it.
        let clockNote = !hasEID ? ""
            : clock?.synchronized == false ? "; the system clock is not synchronized: the EIDs will not resolve"
            : !clockSynchronizationKnown ? "; whether the system clock is synchronized is unknown (adjtimex refused): the EIDs resolve only if it is" : ""
        // Beacons still without a uuid are not on the air: say what to do, as for an unprovisioned file.
        let uuidNote = config.uuidNeeded(path: configPath).map { "; not on the air: \($0), then reload" } ?? ""
        return advertisingSummary + clockNote + uuidNote
    }

    private var advertisingSummary: String {
        if config.beacons.count > 1 {
            let each = config.beacons.enumerated().map { k, b in
                let got = onAir.flatMap { k < $0.beacons.count ? $0.beacons[k] : nil }
                let every = got.map { formatDuration($0.every) } ?? config.interval(of: b).description
                return "\(b.beacon.format.displayName) every \(every)" + (got?.address.map { " from \($0)" } ?? "")
            }
            var details = onAir?.details ?? []
            if config.advertising.connectable { details.append("connectable") }
            return "Advertising \(config.beacons.count) beacons on \(device): \(each.joined(separator: ", ")) (\(details.joined(separator: ", ")))"
        }
        let every = onAir.map { $0.kernelInterval?.description ?? $0.interval.description }
            ?? config.advertising.interval.description
        var details = onAir?.details ?? []
        if config.advertising.connectable { details.append("connectable") }
        return "Advertising \(config.beacon.map(describe) ?? "nothing") every \(every) on \(device) (\(details.joined(separator: ", ")))"
    }

    // MARK: failures

    private mutating func failed(_ f: BackendFailure, _ out: inout [Action]) {
        if f.rawHCIMayWork, backend == .mgmt, config.controller.backend == .auto, !mgmtRefused {
            mgmtRefused = true
            mgmtRefusedForPermission = f.fatal == .noPermission
            out.append(.log(.notice, "\(f.message); backend auto falls back to raw HCI commands", f.fields))
            return open(&out)
        }
        if let code = f.fatal {
            out.append(.log(.err, f.message, ["HCI_DEVICE=\(device)"]))
            out.append(.notify(["STATUS=\(f.message)", "EXIT_STATUS=\(code.rawValue)"]))
            closeBackend(&out)
            out.append(.cancelTimer)
            out.append(.exit(code))
            state = .exited(code)
            return
        }
        closeBackend(&out)
        if f.unanswered, case .kernel = device {
            unanswered += 1
            if unanswered >= 2, unanswered & (unanswered - 1) == 0 { return powerCycle(after: f, &out) }
        }
        retry(after: f.message, level: f.level, fields: f.fields, &out)
    }

    /// The controller answered nothing `unanswered` times in a row: what reopening cannot cure (a Pi's "command tx
    /// timeout" lock-up) a power cycle may. Between power cycles the retries back off, and each next power cycle
    /// waits for twice as many failures.
    private mutating func powerCycle(after f: BackendFailure, _ out: inout [Action]) {
        let line = "\(f.message); the controller on \(device) answered nothing \(unanswered) times in a row: taking \(device) down and up again (on a Raspberry Pi this power-cycles the radio)"
        out.append(.log(.warning, line, f.fields + (f.fields.contains { $0.hasPrefix("HCI_DEVICE=") } ? [] : ["HCI_DEVICE=\(device)"])))
        state = .powerCycling
        out.append(.powerCycle)
        out.append(.armTimer(Self.operationDeadline))
        setStatus("Power cycling \(device): the controller answered nothing \(unanswered) times in a row", ready: true, &out)
    }

    private mutating func powerCycled(_ f: BackendFailure?, _ out: inout [Action]) {
        // beacond took it down itself: it may bring it up again.
        mayBringUp = true
        guard let f else {
            // The kernel's device events for it (down, then up) come next: the up opens the device at once; without
            // them the timer does.
            let line = "Took \(device) down and up again; opening it"
            out.append(.log(.notice, line, ["HCI_DEVICE=\(device)"]))
            state = .waiting
            out.append(.armTimer(Self.afterPowerCycle))
            setStatus(line, ready: true, &out)
            return settle(&out)
        }
        retry(after: "Failed to power cycle \(device): \(f.message)", level: .warning, fields: f.fields, &out)
    }

    /// Logs `message`, says in STATUS when the next attempt comes, and arms the retry timer.
    private mutating func retry(after message: String, level: LogLevel, fields: [String] = [], _ out: inout [Action]) {
        let delay = backoff.next()
        let line = "\(message), retrying in \(formatDuration(delay))"
        out.append(.log(level, line, fields + (fields.contains { $0.hasPrefix("HCI_DEVICE=") } ? [] : ["HCI_DEVICE=\(device)"])))
        state = .waiting
        out.append(.armTimer(delay))
        // Settled into waiting counts as ready: boot must not wait for a controller.
        setStatus(line, ready: true, &out)
        settle(&out)
    }

    private mutating func closeBackend(_ out: inout [Action]) {
        guard backend != nil else { return }
        backend = nil
        applied = nil
        out.append(.closeBackend)
    }

    private mutating func reapply(_ reason: String, delay: Duration, fields: [String], at now: UInt64, _ out: inout [Action]) {
        switch state {
        case .advertising, .reapplyWait: break
        case .applying(var a):
            a.again = true
            state = .applying(a)
            return
        default: return
        }
        applied = nil
        reapplyTimes = reapplyTimes.filter { now &- $0 < 60_000_000 } + [now]
        let d: Duration
        if reapplyTimes.count > 5 {
            d = backoff.next()
            let hint = backend == .hci ? ". If bluetoothd runs, use backend = \"mgmt\"" : ""
            out.append(.log(.warning, "\(reason), again; re-applying the beacon in \(formatDuration(d))\(hint)", fields))
        } else {
            d = delay
            out.append(.log(.warning, "\(reason); re-applying the beacon", fields))
        }
        state = .reapplyWait
        out.append(.armTimer(d))
    }

    private mutating func timerFired(_ out: inout [Action]) {
        switch phase {
        case .waiting:
            open(&out)
        case .reapplyWait:
            apply(&out, dataOnlyAllowed: false)
        case .opening, .applying:
            let what = phase == .opening ? "open the controller" : "apply the beacon"
            failed(BackendFailure(message: "The \(backend?.rawValue ?? "") backend on \(device) did not \(what) within \(formatDuration(Self.operationDeadline)); starting over",
                                  level: .err, fields: ["HCI_DEVICE=\(device)"]), &out)
        case .powerCycling:
            powerCycled(BackendFailure(message: "the kernel did not answer within \(formatDuration(Self.operationDeadline))", level: .warning,
                                       fields: ["HCI_DEVICE=\(device)"]), &out)
        case .stopping:
            out.append(.log(.warning, "The controller on \(device) did not confirm advertising disabled within \(formatDuration(Self.stopDeadline)); exiting anyway", []))
            finish(&out)
        case .idle, .unprovisioned, .advertising, .exited:
            break
        }
    }

    // MARK: kernel device events

    private mutating func deviceEvent(_ kind: KernelDeviceEvent.Kind, _ out: inout [Action]) {
        guard case .kernel = device else { return }
        switch phase {
        case .idle, .unprovisioned, .stopping, .exited: return
        default: break
        }
        out.append(.log(.debug, "Kernel: \(device) \(kind)", []))
        switch kind {
        case .registered, .up:
            if kind == .up { mayBringUp = true }
            // Registered anew (a re-plug, a driver reload): the kernel's setup ran again, mgmt may know it now.
            if kind == .registered && !mgmtRefusedForPermission { mgmtRefused = false }
            if kind == .registered { mgmtShortfall = nil }
            guard phase == .waiting || phase == .reapplyWait else { return }
            // The controller is back: start over now, with a fresh backoff.
            backoff.reset()
            out.append(.cancelTimer)
            open(&out)
        case .down:
            mayBringUp = false
            guard backend != nil else { return }
            closeBackend(&out)
            retry(after: "\(device) was taken down; waiting for it to come up", level: .warning, &out)
        case .unregistered:
            guard backend != nil else { return }
            closeBackend(&out)
            retry(after: "\(device) was removed; waiting for it to appear", level: .warning, &out)
        }
    }

    // MARK: reload

    private mutating func reload(_ new: BeaconConfiguration, _ out: inout [Action]) {
        let old = config
        config = new
        out.append(.setLogLevel(logLevelOverride ?? new.daemon.logLevel ?? .info))
        if case .stopping(var stop) = state, stop.then != nil {
            // A stop on the old controller (a controller change, a withdrawn beacon) is under way: it finishes, and
            // what follows it is decided by this file. Its READY=1 comes when that settles.
            stop.then = new.beacon == nil ? .unprovisioned : .reopen
            state = .stopping(stop)
            return
        }
        if new.beacon == nil {
            return withdraw(&out)
        }
        if phase == .unprovisioned {
            out.append(.log(.info, "\(configPath) now has \(new.beacons.count > 1 ? "" : "a beacon: ")\(beaconsSummary)", beaconFields))
            return open(&out)
        }
        let oldDevice = deviceOverride ?? old.controller.device
        if device != oldDevice || new.controller.backend != old.controller.backend || (old.addressPlan.ownCommandsNeeded != nil) != (config.addressPlan.ownCommandsNeeded != nil) {
            out.append(.log(.notice, "Controller settings changed (now \(device), backend \(new.controller.backend.rawValue)); starting over", []))
            mgmtRefused = false
            mgmtShortfall = nil
            backoff.reset()
            out.append(.cancelTimer)
            // Nothing of beacond's may stay on the old controller: with a backend open there, whatever the phase,
            // stop there first (an open or apply in flight answers first, as for SIGTERM).
            if backend != nil {
                let stop = stop(then: .reopen)
                state = .stopping(stop)
                out.append(.armTimer(Self.stopDeadline))
                if !stop.answerPending { out.append(.stopAdvertising) }
                return
            }
            closeBackend(&out)
            return open(&out)
        }
        switch state {
        case .advertising:
            apply(&out, dataOnlyAllowed: true)
        case .opening:
            // The apply that follows the open uses the new configuration; READY=1 goes out when it settles.
            break
        case .applying(var a):
            // The apply running now has the old configuration: once more after it, then READY=1.
            a.again = true
            state = .applying(a)
        case .waiting:
            // The next attempt uses the new configuration.
            settle(&out)
        case .reapplyWait:
            // The reapply (the timer armed) puts the new configuration on the air; READY=1 when it settles.
            break
        default:
            break
        }
    }

    /// What a stop that is not for exiting leads to: a controller change opens the new controller, a config that
    /// lost its uuid leaves nothing on the air.
    private enum AfterStop: Sendable { case reopen, unprovisioned }

    /// The config has no beacon: nothing on the air, no backend, STATUS says what to do.
    private mutating func unprovision(_ out: inout [Action]) {
        closeBackend(&out)
        out.append(.cancelTimer)
        state = .unprovisioned
        let s = "Not advertising: \(config.uuidNeeded(path: configPath) ?? "the config has no beacon"), then reload"
        out.append(.log(.notice, s, ["CONFIG_FILE=\(configPath)"]))
        setStatus(s, ready: true, &out)
        settle(&out)
    }

    /// A reload removed the beacon: take it off the air first when it may be there, then wait unprovisioned.
    private mutating func withdraw(_ out: inout [Action]) {
        switch phase {
        case .advertising, .reapplyWait, .opening, .applying, .powerCycling:
            let stop = stop(then: .unprovisioned)
            state = .stopping(stop)
            out.append(.armTimer(Self.stopDeadline))
            if !stop.answerPending { out.append(.stopAdvertising) }
        case .waiting, .unprovisioned:
            unprovision(&out)
        case .idle, .stopping, .exited:
            break
        }
    }

    /// Entering a settled phase ends a reload: READY=1 with whatever STATUS is true now.
    private mutating func settle(_ out: inout [Action]) {
        guard reloading else { return }
        reloading = false
        reloadResult = .applied
        out.append(.notify(["READY=1", "STATUS=\(lastStatus)"]))
    }

    /// Sends STATUS when it changed. `ready`: this state also completes start-up, so READY=1 goes with the first.
    private mutating func setStatus(_ s: String, ready: Bool = false, _ out: inout [Action]) {
        if ready && !readySent {
            readySent = true
            lastStatus = s
            out.append(.notify(["READY=1", "STATUS=\(s)"]))
            return
        }
        guard s != lastStatus else { return }
        lastStatus = s
        // During a reload the final state goes out with its READY=1.
        if !reloading { out.append(.notify(["STATUS=\(s)"])) }
    }

    // MARK: stop

    private mutating func terminate(_ signal: String, _ out: inout [Action]) {
        if case .stopping(var stop) = state {
            // Already taking the beacon off for a controller change or a withdrawn beacon: exit after it instead.
            guard stop.then != nil else { return }
            stop.then = nil
            state = .stopping(stop)
            out.append(.log(.info, "Received \(signal), disabling advertising and exiting", []))
            out.append(.notify(["STOPPING=1", "STATUS=Stopping: disabling advertising"]))
            return
        }
        out.append(.log(.info, "Received \(signal), disabling advertising and exiting", []))
        out.append(.notify(["STOPPING=1", "STATUS=Stopping: disabling advertising"]))
        // An open or apply in flight finishes first: a disable sent between its commands would be overtaken by its
        // enable, and the beacon would stay on the air.
        let stop = stop(then: nil)
        state = .stopping(stop)
        out.append(.armTimer(Self.stopDeadline))
        if !stop.answerPending { out.append(.stopAdvertising) }
    }

    private mutating func stopNow(_ out: inout [Action]) {
        guard case .stopping(var stop) = state, stop.answerPending else { return }
        stop.answerPending = false
        state = .stopping(stop)
        out.append(.stopAdvertising)
    }

    private mutating func finish(_ out: inout [Action]) {
        let then: AfterStop? = if case .stopping(let stop) = state { stop.then } else { nil }
        closeBackend(&out)
        switch then {
        case .reopen:
            // The stop was for a controller change, not for exiting. A reload is done when the beacons are on the
            // air there or the open failed (both settle), not when the open starts.
            out.append(.cancelTimer)
            open(&out)
            return
        case .unprovisioned:
            return unprovision(&out)
        case nil:
            break
        }
        out.append(.cancelTimer)
        out.append(.exit(.success))
        state = .exited(.success)
    }

    // MARK: journal fields

    private var beaconFields: [String] {
        (config.beacon?.journalFields ?? []) + ["HCI_DEVICE=\(device)"]
    }

    private func describe(_ b: Beacon) -> String { b.summary }

    /// Every beacon of the config, for the start line: "UUID major 1 minor 1", or "3 beacons: 1. …; 2. …; 3. …".
    private var beaconsSummary: String {
        guard config.beacons.count > 1 else { return config.beacon.map(describe) ?? "no beacon" }
        return "\(config.beacons.count) beacons: " + config.beacons.enumerated().map { "\($0 + 1). \(describe($1.beacon))" }.joined(separator: "; ")
    }

    /// Measured-power warnings already given (beacon, TX power, measured power): said once, not at every apply.
    private var measuredPowerWarned: Set<String> = []

    /// The TX power the controller reports, beside each beacon's measured_power, and a warning (once) when the two
    /// are far apart for the 1 m model.
    private mutating func txPowerLines(_ result: OnAir, _ out: inout [Action]) {
        let n = config.beacons.count
        var parts: [String] = []
        for (k, b) in config.beacons.enumerated() {
            guard let tx = result.txPower(of: k, count: n), let m = b.beacon.measuredPowerAt1m else { continue }
            let which = n == 1 ? "" : "beacon \(k + 1): "
            parts.append("\(which)TX \(tx) dBm, measured_power \(m) dBm at 1 m")
            guard let off = MeasuredPowerCheck.offBy(measuredAt1m: m, tx: Int(tx)),
                  measuredPowerWarned.insert("\(k) \(b.beacon.summary) \(tx) \(m)").inserted else { continue }
            let expected = MeasuredPowerCheck.expectedAt1m(tx: Int(tx))
            let at0m = b.beacon.format == .eddystoneUID ? " (\(m + MeasuredPowerCheck.lossAt1m) dBm at 0 m)" : ""
            out.append(.log(.warning, "\(n == 1 ? "The beacon" : "Beacon \(k + 1)")'s measured_power of \(m) dBm at 1 m\(at0m) is \(abs(off)) dB \(off > 0 ? "stronger" : "weaker") than a \(tx) dBm transmitter is usually heard at 1 m (about \(expected) dBm: TX less the \(MeasuredPowerCheck.lossAt1m) dB a 2.4 GHz signal loses over 1 m); receivers will misjudge its distance. Measure it: 'beacond scan --calibrate 30' with a receiver 1 m away, then set measured_power to the median",
                            b.beacon.journalFields + ["HCI_DEVICE=\(device)", "TX_POWER=\(tx)", "MEASURED_POWER=\(m)"]))
        }
        if !parts.isEmpty {
            out.append(.log(.info, "TX power on \(device) as the controller reports it: \(parts.joined(separator: "; "))", ["HCI_DEVICE=\(device)"]))
        }
    }

}

private func configFields(_ path: String, _ d: ConfigDiagnostic) -> [String] {
    var f = ["CONFIG_FILE=\(path)"]
    if let l = d.location { f.append("CONFIG_LINE=\(l.line)") }
    return f
}

extension Lifecycle {
    /// The time from the wall clock's `seconds`.`milliseconds` until its next multiple of `period` (5 ms past it, so
    /// the new EID period has begun when the timer fires).
    public static func untilBoundary(of period: Duration, wallSeconds seconds: UInt64, milliseconds: Int) -> Duration {
        let p = max(1, UInt64(period.components.seconds))
        let into = Int64(seconds % p) * 1000 + Int64(milliseconds)
        return .milliseconds(Int64(p) * 1000 - into + 5)
    }
}
