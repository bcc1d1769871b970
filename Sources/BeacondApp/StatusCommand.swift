// `beacond status` and `beacond reload`: what every running beacond says in its state file, and a reload that
// waits for the daemon's answer. Both read the files `run` writes (RuntimeStateFile); neither needs a privilege
// to read them.
import AESCipher
import BeaconCore
import DaemonCore
import SystemCalls

struct StatusOptions: Equatable {
    var json = false
    var device: String?
    var configPath: String?
    var check = false
    /// `--expect-sha256`: the config each daemon shown must run.
    var expectSHA256: String?
}

struct ReloadOptions: Equatable {
    var device: String?
    var configPath: String?
    var pid: Int32?
    var timeout: Double = 60
}

/// One running beacond as its state file says.
struct DaemonView {
    /// The state file's path.
    var path: String
    var unit: String?
    /// `.null` when the file cannot be read (`unreadable` says why).
    var state: JSONValue
    /// The owner of the directory the file was read from (fstat of its descriptor).
    var owner: UInt32
    /// The process holding the directory's lock, when the kernel names it.
    var holder: Int32?
    /// Why the state file of a running beacond cannot be read (too large, not JSON …).
    var unreadable: String?

    var pid: Int32 { state[.pid]?.int.map { Int32(clamping: $0) } ?? holder ?? RuntimeStateFile.handRunPID(ofDirectory: directory) ?? 0 }
    var directory: String { String(path.dropLast(RuntimeStateFile.fileName.count + 1)) }
    var phase: String { state[.phase]?.string ?? "unknown" }
    var device: String { state[.controller]?[.device]?.string ?? "?" }
    var configPath: String { state[.config]?[.path]?.string ?? "?" }
    var name: String { unit ?? "beacond (pid \(pid), by hand)" }
    var reloadCount: Int { state[.reload]?[.count]?.int ?? 0 }
    var reloadResult: String? { state[.reload]?[.result]?.string }

    /// The beacond whose runtime directory is `directory`, if one runs: its lock is held (a state file whose lock is
    /// free is a dead process's, whatever has its pid now, and a hand run's is removed), the directory is root's, this
    /// user's or the units' user's, and its state file a regular file, not a symlink to one. A running beacond whose
    /// file cannot be read is said so; one that has written none yet is not listed.
    static func read(directory: String) -> DaemonView? {
        guard let dir = try? FileDescriptor.openDirectory(directory, creating: false, followingSymlinks: false), let st = try? dir.status() else { return nil }
        let owner = st.ownerAndMode.uid
        let unit = RuntimeStateFile.unit(ofDirectory: directory, owner: owner)
        guard owner == 0 || owner == processEffectiveUserID() || unit != nil else { return nil }
        var view = DaemonView(path: "\(directory)/\(RuntimeStateFile.fileName)", unit: unit, state: .null, owner: owner)
        let alive: Bool?
        switch FileLock.probe(RuntimeStateFile.lockName, in: dir) {
        case .held(let pid):
            alive = true
            view.holder = pid
        case .free, .missing:
            RuntimeStateFile.removeStale(directory, directory: dir, owner: owner)
            return nil
        case .unknown:
            alive = nil  // this user can tell only from the pid, as before the lock
        }
        do {
            guard let bytes = try dir.readFileIfPresent(named: RuntimeStateFile.fileName, limit: RuntimeStateFile.maximumSize) else {
                return nil  // not written yet
            }
            guard let v = JSONValue(parsing: bytes), v[.pid]?.int != nil else {
                view.unreadable = "\(view.path) is not a state file beacond writes"
                return alive == true ? view : nil
            }
            view.state = v
        } catch {
            view.unreadable = error.errno == .tooLarge ? "\(view.path) is larger than \(RuntimeStateFile.maximumSize / (1 << 20)) MiB" : "\(view.path): \(error)"
            return alive == true ? view : nil
        }
        // The lock's holder wrote it, or a process that had the directory before it (a unit restarted: the new one
        // has not written yet).
        if let h = view.holder, h != Int32(clamping: view.state[.pid]?.int ?? 0) { return nil }
        if alive == nil && !processExists(view.pid) { return nil }
        return view
    }

    /// Every beacond running now, narrowed by device and config (one whose state cannot be read matches any).
    static func running(device: String?, configPath: String?) -> [DaemonView] {
        RuntimeStateFile.candidates().compactMap { read(directory: $0) }.filter { d in
            d.unreadable != nil || ((device == nil || DeviceIdentity(d.device).overlaps(DeviceIdentity(device!)))
                                    && (configPath == nil || d.configPath == configPath))
        }
    }

    /// What is wrong with it, each with what to do.
    var problems: [String] {
        if let why = unreadable {
            return ["\(name): running (pid \(pid)), but its state cannot be read: \(why); 'beacond reload --pid \(pid)' still reloads it"]
        }
        var out: [String] = []
        let status = state[.status]?.string ?? ""
        switch phase {
        case "advertising":
            for b in state[.beacons]?.array ?? [] where b[.onAir]?.bool != true {
                out.append("\(name): beacon \(b[.index]?.int ?? 0) is not on the air: \(b[.paused]?.string ?? status)")
            }
        case "unprovisioned":
            out.append("\(name): no beacon yet: \(status)")
        default:
            out.append("\(name): not on the air (\(phase)): \(status)")
        }
        if reloadResult == "refused" && !refusalUndone {
            out.append("\(name): the last reload was refused and the previous configuration stays on the air: \(configPath) has "
                       + Self.refusal(state[.reload]) + "; fix it ('beacond check-config --config \(configPath)' lists them), then run '\(reloadCommand)'")
        }
        if state[.clock]?[.synchronized]?.bool == false {
            out.append("\(name): the system clock is not synchronized, so receivers cannot resolve the Eddystone-EIDs: enable time synchronization (timedatectl set-ntp true)")
        }
        return out
    }

    /// The refused file is gone: the config file is the one on the air again (a hand edit undone without a reload).
    /// Then the refusal is history (`last_refused`), not a problem that fails every deployment after it.
    var refusalUndone: Bool {
        guard let running = state[.config]?[.sha256]?.string,
              let bytes = try? FileDescriptor.readFile(configPath, limit: 1 << 20) else { return false }
        return SHA256.hex(bytes) == running.lowercased()
    }

    /// `status --expect-sha256`: the problem when the config it runs is not the file with that SHA-256 (a reload
    /// still to come, refused, or another file).
    func runsOtherConfig(than sha256: String) -> String? {
        guard unreadable == nil else { return nil }
        let running = state[.config]?[.sha256]?.string ?? ""
        guard running.lowercased() != sha256 else { return nil }
        return "\(name) runs another config (SHA-256 \(running.prefix(12))…) than expected (\(sha256.prefix(12))…): "
            + "if \(configPath) is the expected file, run '\(reloadCommand)'"
    }

    var reloadCommand: String { unit.map { "systemctl reload \($0)" } ?? "kill -HUP \(pid)" }

    /// A refusal as the state keeps it (`error_count`, `error_lines`): "2 errors, on lines 4 and 9". The state has no
    /// text of the errors: the journal and check-config do.
    static func refusal(_ r: JSONValue?) -> String {
        let n = r?[.errorCount]?.int ?? 0
        let lines = (r?[.errorLines]?.array ?? []).compactMap(\.int).map(String.init)
        var s = "\(n) error\(n == 1 ? "" : "s")"
        if let last = lines.last {
            s += lines.count == 1 ? ", on line \(last)" : ", on lines " + lines.dropLast().joined(separator: ", ") + " and " + last
            if lines.count >= ConfigError.linesKept { s += " (the first \(ConfigError.linesKept) lines)" }
        }
        return s
    }

    /// The short view: the daemon, its controller, one line per beacon, its warnings.
    var text: String {
        if let why = unreadable { return "\(name): running (pid \(pid)), state unreadable: \(why)\n" }
        let s = state
        var t = "\(name): \(phase) on \(device) (beacond \(s[.version]?.string ?? "?"), pid \(pid))\n"
        t += "  status: \(s[.status]?.string ?? "")\n"
        t += "  config: \(configPath) (sha256 \(String((s[.config]?[.sha256]?.string ?? "").prefix(12)))…)\n"
        if let c = s[.controller], let backend = c[.backend]?.string {
            var facts = [backend, "\(c[.family]?.string ?? "?") advertising"]
            if let v = c[.bluetoothVersion]?.string { facts.append("Bluetooth \(v)") }
            if let m = c[.manufacturer]?.int { facts.append("manufacturer \(m)") }
            if let n = c[.sets]?.int { facts.append("\(n) advertising sets") }
            if let n = c[.instances]?.int { facts.append("\(n) kernel instances") }
            if c[.timeSliced]?.bool == true { facts.append("beacons take turns") }
            t += "  controller: \(device): \(facts.joined(separator: ", "))\n"
        }
        let now = wallClock().seconds
        for b in s[.beacons]?.array ?? [] {
            let id: [String]
            if case .object(let m, let order)? = b[.identity] {
                id = order.map { k in "\(k) \(m[k]!.string ?? m[k]!.text)" }
            } else { id = [] }
            var line = "  \(b[.index]?.int ?? 0). \(b[.format]?.string ?? "?")"
            if !id.isEmpty { line += " " + id.joined(separator: " ") }
            let kind = b[.addressKind]?.string ?? "?"
            line += " from " + (b[.address]?.string.map { "\($0) (\(kind))" } ?? kind)
            // Not its own address, for now: say why, and when it comes back.
            if let why = b[.addressHeldBack]?.string { line += " [not its \(kind) address: \(why)]" }
            if let ms = b[.intervalMs]?.number { line += ", every \(decimal(ms, ms < 10 ? 2 : 0)) ms" }
            if b[.onAir]?.bool == true {
                let since = b[.onAirSince]?.int.map { UInt64(clamping: $0) } ?? now
                line += ", on the air for \(formatDuration(.seconds(Int64(now >= since ? now - since : 0))))"
            } else if let why = b[.paused]?.string {
                line += ", paused: \(why)"
            } else {
                line += ", not on the air"
            }
            t += line + "\n"
            for w in b[.warnings]?.array?.compactMap(\.string) ?? [] { t += "     warning: \(w)\n" }
        }
        if s[.clock]?[.synchronized]?.string == "unknown" {
            t += "  clock: whether it is synchronized is unknown (adjtimex refused, no systemd-timesyncd): the EIDs resolve only if it is\n"
        }
        if let r = s[.lastRefused], let at = r[.at]?.int, reloadResult != "refused" {
            t += "  an earlier reload was refused (\(formatDuration(.seconds(Int64(max(0, Int(now) - at))))) ago, \(Self.refusal(r))); the file has been taken since\n"
        }
        return t
    }
}

enum StatusCommand {
    static func status(_ o: StatusOptions) -> ExitCode {
        let daemons = DaemonView.running(device: o.device, configPath: o.configPath)
        let problems = daemons.flatMap { d in d.problems + (o.expectSHA256.flatMap { d.runsOtherConfig(than: $0) }.map { [$0] } ?? []) }
        var narrowed = ""
        if let d = o.device { narrowed += " on \(d)" }
        if let c = o.configPath { narrowed += " with \(c)" }
        let none = "No beacond is running\(narrowed): start it with 'systemctl start beacond' (or beacond@hciN), and see 'journalctl -u beacond' if it stopped"
        let allProblems = daemons.isEmpty ? [none] : problems
        let ok = !daemons.isEmpty && problems.isEmpty
        if o.json {
            let each = daemons.map { d -> JSONValue in
                let place: [(OutputKey, JSONValue)] = [(.unit, JSONValue(d.unit)), (.stateFile, .string(d.path))]
                guard case .object(let m, let order) = d.state else {
                    return JSONValue(place + [(.pid, JSONValue(d.pid)), (.unreadable, .string(d.unreadable ?? "no state"))])
                }
                // The state file's members as it has them (a newer beacond's too).
                return JSONValue(members: place.map { ($0.0.rawValue, $0.1) } + order.map { ($0, m[$0]!) })
            }
            Output.out(JSONValue([(.ok, .bool(ok)), (.problems, JSONValue(strings: allProblems)), (.daemons, .array(each))]).text + "\n")
        } else {
            Output.out(daemons.map(\.text).joined(separator: "\n"))
            if !allProblems.isEmpty {
                Output.out((daemons.isEmpty ? "" : "\n") + "Problems:\n" + allProblems.map { "  - \($0)\n" }.joined())
            }
        }
        return daemons.isEmpty ? .notRunning : ok ? .success : .failure
    }

    static func reload(_ o: ReloadOptions) -> ExitCode {
        // Under systemd (ExecReload) the unit's own runtime directory names the one daemon.
        let unitDirectory = environment("RUNTIME_DIRECTORY").flatMap { $0.isEmpty ? nil : $0 }
        let deadline = monotonicMicroseconds() + UInt64(o.timeout * 1_000_000)
        func find() -> [DaemonView] {
            if unitDirectory != nil, let dir = RuntimeStateFile.candidates().first, let d = DaemonView.read(directory: dir) { return [d] }
            return DaemonView.running(device: o.device, configPath: o.configPath).filter { o.pid == nil || $0.pid == o.pid || ($0.unreadable != nil && $0.holder == nil) }
        }
        var found = find()
        // A reload right after the start may come before the first state file.
        while found.isEmpty, o.pid.map(processExists) == true, monotonicMicroseconds() < deadline {
            sleepMilliseconds(50)
            found = find()
        }
        guard found.count == 1, var d = found.first else {
            if found.isEmpty {
                Output.err("beacond reload: no running beacond\(o.pid.map { " with pid \($0)" } ?? "") has a state file to wait on\n")
                return .notRunning
            }
            Output.err("beacond reload: \(found.count) beacond processes run (\(found.map { "\($0.name) on \($0.device)" }.joined(separator: ", "))); name one with --device or --config\n")
            return .usage
        }
        if d.unreadable != nil {
            // Its state cannot be read, but its lock says it runs: the pid is the lock's holder's, or --pid's.
            guard let p = d.holder ?? o.pid, o.pid == nil || o.pid == p else {
                Output.err("beacond reload: \(d.name) runs, but its state cannot be read (\(d.unreadable!)) and its pid is not known here: give --pid\n")
                return .failure
            }
            d.holder = p
        } else if let p = o.pid, p != d.pid {
            Output.err("beacond reload: the state file \(d.path) is pid \(d.pid)'s, not \(p)'s\n")
            return .failure
        }
        // Root signals the pid a file names only when root or the daemon's own user (the caller) wrote it; a unit's
        // file belongs to its dynamic user: systemctl reload (which passes --pid $MAINPID) is the way there.
        let me = processEffectiveUserID()
        if o.pid == nil, d.owner != me, me == 0 {
            Output.err("beacond reload: \(d.path) belongs to user \(d.owner): use '\(d.reloadCommand)'\n")
            return .noPermission
        }
        let before = d.reloadCount
        let unreadableBefore = d.unreadable != nil
        do { try sendHangup(to: d.pid) } catch {
            Output.err("beacond reload: cannot signal \(d.name): \(error)\n")
            return error.errno == .notPermitted ? .noPermission : .failure
        }
        while monotonicMicroseconds() < deadline {
            sleepMilliseconds(50)
            guard processExists(d.pid) else {
                Output.err("beacond reload: \(d.name) stopped during the reload\n")
                return .failure
            }
            guard let now = DaemonView.read(directory: d.directory), now.unreadable == nil, now.pid == d.pid else { continue }
            guard unreadableBefore || now.reloadCount > before, let result = now.reloadResult, result != "in-progress" else { continue }
            let status = now.state[.status]?.string ?? ""
            if result == "refused" {
                Output.err("beacond reload: \(now.configPath) was refused (\(DaemonView.refusal(now.state[.reload])); "
                           + "'beacond check-config --config \(now.configPath)' lists them); the previous configuration stays on the air: \(status)\n")
                return .config
            }
            switch now.phase {
            case "advertising", "unprovisioned":
                Output.out("\(now.name): \(status)\n")
                return .success
            default:
                Output.err("beacond reload: \(now.name) took \(now.configPath), but it is not on the air (\(now.phase)): \(status)\n")
                return .failure
            }
        }
        if unreadableBefore {
            Output.err("beacond reload: signalled \(d.name), but its state file cannot be read (\(d.unreadable!)): see its journal for the result\n")
            return .failure
        }
        Output.err("beacond reload: \(d.name) did not finish the reload within \(decimal(o.timeout, 0)) s; see 'beacond status'\n")
        return .failure
    }
}
