// The daemon's whole policy as a value: which backend, when to retry, how a reload and a stop go, what systemd
// is told. Events in, actions out, no I/O; `Daemon` in the app only carries the actions out. Its vocabulary (phases,
// events, actions) is in LifecycleVocabulary.swift; what it remembers of the backends, of systemd and of the beacons'
// content, and its wording, are values of their own (BackendChoice, SystemdRecord, AirContent, LifecycleWording).
import BeaconCore
import BluetoothHCI
import HCIHost

public struct Lifecycle: Sendable {
    /// The phase with what only it needs: the apply in flight (and whether to apply again after it), what the
    /// controller confirmed on the open backend, and what a stop leads to (and whether it waits for an answer first).
    /// An illegal combination cannot be written.
    private enum State: Sendable {
        case idle, unprovisioned, opening, waiting, powerCycling
        /// With what was confirmed on this backend before the apply (nil after an open).
        case applying(Apply, Air?)
        case advertising(Air)
        /// What was confirmed, taken off the air by someone else (`applied` nil).
        case reapplyWait(Air)
        case stopping(Stop)
        case exited(ExitCode)
    }

    /// What the controller confirmed on the open backend: the schedule (nil once someone else took it off the air)
    /// and what the controller reported of it.
    private struct Air: Sendable {
        var applied: AdvertisingSchedule?
        var onAir: OnAir
    }

    private struct Apply: Sendable {
        var request: AdvertisingSchedule
        var dataOnly: Bool
        /// Only new telemetry or the next EIDs: not news for the journal.
        var refresh: AirContent.Refresh?
        /// A reload or another program changed things meanwhile: apply once more after this one, with what is
        /// wanted then.
        var again = false
    }

    private struct Stop: Sendable {
        /// An open or an apply is in flight: the disable goes out after its answer, or its enable would overtake it.
        var answerPending: Bool
        /// What follows the stop: nil exits; a controller change opens the new one; a withdrawn beacon waits.
        var then: AfterStop?
        /// What was confirmed on the backend being stopped.
        var air: Air?
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

    /// What the controller confirmed on the open backend, in the phases that keep it.
    private var air: Air? {
        switch state {
        case .applying(_, let a): a
        case .advertising(let a), .reapplyWait(let a): a
        case .stopping(let s): s.air
        default: nil
        }
    }

    /// Takes the beacons off the air, then `then`. An open or an apply in flight finishes first (unless told there is
    /// no answer to wait for): a disable sent between its commands would be overtaken by its enable.
    private mutating func beginStop(then: AfterStop?, answerPending: Bool? = nil, _ out: inout [Action]) {
        let pending = answerPending ?? (phase == .opening || phase == .applying || phase == .powerCycling)
        state = .stopping(Stop(answerPending: pending, then: then, air: air))
        out.append(.armTimer(Self.stopDeadline))
        if !pending { out.append(.stopAdvertising) }
    }
    public private(set) var config: BeaconConfiguration
    private let deviceOverride: DeviceSpec?
    private let logLevelOverride: LogLevel?
    public let configPath: String

    /// The backend in use, and what backend `auto` learned of the management interface.
    private(set) var choice = BackendChoice()
    /// The backoff, the controller's silences in a row, another program's takings.
    private var retries: Retries
    /// False after the kernel reported our hciN taken down: someone meant it, so wait for it to come back up.
    private var mayBringUp = true
    /// What systemd was told, and the reloads.
    private(set) var systemd = SystemdRecord()
    /// The telemetry, the self-report, the clock and the address generation the beacons go on the air with.
    private(set) var content: AirContent
    private var periodic = PeriodicArming()
    private var wording = LifecycleWording()

    /// What the controller last confirmed on the air, while the backend that confirmed it is open.
    var onAir: OnAir? { air?.onAir }

    /// Something the controller confirmed is on the air now (an apply under way replaces it).
    public var hasConfirmedAir: Bool { air?.applied != nil && backend != nil }


    public init(config: BeaconConfiguration, configPath: String, device: DeviceSpec? = nil, logLevel: LogLevel? = nil,
                seed: UInt64, cipher: BlockCipher? = nil, seal: CCMSeal? = nil) {
        self.config = config
        self.configPath = configPath
        deviceOverride = device
        logLevelOverride = logLevel
        retries = Retries(seed: seed)
        content = AirContent(cipher: cipher, seal: seal)
    }

    public var device: DeviceSpec { deviceOverride ?? config.controller.device }

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
            out.append(.log(.info, "beacond \(beacondVersion) starting: \(LifecycleWording.beaconsSummary(config)) on \(device)", beaconFields))
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
                if let why = choice.kernelShortfall(traits, config, device: device) { leaveMgmt(why, &out) } else { apply(&out, dataOnlyAllowed: false) }
            case .stopping: stopNow(&out)
            default: break
            }
        case .openFailed(let f), .applyFailed(let f):
            switch phase {
            case .opening, .applying: failed(f, &out)
            case .stopping: stopNow(&out)
            default: break
            }
        case .applied(let result):
            switch state {
            case .applying(let done, let before): confirmed(done, after: before, content.withHeld(result, config), &out)
            case .stopping: stopNow(&out)
            default: break
            }
        case .stopped:
            guard phase == .stopping else { break }
            finish(&out)
        case .lost(let f):
            guard backend != nil else { break }
            if phase == .stopping { finish(&out); break }
            failed(f, &out)
        case .onAirChanged(let result):
            guard case .advertising(var a) = state else { break }
            a.onAir = content.withHeld(result, config)
            state = .advertising(a)
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
            out.append(systemd.reloadBegun())
            out.append(.log(.notice, "Reloading configuration from \(configPath)", ["CONFIG_FILE=\(configPath)"]))
            out.append(.loadConfig)
        case .configLoaded(let new):
            reload(new, &out)
        case .configRefused(let error):
            for d in error.diagnostics { out.append(.log(.err, d.formatted(path: error.path), LifecycleWording.configFields(error.path, d))) }
            let n = error.diagnostics.count
            out.append(.log(.warning, "Keeping the previous configuration: \(configPath) has \(n) error\(n == 1 ? "" : "s")", ["CONFIG_FILE=\(configPath)"]))
            out.append(systemd.refused(error))
        case .terminate(let signal):
            terminate(signal, &out)
        case .timerFired:
            timerFired(&out)
        case .telemetry(let t):
            content.telemetry = t
            guard phase == .advertising else { break }
            if config.beacons.contains(where: { $0.beacon.isTelemetry }) {
                apply(&out, dataOnlyAllowed: true, refresh: .telemetry)
            } else if content.selfReportHeld != nil || content.selfReport.last.map({ content.uptime >= $0.uptime &+ Self.selfReportRenewal }) == true {
                apply(&out, dataOnlyAllowed: true, refresh: .selfReport)
            }
        case .selfReportSupplied(let supply):
            if let (level, line) = content.selfReport.supplied(supply, uptime: content.uptime) {
                out.append(.log(level, line, ["BEACON_FORMAT=bthome"]))
            }
            // A self-report that waited for the wall clock beside the other beacons: on the air now.
            if content.deferredApply == nil, content.selfReportHeld?.waiting == true, phase == .advertising {
                apply(&out, dataOnlyAllowed: true, refresh: .selfReport)
            }
            guard let d = content.deferredApply else { break }
            content.deferredApply = nil
            switch phase {
            case .opening, .applying, .advertising, .reapplyWait: apply(&out, dataOnlyAllowed: d.dataOnlyAllowed, refresh: d.refresh)
            default: break
            }
        case .addressPeriod:
            guard rotatesAddress else { break }
            content.addressGeneration &+= 1
            // Not on the air now: the next apply takes the new address anyway.
            if phase == .advertising { apply(&out, dataOnlyAllowed: true) }
        case .clock(let sinceEpoch, let told):
            let before = content.eidPeriods(config)
            out += content.tell(clock: sinceEpoch, synchronized: told, hasEID: hasEID)
            // A new EID period: those beacons get their new identifier and address, the others are not touched.
            guard phase == .advertising, hasEID, content.eidPeriods(config) != before else { break }
            apply(&out, dataOnlyAllowed: true, refresh: .eid)
        }
        syncPeriodic(after: event, &out)
        return out
    }

    /// Arms each periodic timer exactly while it is wanted (a tick spends it), cancels one no longer wanted.
    private mutating func syncPeriodic(after event: Event, _ out: inout [Action]) {
        switch event {
        case .telemetry: periodic.spent(.telemetry)
        case .addressPeriod: periodic.spent(.addressRotation)
        case .clock: periodic.spent(.eidRotation)
        default: break
        }
        if case .exited = phase { return }
        out += periodic.sync([(.telemetry, hasTelemetry, Self.telemetryPeriod), (.addressRotation, rotatesAddress, config.advertising.addressRotation),
                              (.eidRotation, hasEID, eidPeriod)])
    }

    // MARK: bring-up and apply


    /// Backend `auto` leaves mgmt for raw HCI beside bluetoothd: said once, then a stop through mgmt (what an earlier
    /// run or this one added there comes off, or the kernel would keep advertising it between beacond's own
    /// commands), then raw HCI.
    private mutating func leaveMgmt(_ why: String, _ out: inout [Action]) {
        out.append(choice.leaveMgmt(why, device: device))
        beginStop(then: .reopen, answerPending: false, &out)
    }

    private mutating func open(_ out: inout [Action]) {
        if backend != nil { closeBackend(&out) }
        let (kind, note) = choice.choose(config, device: device)
        if let note { out.append(note) }
        choice.open = kind
        state = .opening
        out.append(.open(kind, mayBringUp: mayBringUp))
        out.append(.armTimer(Self.operationDeadline))
        setStatus(kind == .mgmt ? "Probing \(device) through the management interface" : "Probing the controller on \(device)", &out)
    }

    private mutating func apply(_ out: inout [Action], dataOnlyAllowed: Bool, refresh: AirContent.Refresh? = nil) {
        guard !config.beacons.isEmpty else { return withdraw(&out) }
        // The self-report's frame first: an encrypted one may need its address and counters from the state directory.
        switch content.selfReportStep(config, device: device) {
        case .proceed(let lines): out += lines
        case .needs(let needs):
            content.deferredApply = (dataOnlyAllowed, refresh)
            if let needs { out.append(.supplySelfReport(needs)) }
            return
        case .fail(let f): return failed(f, &out)
        }
        guard let wanted = content.request(config) else { return withdraw(&out) }
        let before = air
        let dataOnly = dataOnlyAllowed && before?.applied.map { $0.addresses == wanted.addresses && $0.addressGeneration == wanted.addressGeneration
            && $0.beacons.count == wanted.beacons.count
            && !zip($0.beacons, wanted.beacons).contains { $0.needsRestart(for: $1) } } == true
        state = .applying(Apply(request: wanted, dataOnly: dataOnly, refresh: refresh), before)
        out.append(.apply(wanted, dataOnlyAllowed: dataOnlyAllowed))
        out.append(.armTimer(Self.operationDeadline))
    }

    private mutating func confirmed(_ done: Apply, after before: Air?, _ result: OnAir, _ out: inout [Action]) {
        if !done.again, let why = choice.kernelDefault(result, config) {
            // The kernel took Add Advertising: its default instead of the interval. Off the air through mgmt, then raw HCI.
            return leaveMgmt(why, &out)
        }
        let (wanted, dataOnly) = (done.request, done.dataOnly)
        let changed = before?.applied != wanted
        let now = Air(applied: wanted, onAir: result)
        // New telemetry alone is not news for the journal.
        let quiet = ((done.refresh == .telemetry || done.refresh == .selfReport) && dataOnly) || done.refresh == .eid
        retries.onAir()
        if done.again {
            // A reload or another program changed things while this apply ran: once more, with what is wanted now.
            state = .applying(done, now)
            return apply(&out, dataOnlyAllowed: true)
        }
        state = .advertising(now)
        out.append(.cancelTimer)
        let s = advertisingStatus
        if (changed || !dataOnly) && !quiet {
            out += wording.confirmed(s, dataOnly: dataOnly, result, config, device: device)
        }
        setStatus(s, ready: true, &out)
        settle(&out)
    }

    private var advertisingStatus: String {
        LifecycleWording.advertisingStatus(config, device: device, configPath: configPath, onAir: onAir, clockSynchronized: content.clockSynchronized)
    }

    // MARK: failures

    private mutating func failed(_ f: BackendFailure, _ out: inout [Action]) {
        if choice.fallsBack(after: f, config) {
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
        if f.unanswered, case .kernel = device, retries.unansweredAgain() { return powerCycle(after: f, &out) }
        retry(after: f.message, level: f.level, fields: f.fields, &out)
    }
    /// The controller answered nothing `unanswered` times in a row: what reopening cannot cure (a Pi's "command tx
    /// timeout" lock-up) a power cycle may. Between power cycles the retries back off, and each next power cycle
    /// waits for twice as many failures.
    private mutating func powerCycle(after f: BackendFailure, _ out: inout [Action]) {
        let line = "\(f.message); the controller on \(device) answered nothing \(retries.unanswered) times in a row: taking \(device) down and up again (on a Raspberry Pi this power-cycles the radio)"
        out.append(.log(.warning, line, f.fields + (f.fields.contains { $0.hasPrefix("HCI_DEVICE=") } ? [] : ["HCI_DEVICE=\(device)"])))
        state = .powerCycling
        out.append(.powerCycle)
        out.append(.armTimer(Self.operationDeadline))
        setStatus("Power cycling \(device): the controller answered nothing \(retries.unanswered) times in a row", ready: true, &out)
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
        let delay = retries.next()
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
        choice.open = nil
        out.append(.closeBackend)
    }

    private mutating func reapply(_ reason: String, delay: Duration, fields: [String], at now: Duration, _ out: inout [Action]) {
        let onAir: OnAir
        switch state {
        case .advertising(let air), .reapplyWait(let air): onAir = air.onAir
        case .applying(var a, let air):
            a.again = true
            state = .applying(a, air)
            return
        default: return
        }
        // Again and again (more than five times a minute): the backoff's wait, and a hint.
        let wait = retries.reapplied(at: now)
        let hint = backend == .hci ? ". If bluetoothd runs, use backend = \"mgmt\"" : ""
        out.append(.log(.warning, wait.map { "\(reason), again; re-applying the beacon in \(formatDuration($0))\(hint)" } ?? "\(reason); re-applying the beacon", fields))
        state = .reapplyWait(Air(applied: nil, onAir: onAir))
        out.append(.armTimer(wait ?? delay))
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
            if kind == .registered { choice.registered() }
            guard phase == .waiting || phase == .reapplyWait else { return }
            // The controller is back: start over now, with a fresh backoff.
            retries.reset()
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
            out.append(.log(.info, "\(configPath) now has \(new.beacons.count > 1 ? "" : "a beacon: ")\(LifecycleWording.beaconsSummary(config))", beaconFields))
            return open(&out)
        }
        let oldDevice = deviceOverride ?? old.controller.device
        if device != oldDevice || new.controller.backend != old.controller.backend || (old.addressPlan.ownCommandsNeeded != nil) != (config.addressPlan.ownCommandsNeeded != nil) {
            out.append(.log(.notice, "Controller settings changed (now \(device), backend \(new.controller.backend.rawValue)); starting over", []))
            choice.settingsChanged()
            retries.reset()
            out.append(.cancelTimer)
            // Nothing of beacond's may stay on the old controller: with a backend open there, whatever the phase,
            // stop there first (an open or apply in flight answers first, as for SIGTERM).
            if backend != nil {
                return beginStop(then: .reopen, &out)
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
        case .applying(var a, let air):
            // The apply running now has the old configuration: once more after it, then READY=1.
            a.again = true
            state = .applying(a, air)
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
            beginStop(then: .unprovisioned, &out)
        case .waiting, .unprovisioned:
            unprovision(&out)
        case .idle, .stopping, .exited:
            break
        }
    }

    /// Entering a settled phase ends a reload: READY=1 with whatever STATUS is true now.
    private mutating func settle(_ out: inout [Action]) {
        if let a = systemd.settled() { out.append(a) }
    }

    /// Sends STATUS when it changed. `ready`: this state also completes start-up, so READY=1 goes with the first.
    private mutating func setStatus(_ s: String, ready: Bool = false, _ out: inout [Action]) {
        if let a = systemd.status(s, ready: ready) { out.append(a) }
    }

    // MARK: stop

    private mutating func terminate(_ signal: String, _ out: inout [Action]) {
        if case .stopping(let stop) = state, stop.then == nil { return }
        out.append(.log(.info, "Received \(signal), disabling advertising and exiting", []))
        out.append(.notify(["STOPPING=1", "STATUS=Stopping: disabling advertising"]))
        if case .stopping(var stop) = state {
            // Already taking the beacon off for a controller change or a withdrawn beacon: exit after it instead.
            stop.then = nil
            state = .stopping(stop)
            return
        }
        beginStop(then: nil, &out)
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

    private var beaconFields: [String] { LifecycleWording.beaconFields(config, device: device) }
}
