// `beacond run`: carries out what the Lifecycle decides. It owns the real things — the event loop, the one
// lifecycle timer, signals, the kernel device watcher, the backend object — and feeds what they report back in
// as events. Every decision (retry, reload, stop, status) is in DaemonCore's Lifecycle.
import AESCipher
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import HCITransport
import SystemCalls
import SystemdSupport

final class Daemon {
    private let loop: EventLoop
    private let log: Logger
    private let options: RunOptions
    private var lifecycle: Lifecycle
    private var backend: AdvertisingBackend?
    /// Bumped for every new backend so late callbacks of an old one are ignored.
    private var generation = 0
    /// What beacond put on its controllers (mgmt instances, raw HCI sets on a kernel hciN), per device, kept in the
    /// state directory: what a backend added is known to the next one, and to the next run after a crash.
    private let owned: OwnershipStore
    /// Every connection's addresses, for the daemon's life (AddressKeeper).
    private let addresses = AddressKeeper()
    /// This process's claim on its device in the state directory.
    private let stateLock = StateLock()
    private var timer: EventSource?
    /// Eddystone-TLM: new values every Lifecycle.telemetryPeriod, while the config has such a beacon.
    private var telemetryTimer: EventSource?
    private var telemetryClock: TelemetryClock
    /// The self-report's answer waiting for the wall clock (supplySelfReport).
    private var selfReportWait: EventSource?
    /// `address = "rotating"` or `"resolvable"`: a new private address every `address_rotation_s`.
    private var addressTimer: EventSource?
    /// Eddystone-EID: at every period boundary of the wall clock, the clock goes to the lifecycle.
    private var eidTimer: EventSource?
    /// A step of the wall clock (an NTP client's at boot, date -s) moves the EID periods at once: the boundary timer
    /// counts on the monotonic clock and would keep the old period's EID on the air until it fires.
    private var clockSteps: ClockStepWatch?
    private var clockStepSource: EventSource?
    private var watcher: DeviceWatcher?
    private var watcherSource: EventSource?
    /// Events that arrive while actions are being carried out (a backend may answer at once) wait their turn, so
    /// the lifecycle sees them in order and after the actions it already returned. With the generation of the
    /// backend that sent them, if one did.
    private var queued: [(event: Lifecycle.Event, generation: Int?)] = []
    private var handling = false
    /// SHA-256 of the config file the lifecycle has now.
    private var configDigest: String
    /// Where the state for `beacond status` goes (nil: nowhere this user may write), this process's hold on it, and
    /// what was last written.
    private let stateDirectory: (path: String, handRunBase: String?)?
    private var runtime: RuntimeStateFile.Claim?
    private var lastState: RuntimeState?
    private var stateFailureSaid = false
    /// The state file follows the lifecycle within `stateSettle`, not at each of its steps: the steps of one sequence
    /// (a start's probe and apply, a reload's) make one write, after their commands went out. What READY=1 tells
    /// systemd, the file says first (`systemctl start beacond && beacond status`).
    private var stateTimer: EventSource?
    static let stateSettle = Duration.milliseconds(10)

    private init(loop: EventLoop, log: Logger, options: RunOptions, config: BeaconConfiguration, digest: String) {
        configDigest = digest
        stateDirectory = RuntimeStateFile.directory()
        self.loop = loop
        self.log = log
        self.options = options
        telemetryClock = TelemetryClock(startedAt: loop.nowMicroseconds)
        owned = OwnershipStore(log: log)
        lifecycle = Lifecycle(config: config, configPath: options.configPath, device: options.device,
                              logLevel: options.logLevel, seed: (try? kernelRandomBytes(8)).map { $0.reduce(0) { $0 << 8 | UInt64($1) } } ?? monotonicMicroseconds(),
                              cipher: { key, block in try AES128.encrypt(block, key: key) },
                              seal: { key, nonce, plaintext in try AESCCM.seal(plaintext, key: key, nonce: nonce) })
    }

    // MARK: entry

    static func run(_ options: RunOptions) -> ExitCode {
        let config: BeaconConfiguration
        let digest: String
        do { (config, digest) = try ConfigLoader.loadWithDigest(options.configPath) } catch {
            return exit(StartupExit.decide(.configRefused(error))!, Logger(level: options.logLevel ?? .info))
        }
        let log = Logger(level: options.logLevel ?? config.daemon.logLevel ?? .info)
        if let refusal = StartupExit.decide(.selfTests(config, aes128: AES128.selfTestFailure, ccm: AESCCM.selfTestFailure)) {
            return exit(refusal, log)
        }
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            log.error("Failed to set up the event loop: \(error)")
            Notifier.send(["ERRNO=\(error.errno.rawValue)"])
            return .failure
        }
        let daemon = Daemon(loop: loop, log: log, options: options, config: config, digest: digest)
        if let problem = daemon.stateLock.acquire(daemon.lifecycle.device.description, loop: loop) {
            return exit(StartupExit.decide(.stateLock(busy: problem.kind == .busy, problem: "\(problem)"))!, log)
        }
        daemon.claimRuntimeDirectory()
        defer { daemon.runtime?.remove() }
        do {
            try daemon.start()
            let code = try loop.run()
            return ExitCode(rawValue: code) ?? .failure
        } catch {
            log.error("Event loop failed: \(error)")
            Notifier.send(["ERRNO=\(error.errno.rawValue)"])
            return .failure
        }
    }

    /// Ends `run` before its start as DaemonCore's StartupExit decided: its lines, what systemd is told, its code.
    private static func exit(_ e: StartupExit, _ log: Logger) -> ExitCode {
        for line in e.lines { log.error(line.message, line.fields) }
        Notifier.send(e.notify)
        return e.code
    }

    private func start() throws(SystemError) {
        _ = try loop.addSignal(ProcessSignal.terminate) { [unowned self] in self.handle(.terminate(signal: "SIGTERM")) }
        _ = try loop.addSignal(ProcessSignal.interrupt) { [unowned self] in self.handle(.terminate(signal: "SIGINT")) }
        _ = try loop.addSignal(ProcessSignal.hangup) { [unowned self] in self.handle(.hangup) }
        timer = try loop.addIdleTimer { [unowned self] in self.handle(.timerFired) }
        stateTimer = try loop.addIdleTimer { [unowned self] in self.writeState() }
        telemetryTimer = try loop.addIdleTimer { [unowned self] in self.telemetryTick() }
        addressTimer = try loop.addIdleTimer { [unowned self] in self.handle(.addressPeriod) }
        eidTimer = try loop.addIdleTimer { [unowned self] in self.clockTick() }
        watchClockSteps()
        try loop.enableWatchdog()
        // The first telemetry (the temperature now) before the first frame goes out.
        handle(.telemetry(telemetryClock.telemetry(temperature: lifecycle.hasTelemetry ? ThermalZone.read() : nil)))
        // The wall clock, for the EIDs of the first frames.
        clockTick()
        handle(.start)
    }

    // MARK: the executor

    private func handle(_ event: Lifecycle.Event, from backendGeneration: Int? = nil) {
        queued.append((event, backendGeneration))
        guard !handling else { return }
        handling = true
        while !queued.isEmpty {
            let (e, g) = queued.removeFirst()
            if let g, g != generation { continue }  // from a backend closed since
            for action in lifecycle.handle(e) { perform(action) }
        }
        handling = false
        publishState()
    }

    /// The runtime directory and its lock, held from before the first state file until the exit: a state file whose
    /// lock is free is a dead process's, whatever has its pid now.
    private func claimRuntimeDirectory() {
        guard let dir = stateDirectory else { return }
        do { runtime = try RuntimeStateFile.claim(dir) } catch {
            stateFailureSaid = true
            log.warning("Cannot keep \(dir.path)/\(RuntimeStateFile.fileName) for 'beacond status' and 'beacond reload': \(error)")
        }
    }

    /// The state file is written within `stateSettle` when what it says changed (`beacond status`, `beacond reload`).
    private func publishState() {
        guard let t = stateTimer else { return writeState() }
        if !t.isArmed { t.rearm(after: Self.stateSettle) }
    }

    /// Writes the state file now, if what it says changed.
    private func writeState() {
        stateTimer?.disarm()
        guard let runtime, RuntimeState.publishes(lifecycle) else { return }
        let state = RuntimeState(lifecycle, pid: processID(), configDigest: configDigest, now: wallClock().seconds, previous: lastState)
        guard state != lastState else { return }
        do {
            try runtime.write(state)
            lastState = state
            stateFailureSaid = false
        } catch {
            guard !stateFailureSaid else { return }
            stateFailureSaid = true
            log.warning("Cannot write \(runtime.path)/\(RuntimeStateFile.fileName) for 'beacond status': \(error)")
        }
    }

    // MARK: Eddystone-TLM

    private func telemetryTick() {
        telemetryClock.advance(to: loop.nowMicroseconds, onAir: lifecycle.onAirEvery)
        handle(.telemetry(telemetryClock.telemetry(temperature: ThermalZone.read())))
    }

    // MARK: Eddystone-EID

    private func watchClockSteps() {
        do {
            let w = try ClockStepWatch()
            clockSteps = w
            clockStepSource = try loop.addReader(fd: w.file.rawValue) { [unowned self] _ in
                guard w.stepped() else { return }
                if self.lifecycle.hasEID { self.log.notice("The wall clock was set: the Eddystone-EID beacons follow it now") }
                self.clockTick()
            }
        } catch {
            log.warning("Cannot watch for steps of the wall clock (\(error)): after one, the Eddystone-EID beacons follow it at their next period boundary")
        }
    }

    private func clockTick() { handle(.clock(sinceEpoch: .seconds(wallClock().seconds), synchronized: systemClockSynchronized())) }

    private func perform(_ action: Lifecycle.Action) {
        switch action {
        case .open(let kind, let mayBringUp):
            open(kind, mayBringUp: mayBringUp)
        case .apply(let request, let dataOnlyAllowed):
            guard let b = backend else { return handle(.applyFailed(BackendFailure(message: "No controller is open"))) }
            let gen = generation
            b.apply(request, dataOnlyAllowed: dataOnlyAllowed) { [unowned self] result in
                switch result {
                case .success(let onAir): self.handle(.applied(onAir), from: gen)
                case .failure(let f): self.handle(.applyFailed(f), from: gen)
                }
            }
        case .stopAdvertising:
            stopAdvertising()
        case .powerCycle:
            powerCycle()
        case .closeBackend:
            generation += 1
            backend?.close()
            backend = nil
        case .loadConfig:
            do {
                let (config, digest) = try ConfigLoader.loadWithDigest(options.configPath)
                configDigest = digest
                handle(.configLoaded(config))
            } catch { handle(.configRefused(error)) }
        case .armTimer(let d): timer?.rearm(after: d)
        case .cancelTimer: timer?.disarm()
        case .armPeriodic(.eidRotation, let d):
            let w = wallClock()
            eidTimer?.rearm(after: Lifecycle.untilBoundary(of: d, wallSeconds: w.seconds, milliseconds: w.milliseconds))
        case .armPeriodic(let k, let d): periodic(k)?.rearm(after: d)
        case .cancelPeriodic(let k): periodic(k)?.disarm()
        case .supplySelfReport(let needs): supplySelfReport(needs)
        case .notify(let assignments):
            if assignments.contains("READY=1") { writeState() }
            Notifier.send(assignments)
        case .notifyReloading: Notifier.send(["RELOADING=1", "MONOTONIC_USEC=\(monotonicMicroseconds())"])
        case .log(let level, let message, let fields): log.log(level, message, fields)
        case .setLogLevel(let level): log.maxLevel = level
        case .exit(let code): loop.exit(code: code.rawValue)
        }
    }

    /// The state directory's answer to the self-report, once the wall clock has reached `notBefore` (looked at again
    /// every 10 s at most, so a clock set forward meanwhile ends the wait), with the clock and the uptime then.
    private func supplySelfReport(_ needs: SelfReportNeeds) {
        let now = wallClock().seconds
        if let until = needs.notBefore.map(UInt64.init), until > now, until - now <= UInt64(SelfReport.longestClockWait) {
            let wait = min(Duration.seconds(Int64(until - now)) + .milliseconds(20), .seconds(10))
            selfReportWait = try? loop.addTimer(after: wait) { [unowned self] in self.supplySelfReport(needs) }
            if selfReportWait != nil { return }
        }
        var supply = SelfReportStore.supply(needs)
        supply.uptime = UInt32(clamping: (loop.nowMicroseconds &- telemetryClock.startedAt) / 1_000_000)
        handle(.selfReportSupplied(supply))
    }

    private func periodic(_ k: Lifecycle.PeriodicTimer) -> EventSource? {
        switch k {
        case .telemetry: telemetryTimer
        case .addressRotation: addressTimer
        case .eidRotation: eidTimer
        }
    }

    private func open(_ kind: BackendKind, mayBringUp: Bool) {
        let device = lifecycle.device
        // The device may have become a kernel one at a reload (from an H4 device): its events from now on.
        startWatcher()
        // A reload may name another device: its lock first (held by another beacond: retried like a busy device).
        if let busy = stateLock.acquire(device.description, loop: loop) {
            generation += 1
            return handle(.openFailed(BackendFailure(message: "Cannot open \(device): \(busy)")), from: generation)
        }
        let b: AdvertisingBackend
        if kind == .mgmt, case .kernel(let index) = device {
            b = MgmtBackend(device: device, index: index, loop: loop, log: log, mayPowerOn: mayBringUp, owned: owned)
        } else {
            b = HCIBackend(device: device, loop: loop, log: log, mayBringUp: mayBringUp, owned: owned, addresses: addresses)
        }
        generation += 1
        let gen = generation
        backend = b
        b.onEvent = { [unowned self] event in
            switch event {
            case .lost(let f): self.handle(.lost(f), from: gen)
            case .reapply(let reason, let delay, let fields):
                self.handle(.reapply(reason: reason, delay: delay, fields: fields, at: .microseconds(self.loop.nowMicroseconds)), from: gen)
            case .changed(let onAir): self.handle(.onAirChanged(onAir), from: gen)
            }
        }
        b.open { [unowned self] failure in self.handle(failure.map { .openFailed($0) } ?? .opened(b.traits), from: gen) }
    }

    /// Takes beacond's advertising off the controller through the open backend, or, with none open, removes the
    /// mgmt instances the kernel keeps for beacond (raw HCI sets need an open controller: the next start removes
    /// them).
    private func stopAdvertising() {
        let gen = generation
        let done = { [unowned self] in self.handle(.stopped, from: gen) }
        if let b = backend { return b.stop(done) }
        if case .kernel(let index) = lifecycle.device, !owned[lifecycle.device.description, .mgmtInstances].isEmpty {
            return MgmtInstanceRemoval.removeLeftovers(owned: owned, index: index, device: lifecycle.device, loop: loop, log: log, done)
        }
        handle(.stopped)
    }

    /// Takes the kernel device down and up again (HCIBackend.powerCycle). It blocks while the kernel closes and sets
    /// up the device (with a controller that answers nothing, until the kernel's own 10 s timeout), as bringing a
    /// device up at an open does.
    private func powerCycle() {
        guard case .kernel(let index) = lifecycle.device else {
            return handle(.powerCycled(BackendFailure(message: "\(lifecycle.device) is not a kernel device", level: .warning)))
        }
        handle(.powerCycled(HCIBackend.powerCycle(index: index)))
    }

    // MARK: kernel device events

    /// For hciN: listen to the kernel's device events so a returning adapter is used at once, not at the next retry.
    /// Started when a kernel device is first opened (at start or after a reload); it follows the device named now.
    private func startWatcher() {
        guard case .kernel = lifecycle.device, watcher == nil else { return }
        do {
            let w = try DeviceWatcher()
            watcher = w
            watcherSource = try loop.addReader(fd: w.fd) { [unowned self] _ in
                for e in w.read() {
                    guard case .kernel(let index) = self.lifecycle.device, e.index == index else { continue }
                    self.handle(.device(e.kind))
                }
            }
            log.debug("Watching hciN device events")
        } catch {
            log.debug("Not watching hciN device events: \(error)")
        }
    }
}
