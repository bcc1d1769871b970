// `beacond status` and `beacond reload`: what every running beacond says in its state file, and a reload that
// waits for the daemon's answer. Both read the files `run` writes (RuntimeStateFile); neither needs a privilege
// to read them.
import BeaconCore
import DaemonCore
import SystemCalls

struct StatusOptions: Equatable {
    var json = false
    var device: String?
    var configPath: String?
    var check = false
}

struct ReloadOptions: Equatable {
    var device: String?
    var configPath: String?
    var pid: Int32?
    var timeout: Double = 60
}

/// One running beacond as its state file says.
struct DaemonView {
    var path: String
    var unit: String?
    var state: JSONValue
    /// The owner of the very file that was read (fstat of its descriptor).
    var owner: UInt32

    var pid: Int32 { Int32(clamping: state["pid"]?.int ?? 0) }
    var phase: String { state["phase"]?.string ?? "unknown" }
    var device: String { state["controller"]?["device"]?.string ?? "?" }
    var configPath: String { state["config"]?["path"]?.string ?? "?" }
    var name: String { unit ?? "beacond (pid \(pid), by hand)" }
    var reloadCount: Int { state["reload"]?["count"]?.int ?? 0 }
    var reloadResult: String? { state["reload"]?["result"]?.string }

    /// The state file at `path`: a regular file, not a symlink to one.
    static func read(_ path: String) -> DaemonView? {
        guard let fd = try? FileDescriptor.openRegularFile(path, followingSymlinks: false), let st = try? fd.status(),
              let bytes = try? fd.readAll(limit: RuntimeStateFile.maximumSize),
              let v = JSONValue(parsing: bytes), v["pid"]?.int != nil else { return nil }
        return DaemonView(path: path, unit: RuntimeStateFile.unit(ofStateFile: path), state: v, owner: st.st_uid)
    }

    /// Every beacond running now (a state file whose process is gone is left out), narrowed by device and config.
    static func running(device: String?, configPath: String?) -> [DaemonView] {
        RuntimeStateFile.candidates().compactMap(read).filter { d in
            processExists(d.pid) && (device == nil || d.device == device) && (configPath == nil || d.configPath == configPath)
        }
    }

    /// What is wrong with it, each with what to do.
    var problems: [String] {
        var out: [String] = []
        let status = state["status"]?.string ?? ""
        switch phase {
        case "advertising":
            for b in state["beacons"]?.array ?? [] where b["on_air"]?.bool != true {
                out.append("\(name): beacon \(b["index"]?.int ?? 0) is not on the air: \(status)")
            }
        case "unprovisioned":
            out.append("\(name): no beacon yet: \(status)")
        default:
            out.append("\(name): not on the air (\(phase)): \(status)")
        }
        if reloadResult == "refused" {
            out.append("\(name): the last reload was refused and the previous configuration stays on the air: \(configPath) has "
                       + Self.refusal(state["reload"]) + "; fix it ('beacond check-config --config \(configPath)' lists them), then run '\(reloadCommand)'")
        }
        if state["clock"]?["synchronized"]?.bool == false {
            out.append("\(name): the system clock is not synchronized, so receivers cannot resolve the Eddystone-EIDs: enable time synchronization (timedatectl set-ntp true)")
        }
        return out
    }

    var reloadCommand: String { unit.map { "systemctl reload \($0)" } ?? "kill -HUP \(pid)" }

    /// A refusal as the state keeps it (`error_count`, `error_lines`): "2 errors, on lines 4 and 9". The state has no
    /// text of the errors: the journal and check-config do.
    static func refusal(_ r: JSONValue?) -> String {
        let n = r?["error_count"]?.int ?? 0
        let lines = (r?["error_lines"]?.array ?? []).compactMap(\.int).map(String.init)
        var s = "\(n) error\(n == 1 ? "" : "s")"
        if let last = lines.last {
            s += lines.count == 1 ? ", on line \(last)" : ", on lines " + lines.dropLast().joined(separator: ", ") + " and " + last
            if lines.count >= ConfigError.linesKept { s += " (the first \(ConfigError.linesKept) lines)" }
        }
        return s
    }

    /// The short view: the daemon, its controller, one line per beacon, its warnings.
    var text: String {
        let s = state
        var t = "\(name): \(phase) on \(device) (beacond \(s["version"]?.string ?? "?"), pid \(pid))\n"
        t += "  status: \(s["status"]?.string ?? "")\n"
        t += "  config: \(configPath) (sha256 \(String((s["config"]?["sha256"]?.string ?? "").prefix(12)))…)\n"
        if let c = s["controller"], let backend = c["backend"]?.string {
            var facts = [backend, "\(c["family"]?.string ?? "?") advertising"]
            if let v = c["bluetooth_version"]?.string { facts.append("Bluetooth \(v)") }
            if let m = c["manufacturer"]?.int { facts.append("manufacturer \(m)") }
            if let n = c["sets"]?.int { facts.append("\(n) advertising sets") }
            if let n = c["instances"]?.int { facts.append("\(n) kernel instances") }
            if c["time_sliced"]?.bool == true { facts.append("beacons take turns") }
            t += "  controller: \(device): \(facts.joined(separator: ", "))\n"
        }
        let now = wallClock().seconds
        for b in s["beacons"]?.array ?? [] {
            let id: [String]
            if case .object(let m, let order)? = b["identity"] {
                id = order.map { k in "\(k) \(m[k]!.string ?? m[k]!.text)" }
            } else { id = [] }
            var line = "  \(b["index"]?.int ?? 0). \(b["format"]?.string ?? "?")"
            if !id.isEmpty { line += " " + id.joined(separator: " ") }
            let kind = b["address_kind"]?.string ?? "?"
            line += " from " + (b["address"]?.string.map { "\($0) (\(kind))" } ?? kind)
            // Not its own address, for now: say why, and when it comes back.
            if let why = b["address_held_back"]?.string { line += " [not its \(kind) address: \(why)]" }
            if let ms = b["interval_ms"]?.number { line += ", every \(decimal(ms, ms < 10 ? 2 : 0)) ms" }
            if b["on_air"]?.bool == true {
                let since = b["on_air_since"]?.int.map { UInt64(clamping: $0) } ?? now
                line += ", on the air for \(formatDuration(.seconds(Int64(now >= since ? now - since : 0))))"
            } else {
                line += ", not on the air"
            }
            t += line + "\n"
            for w in b["warnings"]?.array?.compactMap(\.string) ?? [] { t += "     warning: \(w)\n" }
        }
        if s["clock"]?["synchronized"]?.string == "unknown" {
            t += "  clock: whether it is synchronized is unknown (adjtimex refused, no systemd-timesyncd): the EIDs resolve only if it is\n"
        }
        if let r = s["last_refused"], let at = r["at"]?.int, reloadResult != "refused" {
            t += "  an earlier reload was refused (\(formatDuration(.seconds(Int64(max(0, Int(now) - at))))) ago, \(Self.refusal(r))); the file has been taken since\n"
        }
        return t
    }
}

enum StatusCommand {
    static func status(_ o: StatusOptions) -> ExitCode {
        let daemons = DaemonView.running(device: o.device, configPath: o.configPath)
        let problems = daemons.flatMap(\.problems)
        var narrowed = ""
        if let d = o.device { narrowed += " on \(d)" }
        if let c = o.configPath { narrowed += " with \(c)" }
        let none = "No beacond is running\(narrowed): start it with 'systemctl start beacond' (or beacond@hciN), and see 'journalctl -u beacond' if it stopped"
        let allProblems = daemons.isEmpty ? [none] : problems
        let ok = !daemons.isEmpty && problems.isEmpty
        if o.json {
            let each = daemons.map { d -> String in
                guard case .object(let m, let order) = d.state else { return "{}" }
                var members = ["\"unit\":\(d.unit.map(jsonString) ?? "null")", "\"state_file\":\(jsonString(d.path))"]
                members += order.map { "\(jsonString($0)):\(m[$0]!.text)" }
                return "{" + members.joined(separator: ",") + "}"
            }
            Output.out("{\"ok\":\(ok),\"problems\":[\(allProblems.map(jsonString).joined(separator: ","))],\"daemons\":[\(each.joined(separator: ","))]}\n")
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
            if unitDirectory != nil, let f = RuntimeStateFile.candidates().first, let d = DaemonView.read(f) { return [d] }
            return DaemonView.running(device: o.device, configPath: o.configPath).filter { o.pid == nil || $0.pid == o.pid }
        }
        var found = find()
        // A reload right after the start may come before the first state file.
        while found.isEmpty, o.pid.map(processExists) == true, monotonicMicroseconds() < deadline {
            sleepMilliseconds(50)
            found = find()
        }
        guard found.count == 1, let d = found.first else {
            if found.isEmpty {
                Output.err("beacond reload: no running beacond\(o.pid.map { " with pid \($0)" } ?? "") has a state file to wait on\n")
                return .notRunning
            }
            Output.err("beacond reload: \(found.count) beacond processes run (\(found.map { "\($0.name) on \($0.device)" }.joined(separator: ", "))); name one with --device or --config\n")
            return .usage
        }
        if let p = o.pid, p != d.pid {
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
            guard let now = DaemonView.read(d.path), now.pid == d.pid else { continue }
            guard now.reloadCount > before, let result = now.reloadResult, result != "in-progress" else { continue }
            let status = now.state["status"]?.string ?? ""
            if result == "refused" {
                Output.err("beacond reload: \(now.configPath) was refused (\(DaemonView.refusal(now.state["reload"])); "
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
        Output.err("beacond reload: \(d.name) did not finish the reload within \(decimal(o.timeout, 0)) s; see 'beacond status'\n")
        return .failure
    }
}
