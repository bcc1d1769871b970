// Where `run` keeps its state for `beacond status` and `beacond reload`, and how they find every running beacond.
// Under systemd: $RUNTIME_DIRECTORY (RuntimeDirectory= in the units: /run/beacond for beacond.service,
// /run/beacond-hciN for beacond@hciN), removed by systemd when the unit stops. By hand: the same variable when it
// is set, else beacond.PID in $XDG_RUNTIME_DIR (or /run for root), removed at exit.
//
// A state file names a pid, and pids are reused: a file a killed run left would make `status` call whatever has that
// pid now "advertising", and `reload` signal it (review #43). So the daemon holds the directory's `lock` for its
// lifetime; a state file whose lock is free is stale, whatever runs under its pid, and is removed when found.
import DaemonCore
import SystemCalls

enum RuntimeStateFile {
    static let fileName = "state.json"
    /// Held by the daemon for as long as it runs (flock): the state file beside it is that process's.
    static let lockName = "lock"
    /// The file is a few kilobytes; anything larger is not beacond's.
    static let maximumSize = 1 << 20
    /// What `beacond status` names a unit's user: DynamicUser= without User= takes the unit name's prefix.
    static let unitUser = "beacond"
    /// systemd's range for dynamic users (DYNAMIC_UID_MIN … MAX): the units' user has one of these, also where no
    /// nss-systemd names it.
    static let dynamicUsers: ClosedRange<UInt32> = 61184...65519
    private static let handRunPrefix = "beacond."

    /// The directory `run` writes to, or nil when there is none (a normal user without XDG_RUNTIME_DIR), and the
    /// directory it is in when it is a hand run's own (beacond.PID: two hand-run daemons never share one, whatever
    /// devices they move to).
    static func directory() -> (path: String, handRunBase: String?)? {
        if let d = environment("RUNTIME_DIRECTORY"), !d.isEmpty {
            // Several directories are separated by ':'; the units name one.
            return (String(d.split(separator: ":").first ?? Substring(d)), nil)
        }
        return handRunBase().map { ("\($0)/\(handRunPrefix)\(processID())", $0) }
    }

    private static func handRunBase() -> String? {
        if let x = environment("XDG_RUNTIME_DIR"), !x.isEmpty { return x }
        return processEffectiveUserID() == 0 ? "/run" : nil
    }

    /// Every directory a running beacond may have written its state file in, most specific first: $RUNTIME_DIRECTORY's,
    /// the units' (/run/beacond, /run/beacond-*), and hand-run ones (/run/beacond.*, $XDG_RUNTIME_DIR/beacond*).
    static func candidates() -> [String] {
        var dirs: [String] = []
        if let d = environment("RUNTIME_DIRECTORY"), !d.isEmpty { dirs += d.split(separator: ":").map(String.init) }
        var bases = ["/run"]
        if let x = environment("XDG_RUNTIME_DIR"), !x.isEmpty, x != "/run" { bases.append(x) }
        for base in bases {
            for name in (try? directoryEntries(base)) ?? [] where name == "beacond" || name.hasPrefix("beacond-") || name.hasPrefix(handRunPrefix) {
                dirs.append("\(base)/\(name)")
            }
        }
        var seen: Set<String> = []
        return dirs.filter { seen.insert($0).inserted }
    }

    /// The unit a state directory belongs to: beacond.service or beacond@X.service for /run/beacond and /run/beacond-X
    /// owned by root or the units' (dynamic) user; nil for anything else (run by hand, or not a unit's at all).
    static func unit(ofDirectory path: String, owner: UInt32, nameOf: (UInt32) -> String? = { userName(of: $0) }) -> String? {
        var parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard parts.count == 2, parts[0] == "run", let dir = parts.popLast() else { return nil }
        guard owner == 0 || dynamicUsers.contains(owner) || nameOf(owner) == unitUser else { return nil }
        if dir == "beacond" { return "beacond.service" }
        if dir.hasPrefix("beacond-"), dir.count > "beacond-".count { return "beacond@\(dir.dropFirst("beacond-".count)).service" }
        return nil
    }

    /// The pid in a hand run's directory name (beacond.PID).
    static func handRunPID(ofDirectory path: String) -> Int32? {
        guard let last = path.split(separator: "/").last, last.hasPrefix(handRunPrefix) else { return nil }
        return Int32(last.dropFirst(handRunPrefix.count))
    }

    /// A running daemon's hold on its runtime directory: the directory, and its lock for the process's lifetime.
    final class Claim {
        let path: String
        private let directory: FileDescriptor
        private let lock: FileLock
        /// A hand run's base directory, from which its own directory is removed at exit.
        private let base: FileDescriptor?

        fileprivate init(path: String, directory: FileDescriptor, lock: FileLock, base: FileDescriptor?) {
            (self.path, self.directory, self.lock, self.base) = (path, directory, lock, base)
        }

        /// Replaces the file atomically, readable by every local user (mode 0644 whatever the umask: the units' is 0077).
        /// Not synced: the runtime directory does not outlive a boot, and the state is written before the first
        /// command to the controller.
        func write(_ state: RuntimeState) throws(SystemError) {
            try replaceFileAtomically(named: fileName, in: directory, contents: Array(state.json.utf8), mode: 0o644, exactMode: true)
        }

        /// At exit: the state file goes, and a hand run's directory with it (a unit's is systemd's).
        func remove() {
            removeStateFiles(path, in: directory)
            guard let base, let name = path.split(separator: "/").last.map(String.init) else { return }
            removeFile(named: lockName, in: directory)
            lock.release()
            base.removeSubdirectory(name)
        }
    }

    /// Takes the runtime directory for this process: opened (made when missing) without following a symlink and only
    /// when it belongs to root or this user and no one else may write it (FileDescriptor.openTrustedDirectory), with
    /// its lock held. A hand run's directory is made private, locked, then opened to readers, so that no one finds it
    /// unlocked; one a killed process with this pid left is taken over.
    static func claim(_ where_: (path: String, handRunBase: String?)) throws(SystemError) -> Claim {
        let dir: FileDescriptor, base: FileDescriptor?
        if let b = where_.handRunBase {
            let baseFD = try FileDescriptor.openTrustedDirectory(b)
            let name = String(where_.path.split(separator: "/").last ?? "")
            try baseFD.makeSubdirectoryUnlessPresent(name, mode: 0o700)
            dir = try baseFD.openSubdirectory(name)
            guard try dir.status().ownerAndMode.uid == processEffectiveUserID() else {
                throw SystemError("open(\(where_.path)): not this user's directory", errno: .notPermitted)
            }
            base = baseFD
        } else {
            dir = try FileDescriptor.openTrustedDirectory(where_.path)
            base = nil
        }
        let lock: FileLock
        do { lock = try FileLock.exclusive(lockName, in: dir, waitMilliseconds: 1000) } catch {
            throw error.systemError("\(where_.path)/\(lockName)")
        }
        if base != nil {
            // Only what a killed run with this pid left can be here now: it is this process's to replace.
            removeStateFiles(where_.path, in: dir)
            try dir.setMode(0o755)
        }
        return Claim(path: where_.path, directory: dir, lock: lock, base: base)
    }

    /// A stale hand run's directory (its lock free) that this user may remove, when no beacond can be starting in it:
    /// its pid runs no more, or runs something else.
    static func removeStale(_ path: String, directory: FileDescriptor, owner: UInt32) {
        guard owner == processEffectiveUserID(), let pid = handRunPID(ofDirectory: path),
              !processExists(pid) || processName(pid) != "beacond",
              let base = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/").nilIfEmpty,
              let name = path.split(separator: "/").last.map(String.init),
              let baseFD = try? FileDescriptor.openTrustedDirectory(base) else { return }
        removeStateFiles(path, in: directory)
        removeFile(named: lockName, in: directory)
        baseFD.removeSubdirectory(name)
    }
}

/// The state file and the temporary files of its atomic replace (`.state.json.*`), which a run killed while writing
/// leaves behind: they go first, so that the directory can be removed (issue #53: the rmdir failed and the hand
/// run's directory stayed for good).
private func removeStateFiles(_ path: String, in directory: FileDescriptor) {
    let temporary = "." + RuntimeStateFile.fileName + "."
    for name in (try? directoryEntries(path)) ?? [] where name.hasPrefix(temporary) {
        removeFile(named: name, in: directory)
    }
    removeFile(named: RuntimeStateFile.fileName, in: directory)
}

private extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
