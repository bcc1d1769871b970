// `beacond run`: keeps the configured beacon on the air. Owns policy: retry, reload, shutdown, status.
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

    private var connection: ControllerConnection?
    private var info: ControllerInfo?
    private var family: CommandFamily?
    /// What the config asked for, as last confirmed on air by the controller.
    private var applied: AdvertisingRequest?
    /// The interval actually used (may be raised for an old controller).
    private var effectiveInterval: AdvertisingInterval?
    private var reportedTxPower: Int8?

    private var retryTimer: EventSource?
    private var backoff = Backoff()
    private var readySent = false
    private var stopping = false
    /// A bring-up or reload procedure is running; a SIGHUP meanwhile is handled when it ends.
    private var busy = false
    private var reloadPending = false
    /// Between RELOADING=1 and its READY=1.
    private var reloading = false
    /// Bumped for every new connection so late callbacks of an old one are ignored.
    private var generation = 0
    private var lastStatus = ""
    /// False after the kernel reported our hciN taken down while we ran: someone meant it, so wait for it to come
    /// back up instead of bringing it up again ourselves.
    private var mayBringUp = true
    private var watcher: DeviceWatcher?
    private var watcherSource: EventSource?
    /// Re-applies after another program reset the controller or changed its advertising.
    private var reassertTimer: EventSource?
    private var reassertTimes: [UInt64] = []
    /// The controller refused a short interval although its version allows it: use the 100 ms floor from now on.
    private var intervalFloorForced = false
    /// The extended advertising set beacond uses. Handle 0 on a controller it owns; kernel devices are revisited
    /// by the mgmt backend.
    private let handle: UInt8 = 0

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
        startWatcher()
        log.info("beacond \(beacondVersion) starting: \(describe(config.beacon)) on \(device)", beaconFields())
        connect()
    }

    // MARK: connection and bring-up

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
            guard connection == nil else { return }
            // The controller is back: start over now, with a fresh backoff.
            backoff.reset()
            retryTimer?.disarm()
            connect()
        case .down:
            mayBringUp = false
            if connection != nil {
                dropConnection()
                retry(after: "\(device) was taken down; waiting for it to come up", level: .warning)
            }
        case .unregistered:
            if connection != nil {
                dropConnection()
                retry(after: "\(device) was removed; waiting for it to appear", level: .warning)
            }
        }
    }

    private func connect() {
        guard !stopping else { return }
        generation += 1
        let transport: Transport
        do {
            transport = try Transport.open(device, mayBringUp: mayBringUp)
        } catch {
            switch error {
            case .deviceAbsent:
                retry(after: "Waiting for \(device) to appear", level: .notice)
            case .deviceDown(_, let cap):
                if mayBringUp {
                    retry(after: "\(device) is down and beacond lacks \(cap) to bring it up; waiting for it to come up", level: .warning)
                } else {
                    retry(after: "Waiting for \(device) to come up", level: .notice)
                }
            case .permissionDenied(_, let cap, let e):
                fatal("Cannot use \(device): \(e); beacond needs \(cap)", code: .noPermission)
            case .system(_, let e) where e.errno == EAFNOSUPPORT:
                fatal("Cannot use \(device): this kernel or network namespace has no Bluetooth (AF_BLUETOOTH)", code: .unavailable)
            default:
                retry(after: "Cannot open \(error)", level: .warning)
            }
            return
        }
        let c: ControllerConnection
        do { c = try ControllerConnection(transport: transport, loop: loop) } catch {
            fatal("Failed to watch \(device): \(error)", code: .failure)
            return
        }
        let gen = generation
        c.onClosed = { [unowned self] reason in
            guard gen == self.generation else { return }
            self.lost(reason)
        }
        c.onUnsolicited = { [unowned self] event in
            guard gen == self.generation else { return }
            self.unsolicited(event)
        }
        c.onForeignCommand = { [unowned self] opcode, params in
            guard gen == self.generation else { return }
            self.foreignCommand(opcode, params)
        }
        connection = c
        bringUp(gen)
    }

    private func bringUp(_ gen: Int) {
        guard let c = connection else { return }
        busy = true
        setStatus("Probing the controller on \(device)")
        // beacond owns an H4 controller and resets it to a known state; a kernel-owned one is never reset.
        var steps: [Step] = c.transport.ownsController ? [Step(.reset)] : []
        steps += ControllerInfo.probe.map { Step($0) }
        c.run(steps) { [unowned self] result in
            guard gen == self.generation, !self.stopping else { return }
            switch result {
            case .failure(let f):
                self.busy = false
                self.commandFailed("probe the controller on \(self.device)", f)
            case .success(let replies):
                do {
                    let probed = try ControllerInfo(probeReplies: Array(replies.suffix(3)))
                    self.info = probed
                    self.family = probed.preferredFamily
                    self.log.info("Controller on \(self.device): Bluetooth \(probed.version.coreVersionName), "
                        + "manufacturer \(hex16(probed.version.manufacturer)), using \(probed.preferredFamily) advertising commands")
                    if probed.bitmapDisagrees {
                        self.log.debug("The controller's Supported Commands bitmap and its LE Extended Advertising feature bit disagree; following the feature bit, as the kernel does")
                    }
                } catch {
                    self.busy = false
                    self.dropConnection()
                    self.retry(after: "The controller on \(self.device) sent a malformed probe reply", level: .err)
                    return
                }
                self.apply(self.request(for: self.config), gen: gen, mayRestart: true, allowSwitch: true) { [unowned self] in
                    self.busy = false
                    self.runPendingReload()
                }
            }
        }
    }

    private func request(for config: BeaconConfiguration) -> AdvertisingRequest {
        AdvertisingRequest(data: config.beacon.advertisingData, type: config.advertising.legacyType,
                           interval: config.advertising.interval, txPower: config.advertising.txPower)
    }

    /// Puts `wanted` on the air: a data-only change keeps advertising enabled, anything else runs the full start
    /// sequence. Calls `done` when the controller confirmed (or after scheduling a retry).
    private func apply(_ wanted: AdvertisingRequest, gen: Int, mayRestart: Bool, allowSwitch: Bool, done: @escaping () -> Void) {
        guard let c = connection, let info, let family else { return done() }
        if let applied, !applied.needsRestart(for: wanted), !mayRestart || applied == wanted {
            guard applied != wanted else { return done() }
            c.run(AdvertisingPlan.updateData(wanted.data, family: family, handle: handle)) { [unowned self] result in
                guard gen == self.generation, !self.stopping else { return done() }
                switch result {
                case .success:
                    self.applied = wanted
                    self.confirmed(change: "data updated")
                    done()
                case .failure(let f):
                    self.commandFailed("update the advertising data on \(self.device)", f)
                    done()
                }
            }
            return
        }
        var effective = wanted
        var (interval, raised) = AdvertisingPlan.effectiveInterval(wanted, on: info)
        if intervalFloorForced && wanted.type != .connectableUndirected && interval < .pre50NonConnectableFloor {
            (interval, raised) = (.pre50NonConnectableFloor, false)
            effective.interval = interval
        }
        if raised {
            log.warning("The controller on \(device) is Bluetooth \(info.version.coreVersionName); before 5.0 non-connectable advertising cannot go below 100 ms: raising the interval from \(wanted.interval) to \(interval)")
            effective.interval = interval
        }
        if family == .legacy, let tx = wanted.txPower {
            log.warning("tx_power = \(tx) is ignored: the controller on \(device) uses legacy advertising commands, which cannot set the TX power")
        }
        c.run(AdvertisingPlan.start(effective, family: family, handle: handle)) { [unowned self] result in
            guard gen == self.generation, !self.stopping else { return done() }
            switch result {
            case .success(let replies):
                let steps = AdvertisingPlan.start(effective, family: family, handle: self.handle)
                self.reportedTxPower = zip(steps, replies).compactMap { AdvertisingPlan.reportedTxPower(for: $0.command, returnParameters: $1) }.last
                self.applied = wanted
                self.effectiveInterval = effective.interval
                self.backoff.reset()
                self.confirmed(change: nil)
                done()
            case .failure(let f):
                if f.index == 0, f.error.status == .commandDisallowed, allowSwitch {
                    // The mixing rule: the other family was used since the controller's last reset.
                    self.log.notice("\(f.error.opcode) was refused with Command Disallowed on \(self.device): \(family.other) advertising commands are in use there; switching to \(family.other) commands",
                                    self.hciFields(f.error))
                    self.family = family.other
                    self.applied = nil
                    self.apply(wanted, gen: gen, mayRestart: true, allowSwitch: false, done: done)
                    return
                }
                self.applied = nil
                if let s = f.error.status, s == .invalidHCICommandParameters || s == .unsupportedFeatureOrParameterValue {
                    let isParameters: Bool
                    switch f.step.command {
                    case .leSetAdvertisingParameters, .leSetExtendedAdvertisingParameters: isParameters = true
                    default: isParameters = false
                    }
                    if isParameters && !self.intervalFloorForced && effective.type != .connectableUndirected
                        && effective.interval < .pre50NonConnectableFloor
                    {
                        // A safe adjustment exists: many controllers still hold non-connectable advertising to
                        // the pre-5.0 floor of 100 ms. Use it and try again at once.
                        self.log.warning("The controller on \(self.device) refused \(self.settingsRefused(by: f.step.command, effective)) (\(f.error)); raising the interval to \(AdvertisingInterval.pre50NonConnectableFloor), the floor older controllers enforce",
                                         self.hciFields(f.error))
                        self.intervalFloorForced = true
                        self.apply(wanted, gen: gen, mayRestart: true, allowSwitch: false, done: done)
                        return
                    }
                    self.log.error("The controller on \(self.device) refused \(self.settingsRefused(by: f.step.command, effective)) (\(f.error)); check [advertising] in \(self.options.configPath)",
                                   self.hciFields(f.error))
                }
                self.commandFailed("enable advertising on \(self.device)", f)
                done()
            }
        }
    }

    /// Which setting a refused command carried, for the log.
    private func settingsRefused(by command: HCICommand, _ r: AdvertisingRequest) -> String {
        switch command {
        case .leSetAdvertisingParameters, .leSetExtendedAdvertisingParameters:
            "the advertising parameters (interval_ms \(r.interval), \(r.type.pduName)\(r.txPower.map { ", tx_power \($0) dBm" } ?? ""))"
        case .leSetAdvertisingData, .leSetExtendedAdvertisingData: "the advertising data"
        default: "\(command.opcode)"
        }
    }

    private func confirmed(change: String?) {
        let s = advertisingStatus()
        if let change {
            log.notice("\(s) (\(change))", beaconFields())
        } else {
            log.notice(s, beaconFields())
        }
        setStatus(s, ready: true)
    }

    private func advertisingStatus() -> String {
        var s = "Advertising \(describe(config.beacon)) every \(effectiveInterval ?? config.advertising.interval) on \(device)"
        var details = [family?.description ?? "?"]
        if config.advertising.connectable { details.append("connectable") }
        if let tx = reportedTxPower, tx != 0x7F { details.append("TX \(tx) dBm") }
        s += " (" + details.joined(separator: ", ") + ")"
        return s
    }

    private func describe(_ b: IBeacon) -> String { "\(b.uuid) major \(b.major) minor \(b.minor)" }

    // MARK: failures

    private func commandFailed(_ what: String, _ f: StepFailure) {
        let message = "Failed to \(what): \(f.error)"
        dropConnection()
        retry(after: message, level: .err, fields: hciFields(f.error))
    }

    private func lost(_ reason: TransportError) {
        connection = nil
        applied = nil
        busy = false
        if stopping { return finish() }
        if case .permissionDenied(_, let cap, let e) = reason {
            return fatal("Cannot send commands to \(device): \(e); beacond needs \(cap)", code: .noPermission)
        }
        retry(after: "Lost the controller (\(reason))", level: .warning)
    }

    private func unsolicited(_ event: HCIEvent) {
        switch event {
        case .hardwareError(let code):
            dropConnection()
            retry(after: "The controller on \(device) reported Hardware Error \(hex8(code)); its advertising state is gone, starting over", level: .err)
        default:
            break
        }
    }

    /// Another program talked to our kernel device. If what it sent can take our advertising off the air, put it
    /// back shortly (after its own sequence has had time to finish).
    private func foreignCommand(_ opcode: Opcode, _ p: [UInt8]) {
        guard applied != nil, !busy, !stopping, let family else { return }
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
        let now = loop.nowMicroseconds
        reassertTimes = reassertTimes.filter { now - $0 < 60_000_000 } + [now]
        if reassertTimes.count > 5 {
            let delay = backoff.next()
            log.warning("Another program keeps changing advertising on \(device) (last: \(opcode)); re-applying the beacon in \(formatDuration(delay)). If bluetoothd runs, use backend = \"mgmt\"",
                        ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(opcode.rawValue))"])
            reassertTimer?.rearm(after: delay)
        } else {
            log.warning("Another program sent \(opcode) to \(device); re-applying the beacon",
                        ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(opcode.rawValue))"])
            reassertTimer?.rearm(after: opcode == .reset ? .milliseconds(500) : .milliseconds(100))
        }
    }

    private func reassert() {
        guard connection != nil, !stopping else { return }
        if busy {
            reassertTimer?.rearm(after: .milliseconds(100))
            return
        }
        busy = true
        applied = nil
        apply(request(for: config), gen: generation, mayRestart: true, allowSwitch: true) { [unowned self] in
            self.busy = false
            self.runPendingReload()
        }
    }

    private func dropConnection() {
        generation += 1
        connection?.close()
        connection = nil
        applied = nil
        busy = false
    }

    /// Logs `message`, says in STATUS when the next attempt comes, and arms the retry timer.
    private func retry(after message: String, level: LogLevel, fields: [String] = []) {
        guard !stopping else { return }
        let delay = backoff.next()
        let line = "\(message), retrying in \(formatDuration(delay))"
        log.log(level, line, fields + ["HCI_DEVICE=\(device)"])
        // Settled into waiting counts as ready: boot must not wait for a controller.
        setStatus(line, ready: true)
        retryTimer?.rearm(after: delay)
    }

    private func fatal(_ message: String, code: ExitCode) {
        log.error(message, ["HCI_DEVICE=\(device)"])
        Notifier.send(["STATUS=\(message)", "EXIT_STATUS=\(code.rawValue)"])
        connection?.close()
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

    /// Ends a reload: READY=1 with whatever STATUS is true now.
    private func reloadDone() {
        reloading = false
        Notifier.send(["READY=1", "STATUS=\(lastStatus)"])
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

    private func performReload() {
        let path = options.configPath
        log.info("Reloading configuration from \(path)", ["CONFIG_FILE=\(path)"])
        let new: BeaconConfiguration
        do { new = try ConfigLoader.load(path) } catch {
            for d in error.diagnostics { log.error(d.formatted(path: error.path), configFields(error.path, d)) }
            log.warning("Keeping the previous configuration: \(path) has \(error.diagnostics.count) error\(error.diagnostics.count == 1 ? "" : "s")", ["CONFIG_FILE=\(path)"])
            let base = lastStatus.components(separatedBy: "; kept previous configuration:").first ?? lastStatus
            lastStatus = "\(base); kept previous configuration: \(error.summary)"
            reloadDone()
            return
        }
        let oldDevice = device
        config = new
        log.maxLevel = options.logLevel ?? new.daemon.logLevel ?? .info
        if device != oldDevice {
            log.notice("Controller changed from \(oldDevice) to \(device)")
            stopAdvertising { [unowned self] in
                self.dropConnection()
                self.backoff.reset()
                self.reloadDone()
                self.connect()
            }
            return
        }
        guard connection != nil, applied != nil else {
            // Not on air right now: the next attempt uses the new configuration.
            reloadDone()
            return
        }
        busy = true
        apply(request(for: new), gen: generation, mayRestart: false, allowSwitch: true) { [unowned self] in
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
        do {
            // The controller gets 3 s to confirm; an unanswered disable must not hold up shutdown.
            _ = try loop.addTimer(after: .seconds(3)) { [unowned self] in
                self.log.warning("The controller on \(self.device) did not confirm advertising disabled within 3 s; exiting anyway")
                self.finish()
            }
        } catch {
            return finish()
        }
        stopAdvertising { [unowned self] in self.finish() }
    }

    private func stopAdvertising(_ done: @escaping () -> Void) {
        guard let c = connection, let family, info != nil else { return done() }
        c.run(AdvertisingPlan.stop(family: family, handle: handle)) { [unowned self] result in
            switch result {
            case .success: self.log.info("Advertising disabled on \(self.device)")
            case .failure(let f): self.log.warning("Failed to disable advertising on \(self.device): \(f.error)", self.hciFields(f.error))
            }
            done()
        }
    }

    private func finish() {
        connection?.close()
        connection = nil
        loop.exit(code: ExitCode.success.rawValue)
    }

    // MARK: journal fields

    private func beaconFields() -> [String] {
        ["BEACON_UUID=\(config.beacon.uuid)", "BEACON_MAJOR=\(config.beacon.major)", "BEACON_MINOR=\(config.beacon.minor)",
         "HCI_DEVICE=\(device)"]
    }

    private func hciFields(_ e: CommandError) -> [String] {
        var f = ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(e.opcode.rawValue))"]
        if let s = e.status { f.append("HCI_STATUS=\(hex8(s.rawValue))") }
        return f
    }
}

private func configFields(_ path: String, _ d: ConfigDiagnostic) -> [String] {
    var f = ["CONFIG_FILE=\(path)"]
    if let l = d.location { f.append("CONFIG_LINE=\(l.line)") }
    return f
}

extension String {
    /// Splits on a separator string (no Foundation).
    func components(separatedBy sep: String) -> [String] {
        var parts: [String] = []
        var rest = Substring(self)
        while let r = rest.firstRange(of: sep) {
            parts.append(String(rest[..<r.lowerBound]))
            rest = rest[r.upperBound...]
        }
        parts.append(String(rest))
        return parts
    }
}
