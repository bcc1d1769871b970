// `beacond run`: keeps the configured beacon on the air. Owns policy — which backend, retry and backoff, reload,
// shutdown, readiness and status — and leaves the controller conversation to the backends.
import BeaconCore
import BluetoothHCI
import Glibc
import HCIHost
import HCITransport
import SystemdSupport

final class Daemon {
    private let loop: EventLoop
    private let log: Logger
    private let options: RunOptions
    private var config: BeaconConfiguration

    private var backend: AdvertisingBackend?
    /// Backend `auto` fell back to raw HCI because the management interface refused beacond.
    private var mgmtRefused = false
    private var lastBackendNote = ""
    /// The mgmt instance beacond had, taken again after a reconnect.
    private var mgmtInstance: UInt8?
    /// What the config asked for, as last confirmed on air, and how it went out.
    private var applied: AdvertisingRequest?
    private var onAir: OnAir?

    private var retryTimer: EventSource?
    private var reassertTimer: EventSource?
    private var reassertTimes: [UInt64] = []
    private var backoff = Backoff()
    private var readySent = false
    private var stopping = false
    /// A bring-up, reload or re-apply is running; a SIGHUP meanwhile is handled when it ends.
    private var busy = false
    private var reloadPending = false
    /// Between RELOADING=1 and its READY=1.
    private var reloading = false
    /// Bumped for every new backend so late callbacks of an old one are ignored.
    private var generation = 0
    private var lastStatus = ""
    /// False after the kernel reported our hciN taken down while we ran: someone meant it, so wait for it to come
    /// back up instead of bringing it up again ourselves.
    private var mayBringUp = true
    private var watcher: DeviceWatcher?
    private var watcherSource: EventSource?

    private var device: DeviceSpec { options.device ?? config.controller.device }

    private init(loop: EventLoop, log: Logger, options: RunOptions, config: BeaconConfiguration) {
        self.loop = loop
        self.log = log
        self.options = options
        self.config = config
    }

    // MARK: entry

    static func run(_ options: RunOptions) -> ExitCode {
        let bootLog = Logger(level: options.logLevel ?? .info)
        let config: BeaconConfiguration
        do { config = try ConfigLoader.load(options.configPath) } catch {
            for d in error.diagnostics {
                bootLog.error(d.formatted(path: error.path), configFields(error.path, d))
            }
            Notifier.send(["STATUS=Invalid configuration: \(error.summary)", "EXIT_STATUS=\(ExitCode.config.rawValue)"])
            return .config
        }
        let log = Logger(level: options.logLevel ?? config.daemon.logLevel ?? .info)
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            log.error("Failed to set up the event loop: \(error)")
            Notifier.send(["ERRNO=\(error.errno)"])
            return .failure
        }
        let daemon = Daemon(loop: loop, log: log, options: options, config: config)
        do {
            try daemon.start()
            let code = try loop.run()
            return ExitCode(rawValue: code) ?? .failure
        } catch {
            log.error("Event loop failed: \(error)")
            Notifier.send(["ERRNO=\(error.errno)"])
            return .failure
        }
    }

    private func start() throws(SystemdError) {
        _ = try loop.addSignal(SIGTERM) { [unowned self] in self.stop(signal: "SIGTERM") }
        _ = try loop.addSignal(SIGINT) { [unowned self] in self.stop(signal: "SIGINT") }
        _ = try loop.addSignal(SIGHUP) { [unowned self] in self.reload() }
        retryTimer = try loop.addIdleTimer { [unowned self] in self.connect() }
        reassertTimer = try loop.addIdleTimer { [unowned self] in self.reassert() }
        try loop.enableWatchdog()
        log.info("beacond \(beacondVersion) starting: \(describe(config.beacon)) on \(device)", beaconFields())
        startWatcher()
        connect()
    }

    // MARK: backend choice and bring-up

    private func makeBackend() -> AdvertisingBackend {
        let kind: ControllerBackend
        let why: String
        switch device {
        case .kernel:
            switch config.controller.backend {
            case .mgmt: (kind, why) = (.mgmt, "backend mgmt")
            case .hci: (kind, why) = (.hci, "backend hci")
            case .auto where mgmtRefused:
                (kind, why) = (.hci, "backend auto: the management interface refused beacond")
            case .auto: (kind, why) = (.mgmt, "backend auto: cooperates with bluetoothd")
            }
        default:
            (kind, why) = (.hci, "H4 device: beacond owns the controller")
        }
        let note = kind == .mgmt ? "Using the kernel's management interface for \(device) (\(why))"
                                 : "Using raw HCI commands on \(device) (\(why))"
        if note != lastBackendNote {
            lastBackendNote = note
            log.info(note, ["HCI_DEVICE=\(device)"])
        }
        if kind == .mgmt, case .kernel(let index) = device {
            return MgmtBackend(device: device, index: index, loop: loop, log: log, mayPowerOn: mayBringUp, instance: mgmtInstance)
        }
        return HCIBackend(device: device, loop: loop, log: log, mayBringUp: mayBringUp)
    }

    private func connect() {
        guard !stopping else { return }
        dropBackend()
        let gen = generation
        let b = makeBackend()
        backend = b
        b.onEvent = { [unowned self] event in
            guard gen == self.generation else { return }
            self.backendEvent(event)
        }
        busy = true
        setStatus(b.name == "mgmt" ? "Probing \(device) through the management interface" : "Probing the controller on \(device)")
        b.open { [unowned self] failure in
            guard gen == self.generation, !self.stopping else { return }
            if let failure {
                self.busy = false
                return self.failed(failure)
            }
            self.apply(self.request(for: self.config), dataOnlyAllowed: false) { [unowned self] in
                self.busy = false
                self.runPendingReload()
            }
        }
    }

    private func request(for config: BeaconConfiguration) -> AdvertisingRequest {
        AdvertisingRequest(data: config.beacon.advertisingData, type: config.advertising.legacyType,
                           interval: config.advertising.interval, txPower: config.advertising.txPower)
    }

    private func apply(_ wanted: AdvertisingRequest, dataOnlyAllowed: Bool, done: @escaping () -> Void) {
        guard let b = backend else { return done() }
        let gen = generation
        let dataOnly = dataOnlyAllowed && applied.map { !$0.needsRestart(for: wanted) } == true
        b.apply(wanted, dataOnlyAllowed: dataOnlyAllowed) { [unowned self] result in
            guard gen == self.generation, !self.stopping else { return done() }
            switch result {
            case .success(let onAir):
                let changed = self.applied != wanted
                self.applied = wanted
                self.onAir = onAir
                self.backoff.reset()
                if changed || !dataOnly { self.confirmed(change: dataOnly ? "data updated" : nil) }
            case .failure(let f):
                self.applied = nil
                self.failed(f)
            }
            done()
        }
    }

    private func confirmed(change: String?) {
        let s = advertisingStatus()
        log.notice(change.map { "\(s) (\($0))" } ?? s, beaconFields())
        if onAir?.intervalIsKernelDefault == true {
            log.warning("The configured interval \(config.advertising.interval) is not used: the kernel's management interface here can only advertise at its default interval (about 1.28 s). Set backend = \"hci\" when the interval matters.")
        }
        setStatus(s, ready: true)
    }

    private func advertisingStatus() -> String {
        let every = onAir.map { $0.intervalIsKernelDefault ? "about 1.28 s (kernel default)" : $0.interval.description }
            ?? config.advertising.interval.description
        var details = onAir?.details ?? []
        if config.advertising.connectable { details.append("connectable") }
        return "Advertising \(describe(config.beacon)) every \(every) on \(device) (\(details.joined(separator: ", ")))"
    }

    private func describe(_ b: IBeacon) -> String { "\(b.uuid) major \(b.major) minor \(b.minor)" }

    // MARK: failures and events

    private func failed(_ f: BackendFailure) {
        if f.fatal == .noPermission, backend?.name == "mgmt", config.controller.backend == .auto, !mgmtRefused {
            mgmtRefused = true
            log.notice("\(f.message); backend auto falls back to raw HCI commands", f.fields)
            return connect()
        }
        if let code = f.fatal { return fatal(f.message, code: code) }
        dropBackend()
        retry(after: f.message, level: f.level, fields: f.fields)
    }

    private func backendEvent(_ e: BackendEvent) {
        switch e {
        case .lost(let f):
            busy = false
            applied = nil
            if stopping { return finish() }
            failed(f)
        case .reapply(let reason, let delay, let fields):
            guard !stopping else { return }
            applied = nil
            let now = loop.nowMicroseconds
            reassertTimes = reassertTimes.filter { now &- $0 < 60_000_000 } + [now]
            if reassertTimes.count > 5 {
                let d = backoff.next()
                let hint = backend?.name == "hci" ? ". If bluetoothd runs, use backend = \"mgmt\"" : ""
                log.warning("\(reason), again; re-applying the beacon in \(formatDuration(d))\(hint)", fields)
                reassertTimer?.rearm(after: d)
            } else {
                log.warning("\(reason); re-applying the beacon", fields)
                reassertTimer?.rearm(after: delay)
            }
        }
    }

    private func reassert() {
        guard backend != nil, !stopping else { return }
        if busy {
            reassertTimer?.rearm(after: .milliseconds(100))
            return
        }
        busy = true
        apply(request(for: config), dataOnlyAllowed: false) { [unowned self] in
            self.busy = false
            self.runPendingReload()
        }
    }

    private func dropBackend() {
        generation += 1
        if let m = backend as? MgmtBackend, let i = m.currentInstance { mgmtInstance = i }
        backend?.close()
        backend = nil
        applied = nil
        busy = false
    }

    /// Logs `message`, says in STATUS when the next attempt comes, and arms the retry timer.
    private func retry(after message: String, level: LogLevel, fields: [String] = []) {
        guard !stopping else { return }
        let delay = backoff.next()
        let line = "\(message), retrying in \(formatDuration(delay))"
        log.log(level, line, fields + (fields.contains { $0.hasPrefix("HCI_DEVICE=") } ? [] : ["HCI_DEVICE=\(device)"]))
        // Settled into waiting counts as ready: boot must not wait for a controller.
        setStatus(line, ready: true)
        retryTimer?.rearm(after: delay)
    }

    private func fatal(_ message: String, code: ExitCode) {
        log.error(message, ["HCI_DEVICE=\(device)"])
        Notifier.send(["STATUS=\(message)", "EXIT_STATUS=\(code.rawValue)"])
        dropBackend()
        loop.exit(code: code.rawValue)
    }

    /// Sends STATUS when it changed. `ready`: this state also completes start-up, so READY=1 goes with the first one.
    private func setStatus(_ s: String, ready: Bool = false) {
        if ready && !readySent {
            readySent = true
            lastStatus = s
            Notifier.send(["READY=1", "STATUS=\(s)"])
            return
        }
        guard s != lastStatus else { return }
        lastStatus = s
        // During a reload the final state goes out with its READY=1.
        if !reloading { Notifier.send(["STATUS=\(s)"]) }
    }

    // MARK: kernel device events

    /// For hciN: listen to the kernel's device events so a returning adapter is used at once, not at the next retry.
    private func startWatcher() {
        guard case .kernel = device, watcher == nil else { return }
        do {
            let w = try DeviceWatcher()
            watcher = w
            watcherSource = try loop.addReader(fd: w.fd) { [unowned self] _ in
                for e in w.read() { self.deviceEvent(e) }
            }
        } catch {
            log.debug("Not watching hciN device events: \(error)")
        }
    }

    private func deviceEvent(_ e: KernelDeviceEvent) {
        guard case .kernel(let index) = device, e.index == index, !stopping else { return }
        log.debug("Kernel: \(device) \(e.kind)")
        switch e.kind {
        case .registered, .up:
            if e.kind == .up { mayBringUp = true }
            guard backend == nil || applied == nil && !busy else { return }
            // The controller is back: start over now, with a fresh backoff.
            backoff.reset()
            retryTimer?.disarm()
            connect()
        case .down:
            mayBringUp = false
            if backend != nil {
                dropBackend()
                retry(after: "\(device) was taken down; waiting for it to come up", level: .warning)
            }
        case .unregistered:
            if backend != nil {
                dropBackend()
                retry(after: "\(device) was removed; waiting for it to appear", level: .warning)
            }
        }
    }

    // MARK: reload

    private func reload() {
        guard !stopping else { return }
        Notifier.send(["RELOADING=1", "MONOTONIC_USEC=\(Notifier.monotonicMicroseconds())"])
        reloading = true
        if busy {
            reloadPending = true
            return
        }
        performReload()
    }

    private func runPendingReload() {
        guard reloadPending, !stopping else { return }
        reloadPending = false
        performReload()
    }

    /// Ends a reload: READY=1 with whatever STATUS is true now.
    private func reloadDone() {
        reloading = false
        Notifier.send(["READY=1", "STATUS=\(lastStatus)"])
    }

    private func performReload() {
        let path = options.configPath
        log.info("Reloading configuration from \(path)", ["CONFIG_FILE=\(path)"])
        let new: BeaconConfiguration
        do { new = try ConfigLoader.load(path) } catch {
            for d in error.diagnostics { log.error(d.formatted(path: error.path), configFields(error.path, d)) }
            log.warning("Keeping the previous configuration: \(path) has \(error.diagnostics.count) error\(error.diagnostics.count == 1 ? "" : "s")", ["CONFIG_FILE=\(path)"])
            // lastStatus stays the plain state: the note lasts in systemd until the state changes, and a second
            // bad reload does not stack notes.
            reloading = false
            Notifier.send(["READY=1", "STATUS=\(lastStatus); kept previous configuration: \(error.summary)"])
            return
        }
        let old = config
        config = new
        log.maxLevel = options.logLevel ?? new.daemon.logLevel ?? .info
        if device != (options.device ?? old.controller.device) || new.controller.backend != old.controller.backend {
            log.notice("Controller settings changed (now \(device), backend \(new.controller.backend.rawValue)); starting over")
            mgmtRefused = false
            let b = backend
            busy = true
            (b?.stop ?? { $0() }) { [unowned self] in
                self.dropBackend()
                self.backoff.reset()
                self.reloadDone()
                self.connect()
            }
            return
        }
        guard backend != nil, applied != nil else {
            // Not on air right now: the next attempt uses the new configuration.
            reloadDone()
            return
        }
        busy = true
        apply(request(for: new), dataOnlyAllowed: true) { [unowned self] in
            self.busy = false
            if self.applied != nil { self.setStatus(self.advertisingStatus()) }
            self.reloadDone()
            self.runPendingReload()
        }
    }

    // MARK: stop

    private func stop(signal: String) {
        guard !stopping else { return }
        stopping = true
        log.info("Received \(signal), disabling advertising and exiting")
        Notifier.send(["STOPPING=1", "STATUS=Stopping: disabling advertising"])
        retryTimer?.disarm()
        reassertTimer?.disarm()
        do {
            // The controller gets 3 s to confirm; an unanswered disable must not hold up shutdown.
            _ = try loop.addTimer(after: .seconds(3)) { [unowned self] in
                self.log.warning("The controller on \(self.device) did not confirm advertising disabled within 3 s; exiting anyway")
                self.finish()
            }
        } catch {
            return finish()
        }
        guard let b = backend else { return finish() }
        b.stop { [unowned self] in self.finish() }
    }

    private func finish() {
        backend?.close()
        backend = nil
        loop.exit(code: ExitCode.success.rawValue)
    }

    // MARK: journal fields

    private func beaconFields() -> [String] {
        ["BEACON_UUID=\(config.beacon.uuid)", "BEACON_MAJOR=\(config.beacon.major)", "BEACON_MINOR=\(config.beacon.minor)",
         "HCI_DEVICE=\(device)"]
    }
}

private func configFields(_ path: String, _ d: ConfigDiagnostic) -> [String] {
    var f = ["CONFIG_FILE=\(path)"]
    if let l = d.location { f.append("CONFIG_LINE=\(l.line)") }
    return f
}
