// `beacond scan`: passive LE scanning on the same transports as `run`, iBeacons ranged the way iOS does it.
import AESCipher
import BeaconCore
import BluetoothHCI
import Connections
import DaemonCore
import HCIHost
import HCITransport
import SystemCalls
import SystemdSupport

struct ScanOptions: Equatable {
    var device: DeviceSpec = .kernel(index: 0)
    var duration: Double?
    var uuid: BeaconUUID?
    var major: UInt16?
    var minor: UInt16?
    var json: Bool = false
    var all: Bool = false
    var filter: ScanFilter { ScanFilter(uuid: uuid, major: major, minor: minor, all: all) }
    /// `--calibrate`: every reading is kept (as counts) for the median at the end; `duration` says how long.
    var calibrate = false
    /// `--eid-keys`: the keyring to resolve Eddystone-EID frames with, and the periods either side of now to accept.
    var eidKeys: String?
    var eidWindow = 2
    /// `--expect`: config files (or directories of them) whose beacons must be heard; `timeout` bounds the wait and
    /// `metrics` is where the result goes for node_exporter.
    var expect: [String] = []
    var timeout: Double?
    var metrics: String?
}

final class Scanner {
    private let options: ScanOptions
    private let loop: EventLoop
    private let json: Bool
    private var connection: ControllerConnection?
    private var plan = ScanPlan(family: .legacy)
    /// Bounded: beyond `tableCapacity` senders the least recently heard one goes (the summary counts them).
    private var seen = ScanTable<ScanEntry>(capacity: Scanner.tableCapacity)
    static let tableCapacity = 1024
    private var exitCode: ExitCode = .success
    private var stopping = false
    /// `--eid-keys`: every key's EIDs around now, precomputed.
    private var resolver: EIDResolver?
    /// `--eid-keys`: the same keys, for the senders' resolvable private addresses.
    private var addressResolver: AddressResolver?
    /// `--expect` with EID beacons on a receiver whose clock the kernel calls unsynchronized.
    private var clockUnsynchronized = false
    /// `--expect`: the beacons the configs put on the air, what was heard of them, and since when.
    private var check: AirCheck?
    private var startedAt: (wall: UInt64, monotonic: UInt64) = (0, 0)

    private init(options: ScanOptions, loop: EventLoop) {
        self.options = options
        self.loop = loop
        // A check's report is for people (the journal, a terminal) unless JSON is asked for.
        json = options.json || (options.expect.isEmpty && !isTerminal(1))
    }

    static func run(_ options: ScanOptions) -> ExitCode {
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            Output.err("Error: cannot set up the event loop: \(error)\n")
            return .failure
        }
        let s = Scanner(options: options, loop: loop)
        if let path = options.eidKeys {
            do { s.resolver = try loadResolver(path, window: options.eidWindow) } catch { return Tools.report(error) }
            // One libgcrypt handle per key, keyed once (AES128 wipes its schedule when it goes).
            s.addressResolver = AddressResolver(keys: s.resolver!.keys.compactMap { k in k.key.map { (k.name, $0) } },
                                                cipher: { key in let aes = try AES128(key: key.bytes); return { try aes.encrypt($0) } })
        }
        if !options.expect.isEmpty {
            let check: AirCheck
            do { check = AirCheck(try ScanExpect.load(options.expect), cipher: { key, block in try AES128.encrypt(block, key: key) }) } catch {
                return Tools.report(error)
            }
            // An EID is judged by this receiver's clock: unsynchronized (at boot, before NTP), an EID beacon may be
            // reported missing or as a recording. Said, and in the metrics (the unit orders itself after
            // time-sync.target, which waits for the sync where systemd-time-wait-sync is enabled).
            if !check.eidKeys.isEmpty, systemClockSynchronized() == false {
                s.clockUnsynchronized = true
                Output.err("Warning: this receiver's clock is not synchronized (timedatectl): an Eddystone-EID beacon is judged by it, so one may be reported missing or as a recording when the clocks differ by more than \(AirCheck.eidSkew) s\n")
            }
            s.check = check
            if let m = options.metrics { s.check!.firstHeard = ScanExpect.firstHeard(from: ScanExpect.addressesPath(metrics: m)) }
            s.resolver = ScanExpect.resolver(for: check)
            // The table for now, before scanning starts (not at the first EID heard).
            _ = s.resolver?.resolve([UInt8](repeating: 0, count: 8), at: eidTimeCounter(unixSeconds: wallClock().seconds))
        }
        do {
            try s.start()
            _ = try loop.run()
        } catch {
            Output.err("Error: \(error)\n")
            return .failure
        }
        return s.exitCode
    }

    private func start() throws(SystemError) {
        _ = try loop.addSignal(ProcessSignal.interrupt) { [unowned self] in self.stop() }
        _ = try loop.addSignal(ProcessSignal.terminate) { [unowned self] in self.stop() }
        if let d = check != nil ? options.timeout ?? Self.defaultTimeout : options.duration {
            _ = try loop.addTimer(after: .milliseconds(Int64(d * 1000))) { [unowned self] in self.stop() }
        }
        let now = wallClock()
        startedAt = (now.seconds * 1_000_000 + UInt64(now.milliseconds) * 1000, loop.nowMicroseconds)
        if let check {
            if !json {
                let files = Set(check.entries.map(\.expected.configPath)).count
                Output.out("Listening on \(options.device) for \(check.entries.count) beacon\(check.entries.count == 1 ? "" : "s") from \(files) config file\(files == 1 ? "" : "s") (at most \(decimal(options.timeout ?? Self.defaultTimeout, 1)) s)\n")
            }
        } else {
            scheduleRefresh()
        }
        let transport: Transport
        do { transport = try Transport.open(options.device, mayBringUp: true) } catch {
            let f = HCIDecisions.opening(options.device.description, error.problem, mayBringUp: true)
            return fail(f.message, f.fatal ?? .unavailable)
        }
        let c = try ControllerConnection(transport: transport, loop: loop)
        connection = c
        c.onClosed = { [unowned self] reason in self.fail("Lost the controller (\(reason))", .unavailable) }
        c.onUnsolicited = { [unowned self] event in event.advertisingReports.forEach { self.record($0) } }
        c.probe(then: ScanPlan.eventMasks(ownsController: transport.ownsController)) { [unowned self] result in
            switch result {
            case .failure(let f): self.fail(HCIDecisions.scanProbeFailed(f, device: "\(self.options.device)"), .unavailable)
            case .success(let info):
                self.plan = ScanPlan(family: info.preferredFamily)
                self.startScanning()
            }
        }
    }

    private func startScanning() {
        guard let c = connection, !stopping else { return }
        c.run(plan.startSteps) { [unowned self] result in
            if case .failure(let f) = result {
                if self.plan.startFailed(f) { return self.startScanning() }
                self.fail("Failed to start scanning on \(self.options.device): \(f.error)", .unavailable)
            } else if !self.json && self.check == nil {
                self.render()
            }
        }
    }

    /// The keyring file and every key file it names (relative ones beside it, or in $CREDENTIALS_DIRECTORY).
    static func loadResolver(_ path: String, window: Int) throws(ConfigError) -> EIDResolver {
        disableCoreDumps()  // a keyring holds keys
        var keys: [EIDKey]
        do { keys = try EIDKeyring.parse(try ConfigLoader.readBytes(path, limit: EIDKeyring.maximumSize)) } catch let e as ConfigError { throw e } catch let e as ConfigDiagnostics {
            throw ConfigError(path: path, diagnostics: e.items)
        } catch { throw ConfigError(path: path, diagnostics: [ConfigDiagnostic("\(error)", at: nil)]) }
        var problems: [ConfigDiagnostic] = []
        for i in keys.indices {
            guard let file = keys[i].keyFile else { continue }
            switch ConfigLoader.readKey(ConfigLoader.keyPath(file, configPath: path)) {
            case .success(let k): keys[i].key = k
            case .failure(let why):
                let sentence = why.sentence(file, in: ConfigLoader.keyDirectory(configPath: path))
                problems.append(ConfigDiagnostic("'identity_key_file' of \"\(keys[i].name)\": \(sentence)", at: keys[i].keyFileLocation,
                                                 key: "beacon.identity_key_file"))
            }
        }
        if !problems.isEmpty { throw ConfigError(path: path, diagnostics: problems) }
        let entries = keys.count * (2 * window + 1)
        guard entries <= EIDResolver.maximumEntries else {
            throw ConfigError(path: path, diagnostics: [ConfigDiagnostic(
                "\(keys.count) keys with --eid-window \(window) make \(entries) EIDs to hold, more than the \(EIDResolver.maximumEntries) allowed: give a smaller window (it only needs to cover how far the beacons' clocks may be off)", at: nil)])
        }
        var resolver = EIDResolver(keys: keys, window: window, cipher: { key, block in try AES128.encrypt(block, key: key) })
        // The table for now, before scanning starts (not at the first EID heard).
        _ = resolver.resolve([UInt8](repeating: 0, count: 8), at: eidTimeCounter(unixSeconds: wallClock().seconds))
        return resolver
    }

    /// How long `--expect` listens without `--timeout`.
    static let defaultTimeout = 30.0

    private func record(_ r: AdvertisingReport) {
        guard !r.isScanResponse else { return }
        let frame = BeaconFrame(advertisingData: r.data)
        if check != nil {
            let now = wallClock()
            var match: AirCheck.EIDMatch?
            if case .eddystoneEID(let e) = frame {
                let counter = eidTimeCounter(unixSeconds: now.seconds)
                match = resolver?.resolve(e.eid, at: counter).map { AirCheck.EIDMatch(key: $0.index, periodStart: $0.timeCounter, heardAt: counter) }
            }
            if check!.record(frame, r, at: now.seconds * 1_000_000 + UInt64(now.milliseconds) * 1000, eidMatch: match), check!.complete { stop() }
            return
        }
        guard options.filter.admits(frame) else { return }
        var match: EIDResolver.Match?
        if case .eddystoneEID(let e) = frame { match = resolver?.resolve(e.eid, at: eidTimeCounter(unixSeconds: wallClock().seconds)) }
        let now = loop.nowMicroseconds
        let resolvedAddress = r.addressType == 1 ? addressResolver?.resolve(r.address, at: now) : nil
        // A resolved beacon is one entry whatever its EID and address; any other frame one entry per key.
        seen.record(match.map { "eid-resolved/\($0.name)" } ?? ScanEntry.key(for: frame, r), make: {
            ScanEntry(frame: frame, report: r, calibrating: options.calibrate)
        }) { entry in
            if match != nil { (entry.frame, entry.resolved) = (frame, match) }
            entry.heard(r, at: now)
            entry.resolvedAddress = resolvedAddress
        }
    }

    private func scheduleRefresh() {
        _ = try? loop.addTimer(after: .seconds(1)) { [unowned self] in
            guard !self.stopping else { return }
            if self.json { self.emitJSON(final: false) } else { self.render() }
            self.scheduleRefresh()
        }
    }

    private func stop() {
        guard !stopping else { return }
        stopping = true
        guard let c = connection, !c.isClosed else { return finish() }
        _ = try? loop.addTimer(after: .seconds(2)) { [unowned self] in self.finish() }
        c.run(plan.stopSteps) { [unowned self] _ in self.finish() }
    }

    private func finish() {
        connection?.close()
        connection = nil
        if let check {
            let seconds = Double(loop.nowMicroseconds - startedAt.monotonic) / 1e6
            let device = options.device.description
            let code = ScanExpect.report(check, device: device, seconds: seconds, timeout: options.timeout ?? Self.defaultTimeout, json: json)
            let written = options.metrics.map {
                ScanExpect.writeMetrics(check.prometheusText(device: device, startedAt: startedAt.wall, duration: seconds,
                                                             clockSynchronized: !clockUnsynchronized), to: $0)
            } ?? true
            let kept = options.metrics.map { ScanExpect.write(firstHeard: check.firstHeard, to: ScanExpect.addressesPath(metrics: $0), now: startedAt.wall) } ?? true
            exitCode = written && kept ? code : .failure
            return loop.exit(code: exitCode.rawValue)
        }
        if json { emitJSON(final: true) } else { render(final: true) }
        if options.calibrate && !json { Output.out(ScanView.calibration(seen.entries, seconds: options.duration ?? 0)) }
        loop.exit(code: exitCode.rawValue)
    }

    private func fail(_ message: String, _ code: ExitCode) {
        Output.err("Error: \(message)\n")
        exitCode = code
        stopping = true
        connection?.close()
        connection = nil
        loop.exit(code: code.rawValue)
    }

    // MARK: output

    private func emitJSON(final: Bool) {
        var out = ""
        for s in seen.entries where final || s.updated { out += s.jsonLine(final: final) + "\n" }
        seen.forEach { $0.updated = false }
        if final {
            out += JSONValue([(.kind, .string("summary")), (.entries, JSONValue(seen.count)), (.capacity, JSONValue(seen.capacity)),
                              (.evicted, JSONValue(seen.evicted)), (.keyTrials, JSONValue(addressResolver?.keyTrials ?? 0)),
                              (.addressesSkipped, JSONValue(addressResolver?.skippedAddresses ?? 0)),
                              (.keyTrialsSkipped, JSONValue(addressResolver?.skippedKeyTrials ?? 0)), (.final, .bool(true))]).text + "\n"
        }
        if !out.isEmpty { Output.out(out) }
    }

    private func render(final: Bool = false) {
        var heading = "beacond scan on \(options.device) (\(plan.family) scanning, passive)"
        heading += options.duration.map { " for \(decimal($0, 1)) s" } ?? ", Ctrl-C to stop"
        Output.out((final ? "" : "\u{1B}[H\u{1B}[2J") + ScanView.table(seen, heading: heading)
                   + (addressResolver.map { ScanView.skipped($0.skippedAddresses, trials: $0.skippedKeyTrials) } ?? ""))
    }
}
