// `scan --expect`: reading the configs to check, and saying what the air showed (stdout, stderr, the metrics file).
import AESCipher
import BeaconCore
import BluetoothHCI
import DaemonCore
import SystemCalls

enum ScanExpect {
    /// The config files named: a directory stands for every `*.conf` in it, in name order. A file named twice (or
    /// as itself and through its directory) is checked once, under its first name: each beacon is one series.
    static func files(_ paths: [String]) throws(ConfigError) -> [String] {
        var out: [String] = []
        var seen: Set<[UInt64]> = []
        /// `known`: the file's identity when the caller has it (one stat per name).
        func add(_ p: String, _ known: FileIdentity? = nil) {
            if let id = known ?? FileIdentity(path: p), !seen.insert([id.device, id.inode]).inserted { return }
            out.append(p)
        }
        for p in paths {
            guard let id = FileIdentity(path: p) else { out.append(p); continue }  // missing: its load says so
            guard id.isDirectory else { add(p, id); continue }
            let names: [String]
            do { names = try directoryEntries(p) } catch {
                throw ConfigError(path: p, diagnostics: [ConfigDiagnostic("cannot list the directory: \(error.errno)", at: nil)])
            }
            let confs = names.filter { $0.hasSuffix(".conf") && !$0.hasPrefix(".") }
            if confs.isEmpty { throw ConfigError(path: p, diagnostics: [ConfigDiagnostic("no *.conf file in this directory: nothing to expect", at: nil)]) }
            for c in confs { add((p.hasSuffix("/") ? p : p + "/") + c) }
        }
        return out
    }

    /// Every beacon of every file, each loaded as `run` loads it (EID keys included); a file without a beacon is an
    /// error, since nothing of it could be heard.
    static func load(_ paths: [String]) throws(ConfigError) -> [ExpectedBeacon] {
        var expected: [ExpectedBeacon] = []
        for path in try files(paths) {
            let config = try ConfigLoader.load(path)
            // Beacons without a uuid are not on the air (the host runs the others): only a file with none is an error.
            if config.beacons.isEmpty, let first = config.unprovisioned.first {
                throw ConfigError(path: path, diagnostics: [ConfigDiagnostic("\(config.unprovisioned.count == 1 ? "\(first.label) has" : "none of its \(config.unprovisioned.count) beacons has") no uuid yet: this config puts nothing on the air to expect",
                                                                             at: first.location, key: "beacon.uuid")])
            }
            expected += ExpectedBeacon.all(in: config, path: path, base: expected.count)
        }
        return expected
    }

    /// A resolver holding the keys of the EID beacons expected, the i-th key for `check.eidKeys[i]`. Its window
    /// reaches past the periods `--expect` accepts (the current one, ±`AirCheck.eidSkew`), so that an older EID is
    /// named as such (a recording, or a clock that is off) instead of passing as someone else's frame.
    static func resolver(for check: AirCheck) -> EIDResolver? {
        guard let shortest = check.eidKeys.map(\.exponent).min() else { return nil }
        let keys = check.eidKeys.enumerated().map { i, use in EIDKey(name: "\(i)", exponent: use.exponent, key: use.key) }
        let window = 2 + Int(AirCheck.eidSkew >> Int64(shortest))
        return EIDResolver(keys: keys, window: window, cipher: { key, block in try AES128.encrypt(block, key: key) })
    }

    /// The verdicts on stdout (text or JSON lines), the missing and mismatched beacons named on stderr, and the
    /// exit code: 0 all heard as configured, 3 any heard with other content, else 2 any missing.
    static func report(_ check: AirCheck, device: String, seconds: Double, timeout: Double, json: Bool) -> ExitCode {
        let results = check.results
        let missing = results.filter { $0.verdict == .missing }
        let mismatched = results.filter { $0.verdict == .mismatch }
        let code: ExitCode = !mismatched.isEmpty ? .beaconMismatch : !missing.isEmpty ? .beaconMissing : .success
        var out = ""
        if json {
            for e in results { out += AirCheck.jsonLine(e) + "\n" }
            for s in check.unexpected.values.sorted(by: { $0.lastSeen < $1.lastSeen }) { out += AirCheck.jsonLine(unexpected: s) + "\n" }
            out += JSONValue([
                (.kind, .string("expect_summary")), (.device, .string(device)), (.expected, JSONValue(results.count)),
                (.heard, JSONValue(results.count - missing.count - mismatched.count)), (.missing, JSONValue(missing.count)),
                (.mismatched, JSONValue(mismatched.count)), (.unexpected, JSONValue(check.unexpected.count)),
                (.seconds, JSONValue(seconds, decimals: 1)), (.exit, JSONValue(code.rawValue)), (.final, .bool(true)),
            ]).text + "\n"
        } else {
            for e in results { out += AirCheck.textLine(e) }
            for s in check.unexpected.values.sorted(by: { $0.lastSeen < $1.lastSeen }) {
                out += "OTHER    \(AirCheck.summary(of: s.frame)) from \(s.address), rssi \(s.rssi == 127 ? "n/a" : "\(s.rssi) dBm"): in none of the configs\n"
            }
            out += "\(results.count - missing.count - mismatched.count) of \(results.count) heard as configured on \(device) in \(decimal(seconds, 1)) s"
                + (missing.isEmpty ? "" : ", \(missing.count) missing") + (mismatched.isEmpty ? "" : ", \(mismatched.count) mismatched") + "\n"
        }
        Output.out(out)
        if !missing.isEmpty {
            Output.err("Error: \(missing.count) of \(results.count) beacon\(results.count == 1 ? "" : "s") not heard on \(device) within \(decimal(timeout, 1)) s: "
                + missing.map { "\($0.expected.beacon.summary) (\($0.expected.label))" }.joined(separator: ", ") + "\n")
        }
        for e in mismatched {
            Output.err("Error: \(e.expected.beacon.summary) (\(e.expected.label)) is on the air with other content: "
                + e.mismatches.map { $0.differences.joined(separator: "; ") + " (from \($0.sighting.address))" }.joined(separator: ", ") + "\n")
        }
        return code
    }

    /// Where a verifier keeps, beside its metrics, when each resolvable address of its beacons was first heard, so
    /// that the next check flags one still heard past `address_rotation_s` (AirCheck.firstHeard): `FILE.addresses`,
    /// mode 0600 (which addresses are the beacon's is what its key keeps private). node_exporter reads `*.prom` only.
    static func addressesPath(metrics: String) -> String { metrics + ".addresses" }

    /// The addresses an earlier check wrote: a line `ADDRESS MICROSECONDS` each; anything else is skipped, a missing
    /// or unreadable file is none.
    static func firstHeard(from path: String) -> [String: UInt64] {
        guard let bytes = try? FileDescriptor.readFile(path, limit: 1 << 20) else { return [:] }
        var out: [String: UInt64] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where out.count < AirCheck.firstHeardLimit {
            let f = line.split(separator: " ")
            guard f.count == 2, BluetoothAddress(parsing: String(f[0])) != nil, let t = UInt64(f[1]) else { continue }
            out[String(f[0])] = t
        }
        return out
    }

    /// Writes them back, those of the last week only (newest first, at most `AirCheck.firstHeardLimit`).
    static func write(firstHeard: [String: UInt64], to path: String, now: UInt64) -> Bool {
        let week: UInt64 = 7 * 86_400 * 1_000_000
        let kept = firstHeard.filter { now < $0.value || now - $0.value < week }.sorted { $0.value > $1.value }.prefix(AirCheck.firstHeardLimit)
        return writeMetrics(kept.map { "\($0.key) \($0.value)\n" }.joined(), to: path, mode: 0o600)
    }

    /// The result for node_exporter's textfile collector, replacing FILE atomically (mode 0644, whatever the umask,
    /// so that node_exporter's own user can read it). The directory is opened without following a symlink and must be
    /// root's (or this user's) and writable by no one else: the verifier runs as root, and node_exporter's directory
    /// sits in the prometheus user's home.
    static func writeMetrics(_ text: String, to path: String, mode: UInt32 = 0o644) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        let name = String(parts.last ?? "")
        var dir = parts.count > 1 ? (parts.dropLast().joined(separator: "/").isEmpty ? "/" : parts.dropLast().joined(separator: "/")) : "."
        if !dir.hasPrefix("/") { dir = currentDirectory() + "/" + dir }
        do {
            let fd = try FileDescriptor.openTrustedDirectory(dir)
            try createFileDurably(named: name, in: fd, contents: Array(text.utf8), mode: .init(mode), exactMode: true, replacing: true)
        } catch {
            Output.err("Error: cannot write the metrics to \(path): \(error)\n")
            return false
        }
        return true
    }
}
