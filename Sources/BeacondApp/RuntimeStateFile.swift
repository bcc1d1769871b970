// Where `run` keeps its state for `beacond status` and `beacond reload`, and how they find every running beacond.
// Under systemd: $RUNTIME_DIRECTORY (RuntimeDirectory= in the units: /run/beacond for beacond.service,
// /run/beacond-hciN for beacond@hciN), removed by systemd when the unit stops. By hand: the same variable when it
// is set, else beacond.DEVICE in $XDG_RUNTIME_DIR (or /run for root), removed at exit.
import DaemonCore
import SystemCalls

enum RuntimeStateFile {
    static let fileName = "state.json"
    /// The file is a few kilobytes; anything larger is not beacond's.
    static let maximumSize = 1 << 20

    /// The directory `run` writes to, or nil when there is none (a normal user without XDG_RUNTIME_DIR). By hand it
    /// is the process's own (beacond.PID): two hand-run daemons never share one, whatever devices they move to.
    static func directory() -> String? {
        if let d = environment("RUNTIME_DIRECTORY"), !d.isEmpty {
            // Several directories are separated by ':'; the units name one.
            return String(d.split(separator: ":").first ?? Substring(d))
        }
        return handRunBase().map { "\($0)/beacond.\(processID())" }
    }

    private static func handRunBase() -> String? {
        if let x = environment("XDG_RUNTIME_DIR"), !x.isEmpty { return x }
        return processEffectiveUserID() == 0 ? "/run" : nil
    }

    /// Every state file a running beacond may have written, most specific first: $RUNTIME_DIRECTORY's, the units'
    /// (/run/beacond, /run/beacond-*), and hand-run ones (/run/beacond.*, $XDG_RUNTIME_DIR/beacond.*).
    static func candidates() -> [String] {
        var dirs: [String] = []
        if let d = environment("RUNTIME_DIRECTORY"), !d.isEmpty { dirs += d.split(separator: ":").map(String.init) }
        var bases = ["/run"]
        if let x = environment("XDG_RUNTIME_DIR"), !x.isEmpty, x != "/run" { bases.append(x) }
        for base in bases {
            for name in (try? directoryEntries(base)) ?? [] where name == "beacond" || name.hasPrefix("beacond-") || name.hasPrefix("beacond.") {
                dirs.append("\(base)/\(name)")
            }
        }
        var seen: Set<String> = []
        return dirs.filter { seen.insert($0).inserted }.map { "\($0)/\(fileName)" }
    }

    /// The unit a state directory belongs to: beacond.service, beacond@X.service, or nil (run by hand).
    static func unit(ofStateFile path: String) -> String? {
        let parts = path.split(separator: "/")
        guard parts.count >= 2 else { return nil }
        let dir = String(parts[parts.count - 2])
        if dir == "beacond" { return "beacond.service" }
        if dir.hasPrefix("beacond-") { return "beacond@\(dir.dropFirst("beacond-".count)).service" }
        return nil
    }

    /// Opens (making it when missing) the directory without following a symlink anywhere, and only when it belongs
    /// to root or this process's user and no one else may write it (FileDescriptor.openTrustedDirectory).
    static func open(_ directory: String) throws(SystemError) -> FileDescriptor {
        try FileDescriptor.openTrustedDirectory(directory)
    }

    /// Replaces the file atomically, readable by every local user (mode 0644 whatever the umask: the units' is 0077).
    static func write(_ state: RuntimeState, in directory: FileDescriptor) throws(SystemError) {
        try createFileDurably(named: fileName, in: directory, contents: Array(state.json.utf8), mode: 0o644, exactMode: true, replacing: true)
    }

    static func remove(in directory: FileDescriptor) {
        removeFile(named: fileName, in: directory)
    }
}
