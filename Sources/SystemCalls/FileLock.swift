// flock(2) on a file of a state directory: which process uses a device, and one writer at a time for the records
// beside it. The lock goes with the descriptor: it is released when the process exits, however it exits. Who holds a
// lock is read from the lock itself (/proc/locks), never from what a file says.
import Glibc
import SystemConditions

public final class FileLock {
    public let name: String
    private let file: FileDescriptor

    private init(name: String, file: FileDescriptor) {
        self.name = name
        self.file = file
    }

    /// Why a lock was not taken.
    public enum Failure: Error, Sendable, Hashable {
        /// Another open file description holds it: the holder's pid, when the kernel names it (/proc/locks).
        case held(by: Int32?)
        /// A FIFO, device, socket or directory: its reads could hang, and it locks nothing of beacond's.
        case notRegularFile
        /// A hard link: whatever is done to it is done to another name's file.
        case links(UInt64)
        /// Not this process's user's: whoever owns it can hold it open, or let others do so.
        case owner(UInt32)
        case system(SystemError)
    }

    /// The mode every lock file gets, whatever the umask: no one else may open it (and so hold its lock).
    public static let mode: mode_t = 0o600

    /// Opens (or makes) `name` in the directory `dir` is open on and takes its lock exclusively. The open follows no
    /// symlink and does not block (a FIFO's would); only a regular file of one link that belongs to this process's
    /// user is locked, and it gets mode 0600. While another holds it, it is tried again every 20 ms for at most
    /// `waitMilliseconds` (0: not at all), never without end.
    public static func exclusive(_ name: String, in dir: FileDescriptor, waitMilliseconds: Int = 0) throws(Failure) -> FileLock {
        let file: FileDescriptor
        do {
            file = try dir.openAt(name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, mode: mode)
        } catch {
            if error.errno == Errno(rawValue: ELOOP) || error.errno == .isDirectory { throw .notRegularFile }
            // Another user's (root's, left by a hand run with umask 077): say whose, not only "permission denied".
            if error.errno.isPermission, let st = dir.status(ofEntry: name), st.st_uid != geteuid() { throw .owner(st.st_uid) }
            throw .system(error)
        }
        let st: stat
        do { st = try file.status() } catch { throw .system(error) }
        guard st.st_mode & S_IFMT == S_IFREG else { throw .notRegularFile }
        guard st.st_nlink == 1 else { throw .links(UInt64(st.st_nlink)) }
        guard st.st_uid == geteuid() else { throw .owner(st.st_uid) }
        if st.st_mode & 0o7777 != mode, fchmod(file.rawValue, mode) != 0 { throw .system(SystemError("fchmod(\(name))", errno: .current)) }
        let fd = file.rawValue
        var waited = 0
        while true {
            do {
                _ = try retryingInterrupts("flock(\(name))") { flock(fd, LOCK_EX | LOCK_NB) }
                return FileLock(name: name, file: file)
            } catch where error.errno == .wouldBlock {
                guard waited < waitMilliseconds else { throw .held(by: holder(of: st)) }
                sleepMilliseconds(20)
                waited += 20
            } catch {
                throw .system(error)
            }
        }
    }

    /// Lets go (closing the descriptor does too).
    public func release() { file.close() }

    /// The pid of the process holding a flock(2) lock on the file `st` describes, as /proc/locks says it (nil: none, or
    /// /proc/locks cannot be read or names no pid this process can see).
    public static func holder(of st: stat) -> Int32? {
        guard let bytes = try? FileDescriptor.readFile("/proc/locks", limit: 1 << 22) else { return nil }
        return ProcLocks.holder(in: String(decoding: bytes, as: UTF8.self), device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// Whether a flock(2) lock is held on the file `st` describes, and by whom: nil when /proc/locks cannot be read.
    public static func isHeld(_ st: stat) -> (held: Bool, pid: Int32?)? {
        guard let bytes = try? FileDescriptor.readFile("/proc/locks", limit: 1 << 22) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        let device = UInt64(st.st_dev), inode = UInt64(st.st_ino)
        guard ProcLocks.entries(in: text).contains(where: { $0.device == device && $0.inode == inode && $0.flock }) else { return (false, nil) }
        return (true, ProcLocks.holder(in: text, device: device, inode: inode))
    }
}

extension FileLock {
    /// What a lock file says of its holder, to a process that does not take it.
    public enum State: Sendable, Hashable {
        /// No lock file (or none that is a regular file): no process of this kind holds anything there.
        case missing
        case free
        /// Held; by this pid when the kernel names it.
        case held(pid: Int32?)
        /// Neither /proc/locks nor the file itself can tell.
        case unknown
    }

    /// The lock file `name` in the directory `dir` is open on: held or free, read from /proc/locks (which takes no
    /// lock, so it never stands in the holder's way), or where that cannot be read (a unit's ProcSubset=pid), by
    /// trying a shared lock on it where this user may open it.
    public static func probe(_ name: String, in dir: FileDescriptor) -> State {
        guard let st = dir.status(ofEntry: name) else { return Errno.current == .noEntry ? .missing : .unknown }
        guard st.st_mode & S_IFMT == S_IFREG else { return .missing }
        if let known = isHeld(st) { return known.held ? .held(pid: known.pid) : .free }
        guard let file = try? dir.openAt(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY) else { return .unknown }
        if flock(file.rawValue, LOCK_SH | LOCK_NB) == 0 { return .free }
        return Errno.current == .wouldBlock ? .held(pid: nil) : .unknown
    }
}

/// /proc/locks, read: `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF` (major and minor in hex, the inode in
/// decimal; `->` lines are waiters, not holders).
public enum ProcLocks {
    public struct Entry: Sendable, Hashable {
        public var flock: Bool
        public var pid: Int32
        public var device: UInt64
        public var inode: UInt64
    }

    public static func entries(in text: String) -> [Entry] {
        text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 6, f[1] != "->" else { return nil }
            let id = f[5].split(separator: ":")
            guard id.count == 3, let major = UInt64(id[0], radix: 16), let minor = UInt64(id[1], radix: 16), let inode = UInt64(id[2]),
                  let pid = Int32(f[4]) else { return nil }
            return Entry(flock: f[1] == "FLOCK", pid: pid, device: makeDevice(major: major, minor: minor), inode: inode)
        }
    }

    /// The pid holding a flock(2) lock on the file with this device and inode (a pid of 0 or less: not visible here).
    public static func holder(in text: String, device: UInt64, inode: UInt64) -> Int32? {
        entries(in: text).first { $0.flock && $0.device == device && $0.inode == inode && $0.pid > 0 }?.pid
    }

    /// glibc's makedev(3): st_dev from a major and a minor number.
    public static func makeDevice(major: UInt64, minor: UInt64) -> UInt64 {
        (major & 0xFFF) << 8 | (major & ~0xFFF) << 32 | (minor & 0xFF) | (minor & ~0xFF) << 12
    }
}

extension FileLock.Failure {
    /// The failure in the pure modules' words: they decide what it means.
    public var refusal: LockRefusal {
        switch self {
        case .held(let pid): .held(by: pid)
        case .notRegularFile: .notRegularFile
        case .links(let n): .links(n)
        case .owner(let uid): .owner(uid)
        case .system(let e): .system(e.condition, text: "\(e)")
        }
    }

    /// The failure as the one error type of system calls, for the lock file at `path`: held is EWOULDBLOCK (naming the
    /// holder), a file that is no lock of this user's EPERM, a failed call its own error.
    public func systemError(_ path: String) -> SystemError {
        switch self {
        case .held(let pid): SystemError("flock(\(path)): held by \(pid.map { "pid \($0)" } ?? "another process")", errno: .wouldBlock)
        case .system(let e): e
        case .notRegularFile, .links, .owner: SystemError("open(\(path)): not a lock file of this user's", errno: .notPermitted)
        }
    }
}
