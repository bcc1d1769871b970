// The one module that calls into libc for the kernel: a typed errno, one error type for failed system calls,
// an owning file descriptor with read and write loops, and atomic file replacement. EINTR is retried here and
// nowhere else; EBADF and EFAULT are bugs in beacond (trap); every other failure is the world's and is thrown.
import CLinux
import Glibc
import SystemConditions

/// An errno value with its symbolic meaning.
public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno now.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let inProgress = Errno(rawValue: EINPROGRESS)
    public static let noEntry = Errno(rawValue: ENOENT)
    public static let accessDenied = Errno(rawValue: EACCES)
    public static let exists = Errno(rawValue: EEXIST)
    public static let notPermitted = Errno(rawValue: EPERM)
    public static let tooLarge = Errno(rawValue: EFBIG)
    public static let noDevice = Errno(rawValue: ENODEV)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let networkDown = Errno(rawValue: ENETDOWN)
    public static let ioError = Errno(rawValue: EIO)
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    public static let addressFamilyNotSupported = Errno(rawValue: EAFNOSUPPORT)
    public static let alreadyInProgress = Errno(rawValue: EALREADY)
    public static let rfkilled = Errno(rawValue: ERFKILL)
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    public static let hostUnreachable = Errno(rawValue: EHOSTUNREACH)
    public static let isDirectory = Errno(rawValue: EISDIR)
    public static let stale = Errno(rawValue: ESTALE)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    public static let readOnlyFileSystem = Errno(rawValue: EROFS)

    /// The errno of a call that returns -errno (0 or more: success, no errno).
    public init(negated result: Int32) { self.rawValue = result < 0 ? -result : 0 }

    /// EPERM or EACCES: a missing privilege.
    public var isPermission: Bool { self == .notPermitted || self == .accessDenied }

    /// strerror's text: `Connection refused`.
    public var description: String { String(cString: strerror(rawValue)) }
}

/// A failed system call: which call and why. The one error type for system errors in beacond.
public struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    public let call: String
    public let errno: Errno
    public init(_ call: String, errno: Errno) {
        self.call = call
        self.errno = errno
    }
    public init(_ call: String, errno: Int32) { self.init(call, errno: Errno(rawValue: errno)) }
    /// For C wrappers that return -errno themselves (0 or more is success).
    public static func check(_ call: String, negatedErrno r: Int32) throws(SystemError) {
        if r < 0 { throw SystemError(call, errno: -r) }
    }
    public var description: String { "\(call): \(errno)" }

    /// What the failure is, in the pure modules' words (SystemConditions): they decide from it.
    public var condition: SystemCondition { errno.condition }
}

extension Errno {
    /// The errno in the pure modules' words: the kinds beacond tells apart, and strerror's text.
    public var condition: SystemCondition {
        let kind: SystemCondition.Kind = switch self {
        case .noEntry: .notFound
        case .exists: .exists
        case .accessDenied: .accessDenied
        case .isDirectory: .isDirectory
        case .invalidArgument: .invalidArgument
        case .tooLarge: .tooLarge
        default: .other
        }
        return SystemCondition(kind, description)
    }
}

/// Runs `body` until it does not fail with EINTR; a negative result becomes a SystemError naming `call`.
/// EBADF and EFAULT are bugs in this program, not the world's doing: trap.
@inline(__always)
public func retryingInterrupts<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let r = body()
        if r >= 0 { return r }
        let e = Glibc.errno
        if e == EINTR { continue }
        precondition(e != EBADF && e != EFAULT, "\(call) failed with \(e == EBADF ? "EBADF" : "EFAULT"): a bug in beacond")
        throw SystemError(call, errno: e)
    }
}

/// An owned file descriptor: closed exactly once, by `close()` or when the last reference goes.
public final class FileDescriptor {
    public private(set) var rawValue: Int32

    /// Takes ownership of `fd`.
    public init(owning fd: Int32) { rawValue = fd }
    deinit { close() }

    public var isOpen: Bool { rawValue >= 0 }

    public func close() {
        if rawValue >= 0 {
            _ = Glibc.close(rawValue)
            rawValue = -1
        }
    }

    /// open(2), close-on-exec always.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemError) -> FileDescriptor {
        FileDescriptor(owning: try retryingInterrupts("open(\(path))") { Glibc.open(path, flags | O_CLOEXEC, mode) })
    }

    /// openat(2) relative to this directory descriptor, close-on-exec always.
    public func openAt(_ name: String, _ flags: Int32, mode: mode_t = 0) throws(SystemError) -> FileDescriptor {
        let dir = rawValue
        return FileDescriptor(owning: try retryingInterrupts("openat(\(name))") { Glibc.openat(dir, name, flags | O_CLOEXEC, mode) })
    }

    /// socket(2), close-on-exec and non-blocking.
    public static func socket(_ domain: Int32, _ type: Int32, _ proto: Int32, call: String = "socket") throws(SystemError) -> FileDescriptor {
        let flags = Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        return FileDescriptor(owning: try retryingInterrupts(call) { Glibc.socket(domain, type | flags, proto) })
    }

    /// One read(2) into `buffer`: the byte count (0 = end of file), EINTR retried.
    public func read(into buffer: inout [UInt8]) throws(SystemError) -> Int {
        let fd = rawValue
        return try retryingInterrupts("read") { buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }
    }

    /// Reads to end of file, refusing more than `limit` bytes (it stops reading once past it).
    public func readAll(limit: Int) throws(SystemError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while bytes.count <= limit {
            let n = try read(into: &chunk)
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }

    /// Opens an existing file to read it, refusing anything but a regular file: a directory (EISDIR) or a FIFO,
    /// device or socket (EINVAL, "not a regular file"). The open itself does not block (O_NONBLOCK: a FIFO's open
    /// would wait for a writer, forever), and the descriptor blocks again for the reads.
    public static func openRegularFile(_ path: String, followingSymlinks: Bool = true) throws(SystemError) -> FileDescriptor {
        let fd = try open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | (followingSymlinks ? 0 : O_NOFOLLOW))
        let type = try fd.status().st_mode & S_IFMT
        guard type == S_IFREG else {
            throw SystemError("open(\(path)): not a regular file", errno: type == S_IFDIR ? .isDirectory : .invalidArgument)
        }
        let flags = fcntl(fd.rawValue, F_GETFL)
        guard flags >= 0, fcntl(fd.rawValue, F_SETFL, flags & ~O_NONBLOCK) == 0 else { throw SystemError("fcntl(\(path))", errno: .current) }
        return fd
    }

    /// A whole (small) file's bytes: opened read-only, read, closed. A file over `limit` bytes is an error (EFBIG),
    /// never its first `limit` bytes: a cut file parses as something else.
    public static func readFile(_ path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let bytes = try openRegularFile(path).readAll(limit: limit)
        guard bytes.count <= limit else { throw SystemError("read(\(path)): over \(limit) bytes", errno: .tooLarge) }
        return bytes
    }

    /// The directory at `path`, following symlinks (a unit's StateDirectory= with DynamicUser= is one), made with
    /// `mode` first when it is missing and `creating` (its parent is not made).
    /// Without `followingSymlinks`, a symlink as the last component is refused (ELOOP or ENOTDIR).
    public static func openDirectory(_ path: String, creating: Bool, mode: mode_t = 0o755, followingSymlinks: Bool = true) throws(SystemError) -> FileDescriptor {
        let flags = O_RDONLY | O_DIRECTORY | (followingSymlinks ? 0 : O_NOFOLLOW)
        do {
            return try open(path, flags)
        } catch where error.errno == .noEntry && creating {
            if mkdir(path, mode) != 0 && Glibc.errno != EEXIST { throw SystemError("mkdir(\(path))", errno: .current) }
            return try open(path, flags)
        }
    }

    /// A whole small regular file of the directory this descriptor is open on: no symlink followed, an open that does
    /// not block (EINVAL for a FIFO, device or socket), and more than `limit` bytes an error (EFBIG).
    public func readFile(named name: String, limit: Int) throws(SystemError) -> [UInt8] {
        let fd = try openAt(name, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW)
        guard try fd.status().st_mode & S_IFMT == S_IFREG else { throw SystemError("openat(\(name)): not a regular file", errno: .invalidArgument) }
        let flags = fcntl(fd.rawValue, F_GETFL)
        guard flags >= 0, fcntl(fd.rawValue, F_SETFL, flags & ~O_NONBLOCK) == 0 else { throw SystemError("fcntl(\(name))", errno: .current) }
        let bytes = try fd.readAll(limit: limit)
        guard bytes.count <= limit else { throw SystemError("read(\(name)): over \(limit) bytes", errno: .tooLarge) }
        return bytes
    }

    /// The same, nil when there is no entry `name` (ENOENT): a file not written yet. Every other failure is thrown.
    public func readFileIfPresent(named name: String, limit: Int) throws(SystemError) -> [UInt8]? {
        do { return try readFile(named: name, limit: limit) } catch where error.errno == .noEntry { return nil }
    }

    /// A directory in the directory this descriptor is open on, opened without following a symlink.
    public func openSubdirectory(_ name: String) throws(SystemError) -> FileDescriptor {
        try openAt(name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
    }

    /// mkdirat(2): a new directory `name` here with `mode` (less the umask); EEXIST when the name is taken.
    public func makeSubdirectory(_ name: String, mode: mode_t) throws(SystemError) {
        if mkdirat(rawValue, name, mode) != 0 { throw SystemError("mkdirat(\(name))", errno: .current) }
    }

    /// makeSubdirectory, with an entry `name` already there (EEXIST) no failure: whatever it is, opening it says.
    public func makeSubdirectoryUnlessPresent(_ name: String, mode: mode_t) throws(SystemError) {
        do { try makeSubdirectory(name, mode: mode) } catch where error.errno == .exists {}
    }

    /// unlinkat(2) with AT_REMOVEDIR of an empty directory `name` here; false when it stays (not empty, gone, refused).
    @discardableResult
    public func removeSubdirectory(_ name: String) -> Bool { unlinkat(rawValue, name, AT_REMOVEDIR) == 0 }

    /// fchmod(2): exactly `mode`, whatever the umask took away when it was made.
    public func setMode(_ mode: mode_t) throws(SystemError) {
        if fchmod(rawValue, mode) != 0 { throw SystemError("fchmod", errno: .current) }
    }

    /// fstatat(2) of `name` here without following a symlink; nil when it cannot be stat'ed.
    public func status(ofEntry name: String) -> stat? {
        var st = stat()
        return fstatat(rawValue, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st : nil
    }

    /// One write(2) of `bytes[offset...]`: how many bytes went, EINTR retried.
    public func write(_ bytes: [UInt8], from offset: Int = 0) throws(SystemError) -> Int {
        let fd = rawValue
        return try retryingInterrupts("write") {
            bytes.withUnsafeBytes { raw in Glibc.write(fd, raw.baseAddress.map { $0 + offset }, raw.count - offset) }
        }
    }

    /// Writes all of `bytes`; on a would-block, waits for the descriptor to take more (at most `patience` polls
    /// of 20 ms), then gives up with EAGAIN.
    public func writeAll(_ bytes: [UInt8], patience: Int = 100) throws(SystemError) {
        var offset = 0
        var spins = 0
        while offset < bytes.count {
            do throws(SystemError) {
                offset += try write(bytes, from: offset)
            } catch {
                guard error.errno == .wouldBlock, spins < patience else { throw error }
                spins += 1
                _ = poll(events: Int16(POLLOUT), milliseconds: 20)
            }
        }
    }

    /// poll(2) on this descriptor alone: true when one of `events` is ready within the time.
    public func poll(events: Int16, milliseconds: Int32) -> Bool {
        var p = pollfd(fd: rawValue, events: events, revents: 0)
        let n = (try? retryingInterrupts("poll") { Glibc.poll(&p, 1, milliseconds) }) ?? 0
        return n > 0
    }

    /// fstat(2).
    public func status() throws(SystemError) -> stat {
        var st = stat()
        let fd = rawValue
        _ = try retryingInterrupts("fstat") { fstat(fd, &st) }
        return st
    }

    /// fsync(2).
    public func sync() throws(SystemError) {
        let fd = rawValue
        _ = try retryingInterrupts("fsync") { fsync(fd) }
    }

}

extension stat {
    /// The owner and the permission bits (with setuid, setgid and sticky), for callers that do not import libc.
    public var ownerAndMode: (uid: UInt32, mode: UInt32) { (st_uid, UInt32(st_mode & 0o7777)) }
}

/// Writes all of `bytes` to a descriptor this process does not own (stdout, stderr); gives up silently on error
/// (a closed pipe must not take the daemon down).
public func writeAll(toUnowned fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { raw in
            try? retryingInterrupts("write") { Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset) }
        }
        guard let n, n > 0 else { return }
        offset += n
    }
}

/// CLOCK_MONOTONIC now, in microseconds.
public func monotonicMicroseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
}

/// CLOCK_REALTIME now, in whole seconds since the Unix epoch, and the milliseconds into that second.
public func wallClock() -> (seconds: UInt64, milliseconds: Int) {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return (UInt64(max(0, ts.tv_sec)), Int(ts.tv_nsec / 1_000_000))
}

/// Whether the kernel considers the system clock synchronized (adjtimex(2): neither TIME_ERROR nor STA_UNSYNC; what
/// timedatectl shows as "System clock synchronized"). Where a seccomp filter refuses adjtimex (systemd's
/// ProtectClock=), the flag file systemd-timesyncd keeps says it; nil when neither can tell.
public func systemClockSynchronized() -> Bool? {
    var t = timex()
    let state = adjtimex(&t)
    if state >= 0 { return state != TIME_ERROR && (t.status & STA_UNSYNC) == 0 }
    if access("/run/systemd/timesync/synchronized", F_OK) == 0 { return true }
    return nil
}

/// `count` bytes from the kernel's CSPRNG (getrandom(2), blocking until it is seeded, which it is long before a
/// service runs): beacond's one source of random bytes (keys, UUIDs, addresses, the retry jitter's seed).
public func kernelRandomBytes(_ count: Int) throws(SystemError) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    var filled = 0
    while filled < count {
        let n = out.withUnsafeMutableBytes { getrandom($0.baseAddress! + filled, count - filled, 0) }
        if n < 0 {
            if Glibc.errno == EINTR { continue }
            throw SystemError("getrandom", errno: .current)
        }
        filled += n
    }
    return out
}

/// Creates `path` (never replacing anything there: O_EXCL, no symlink followed) with `bytes` and `mode`, synced.
public func createNewFile(_ path: String, contents bytes: [UInt8], mode: mode_t) throws(SystemError) {
    let fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode: mode)
    // The umask may have taken bits away, never added any: set exactly `mode`.
    if fchmod(fd.rawValue, mode) != 0 { throw SystemError("fchmod(\(path))", errno: .current) }
    try fd.writeAll(bytes)
    try fd.sync()
}

/// The value of an environment variable, if set.
public func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

/// fstat of a descriptor this process does not own (stderr for JOURNAL_STREAM): device and inode.
public func deviceAndInode(ofUnowned fd: Int32) -> (device: UInt64, inode: UInt64)? {
    var st = stat()
    guard fstat(fd, &st) == 0 else { return nil }
    return (UInt64(st.st_dev), UInt64(st.st_ino))
}

/// Blocks `signo` for the process, so it only ever arrives through a signal fd (sd-event's signal source).
public func blockSignal(_ signo: Int32) throws(SystemError) {
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, signo)
    let r = pthread_sigmask(SIG_BLOCK, &set, nil)
    if r != 0 { throw SystemError("pthread_sigmask", errno: r) }
}

/// exit(3): ends the process with `code`.
/// SIGPIPE ignored for the whole process: a write to a peer that went away (an H4 socket whose other end stopped
/// reading or closed) then fails with EPIPE, which the transport reports as a lost controller, instead of killing
/// beacond with a signal that systemd counts as a clean exit (so Restart=on-failure would never bring it back).
public func ignoreBrokenPipe() { signal(SIGPIPE, SIG_IGN) }

public func exitProcess(_ code: Int32) -> Never { exit(code) }

/// True when the descriptor (not owned: stdout, stderr) is a terminal.
public func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

/// getpid(2).
public func processID() -> Int32 { getpid() }

/// prctl(PR_SET_DUMPABLE, 0): no core dump of this process (a crash, SIGQUIT, a core pattern that keeps them), and
/// no ptrace or /proc/PID/mem by its own user: for a process about to hold secret keys. Idempotent.
public func disableCoreDumps() {
    _ = beacond_prctl_not_dumpable()
}

/// The names in a directory (without `.` and `..`), sorted bytewise.
public func directoryEntries(_ path: String) throws(SystemError) -> [String] {
    guard let dir = opendir(path) else { throw SystemError("opendir(\(path))", errno: .current) }
    defer { closedir(dir) }
    var names: [String] = []
    while true {
        Glibc.errno = 0
        guard let entry = readdir(dir) else {
            if Glibc.errno != 0 { throw SystemError("readdir(\(path))", errno: .current) }
            break
        }
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
}

/// getcwd(3): the working directory ("/" when it cannot be had).
public func currentDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return "/" }
    return String(cString: buffer)
}

/// geteuid(2).
public func processEffectiveUserID() -> UInt32 { geteuid() }

/// unlink(2), ignoring a name that is gone already.
public func removeFile(_ path: String) { _ = unlink(path) }

/// The name of the user with this uid (getpwuid_r: /etc/passwd, or systemd's dynamic users through nss-systemd).
public func userName(of uid: UInt32) -> String? {
    var pw = passwd()
    var result: UnsafeMutablePointer<passwd>?
    var buffer = [CChar](repeating: 0, count: 4096)
    guard getpwuid_r(uid, &pw, &buffer, buffer.count, &result) == 0, result != nil, let name = pw.pw_name else { return nil }
    return String(cString: name)
}

/// The command name of a process (/proc/PID/comm), nil when it cannot be read.
public func processName(_ pid: Int32) -> String? {
    guard pid > 0, let bytes = try? FileDescriptor.readFile("/proc/\(pid)/comm", limit: 64) else { return nil }
    return String(decoding: bytes, as: UTF8.self).split(separator: "\n").first.map(String.init)
}

/// Whether a process with this pid exists (kill(pid, 0): EPERM means it does, another user's).
public func processExists(_ pid: Int32) -> Bool {
    guard pid > 0 else { return false }
    return kill(pid, 0) == 0 || Glibc.errno == EPERM
}

/// kill(pid, SIGHUP): a daemon's request to reload.
public func sendHangup(to pid: Int32) throws(SystemError) {
    if kill(pid, SIGHUP) != 0 { throw SystemError("kill(\(pid), SIGHUP)", errno: .current) }
}

/// unlinkat(2) of `name` in the directory `dir` is open on, ignoring a name that is gone already.
public func removeFile(named name: String, in dir: FileDescriptor) { _ = unlinkat(dir.rawValue, name, 0) }

/// nanosleep(2) for `ms` milliseconds (a command-line tool's poll, never the daemon's loop).
public func sleepMilliseconds(_ ms: Int) {
    var t = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
    var left = timespec()
    while nanosleep(&t, &left) != 0 && Glibc.errno == EINTR { t = left }
}

/// The signals beacond's commands handle, for the event loop's signal sources (no module but this one needs
/// libc's constants).
public enum ProcessSignal {
    public static let hangup = SIGHUP
    public static let interrupt = SIGINT
    public static let terminate = SIGTERM
}

/// Whether `path` names anything (access(2) with F_OK, following symlinks).
public func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

/// What stat(2) says of `path` (following symlinks) that callers compare: the file's identity and whether it is a
/// directory. Nil when it cannot be stat'ed.
public struct FileIdentity: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64
    public var isDirectory: Bool
    /// For a character device (a serial line): the device it stands for (st_rdev), the same for every node of it.
    public var characterDevice: UInt64?

    public init(device: UInt64, inode: UInt64, isDirectory: Bool = false, characterDevice: UInt64? = nil) {
        (self.device, self.inode, self.isDirectory, self.characterDevice) = (device, inode, isDirectory, characterDevice)
    }

    public init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        isDirectory = st.st_mode & S_IFMT == S_IFDIR
        characterDevice = st.st_mode & S_IFMT == S_IFCHR ? UInt64(st.st_rdev) : nil
    }
}

/// realpath(3): `path` with every symlink, `.` and `..` resolved; nil when it (or a directory on the way) is missing.
public func realPath(_ path: String) -> String? {
    guard let p = realpath(path, nil) else { return nil }
    defer { free(p) }
    return String(cString: p)
}

/// The numeric addresses getaddrinfo(3) gives for `host` (what a TCP connection to it may reach), in its order;
/// empty when it does not resolve.
public func numericAddresses(of host: String) -> [String] {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_family = AF_UNSPEC
    var list: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, nil, &hints, &list) == 0 else { return [] }
    defer { freeaddrinfo(list) }
    var out: [String] = []
    var ai = list
    while let a = ai {
        ai = a.pointee.ai_next
        var name = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(a.pointee.ai_addr, a.pointee.ai_addrlen, &name, socklen_t(name.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
        let text = String(cString: name)
        if !out.contains(text) { out.append(text) }
    }
    return out
}
