// Editing a file in place without a window: open it once, work from that descriptor and its directory's
// descriptor (openat, renameat), and check before the rename that the name still is the file that was read.
import Glibc
import SystemConditions

/// A file opened once for an atomic edit: its bytes, and where it lives.
public final class EditableFile {
    /// The path as given (for messages).
    public let path: String
    /// The opened file (symlinks in `path` followed once, at open).
    public let file: FileDescriptor
    /// Its directory and its name there, found from the opened file itself, not from `path` again.
    public let directory: FileDescriptor
    public let name: String
    /// Device, inode, mode and owner of the opened file.
    public let original: stat

    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        case system(SystemError)
        /// The name in the directory is no longer the file that was opened: someone swapped it.
        case replacedMeanwhile(String)
        case notRegularFile(String)

        /// What the failure means for the file's opener, in the pure modules' words.
        public var refusal: EditRefusal {
            switch self {
            case .system(let e) where e.call.hasPrefix("open("): .opening(e.condition)
            case .notRegularFile: .notRegularFile
            default: .other(description)
            }
        }

        public var description: String {
            switch self {
            case .system(let e): "\(e)"
            case .replacedMeanwhile(let p): "\(p) was replaced by another file while beacond worked on it; nothing was written"
            case .notRegularFile(let p): "\(p) is not a regular file"
            }
        }
    }

    /// Opens `path` for reading and locates it: the real directory comes from /proc/self/fd of the open file.
    public init(opening path: String) throws(Failure) {
        self.path = path
        do {
            file = try FileDescriptor.openRegularFile(path)
            original = try file.status()
        } catch {
            if error.errno == .isDirectory || error.errno == .invalidArgument { throw .notRegularFile(path) }
            throw .system(error)
        }
        let real: String
        do { real = try Self.realPath(of: file) } catch { throw .system(error) }
        var parts = real.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        name = parts.popLast() ?? ""
        let dir = parts.joined(separator: "/")
        do { directory = try FileDescriptor.open(dir.isEmpty ? "/" : dir, O_RDONLY | O_DIRECTORY) } catch { throw .system(error) }
        try checkUnchanged()
    }

    /// The contents, at most `limit` + 1 bytes (so a caller can tell "too big").
    public func read(limit: Int) throws(SystemError) -> [UInt8] { try file.readAll(limit: limit) }

    /// The name in the directory still names the opened file (same device and inode, not a symlink).
    public func checkUnchanged() throws(Failure) {
        var st = stat()
        let r = fstatat(directory.rawValue, name, &st, AT_SYMLINK_NOFOLLOW)
        if r != 0 { throw .system(SystemError("fstatat(\(name))", errno: .current)) }
        guard st.st_dev == original.st_dev, st.st_ino == original.st_ino else { throw .replacedMeanwhile(path) }
    }

    /// Replaces the file with `bytes`: a new file beside it (same directory) with the original's mode and owner,
    /// synced, checked, renamed over the name, and the directory synced. `beforeRename` is a test hook.
    ///
    /// What does not carry over: ACLs and extended attributes (the new file has none), and hard links (other names
    /// of the old inode keep the old contents). That is what every editor that saves atomically does.
    public func replace(with bytes: [UInt8], beforeRename: () -> Void = {}) throws(Failure) {
        let tmp: FileDescriptor, tmpName: String
        do { (tmp, tmpName) = try directory.createTemporary(beside: name, mode: 0o600) } catch { throw .system(error) }
        var committed = false
        defer { if !committed { _ = unlinkat(directory.rawValue, tmpName, 0) } }
        do throws(SystemError) {
            try tmp.writeAll(bytes)
            if fchmod(tmp.rawValue, original.st_mode & 0o7777) != 0 { throw SystemError("fchmod", errno: .current) }
            if fchown(tmp.rawValue, original.st_uid, original.st_gid) != 0 && Glibc.errno != EPERM {
                throw SystemError("fchown", errno: .current)
            }
            try tmp.sync()
        } catch { throw .system(error) }
        tmp.close()
        beforeRename()
        try checkUnchanged()
        if renameat(directory.rawValue, tmpName, directory.rawValue, name) != 0 {
            throw .system(SystemError("renameat(\(name))", errno: .current))
        }
        committed = true
        _ = try? directory.sync()
    }

    private static func realPath(of fd: FileDescriptor) throws(SystemError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let link = "/proc/self/fd/\(fd.rawValue)"
        let n = readlink(link, &buffer, buffer.count - 1)
        if n < 0 { throw SystemError("readlink(\(link))", errno: .current) }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension FileDescriptor {
    /// A new file in this directory, named after `name` (hidden, with a random suffix) and made with O_EXCL: each
    /// writer gets its own, so two processes writing the same file never touch each other's temporary file.
    func createTemporary(beside name: String, mode: mode_t) throws(SystemError) -> (FileDescriptor, String) {
        for attempt in 0..<16 {
            let candidate = ".\(name).\(Self.temporarySuffix(attempt))"
            do throws(SystemError) {
                return (try openAt(candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, mode: mode), candidate)
            } catch {
                if error.errno == Errno(rawValue: EEXIST) { continue }
                throw error
            }
        }
        throw SystemError("openat(temporary file beside \(name))", errno: Errno(rawValue: EEXIST))
    }

    private static func temporarySuffix(_ attempt: Int) -> String {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let x = UInt64(bitPattern: Int64(ts.tv_nsec)) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(getpid()) &+ UInt64(attempt)
        return String(x & 0xFF_FFFF_FFFF, radix: 36)
    }
}

/// Creates `name` in `directory` (made first, mode 0755, when it is missing) with `bytes`, so that after a power cut
/// it is either there whole or not there at all: written to a temporary name, synced, put in place, and the
/// directory synced so that the new name itself is on the disk. Without `replacing`, an existing `name` is never
/// replaced: that is an error (EEXIST), since a caller that keeps an identity must not make a second one. With it,
/// the new file is renamed over the old one (a reader sees the old contents or the new, never a mix). The file gets
/// `mode` less the process's umask, or exactly `mode` when `exactMode` (a file another user's program reads).
public func createFileDurably(named name: String, in directory: String, contents bytes: [UInt8], mode: mode_t = 0o644,
                              exactMode: Bool = false, replacing: Bool = false) throws(SystemError) {
    if mkdir(directory, 0o755) != 0 && Glibc.errno != EEXIST { throw SystemError("mkdir(\(directory))", errno: .current) }
    let dir = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY)
    try createFileDurably(named: name, in: dir, contents: bytes, mode: mode, exactMode: exactMode, replacing: replacing)
}

/// The same, in the directory `dir` is open on (see `FileDescriptor.openTrustedDirectory`).
public func createFileDurably(named name: String, in dir: FileDescriptor, contents bytes: [UInt8], mode: mode_t = 0o644,
                              exactMode: Bool = false, replacing: Bool = false) throws(SystemError) {
    try place(name, in: dir, bytes, mode: mode, exactMode: exactMode, replacing: replacing, synced: true)
}

/// Replaces `name` in `dir` with `bytes` as `createFileDurably(replacing: true)` does (a reader sees the old contents
/// or the new, never a mix), but syncs nothing: for a directory that does not outlive a boot (the runtime directory,
/// a tmpfs under systemd), where a power cut leaves no file to be whole or torn, and each fsync only delays the writer.
public func replaceFileAtomically(named name: String, in dir: FileDescriptor, contents bytes: [UInt8], mode: mode_t = 0o644,
                                  exactMode: Bool = false) throws(SystemError) {
    try place(name, in: dir, bytes, mode: mode, exactMode: exactMode, replacing: true, synced: false)
}

private func place(_ name: String, in dir: FileDescriptor, _ bytes: [UInt8], mode: mode_t, exactMode: Bool, replacing: Bool,
                   synced: Bool) throws(SystemError) {
    let (file, temporary) = try dir.createTemporary(beside: name, mode: mode)
    var committed = false
    defer { if !committed { _ = unlinkat(dir.rawValue, temporary, 0) } }
    if exactMode, fchmod(file.rawValue, mode) != 0 { throw SystemError("fchmod(\(temporary))", errno: .current) }
    try file.writeAll(bytes)
    if synced { try file.sync() }
    file.close()
    if replacing {
        if renameat(dir.rawValue, temporary, dir.rawValue, name) != 0 { throw SystemError("renameat(\(name))", errno: .current) }
        committed = true
    } else {
        // renameat2(RENAME_NOREPLACE) would refuse an existing name too, but not every file system takes it: link
        // the temporary file in (EEXIST if the name is there), then drop the temporary name.
        if linkat(dir.rawValue, temporary, dir.rawValue, name, 0) != 0 { throw SystemError("linkat(\(name))", errno: .current) }
        committed = true
        _ = unlinkat(dir.rawValue, temporary, 0)
    }
    if synced { try dir.sync() }
}

extension FileDescriptor {
    /// The directory at the absolute `path`, for a privileged writer in a directory other users may reach: opened
    /// one component at a time without following a symlink anywhere (ELOOP names the component), the last one made
    /// (mode 0755) when it is missing, and refused (EPERM) unless it belongs to root or this process's user and no
    /// one else may write it (or it is sticky, as /tmp). Whoever can write a parent can move the directory away, but not make this process
    /// write anywhere else: everything happens through the descriptor.
    public static func openTrustedDirectory(_ path: String) throws(SystemError) -> FileDescriptor {
        let parts = path.split(separator: "/").map(String.init)
        guard path.hasPrefix("/"), !parts.contains(".."), !parts.isEmpty else { throw SystemError("open(\(path)): not an absolute path", errno: .invalidArgument) }
        var dir = try open("/", O_RDONLY | O_DIRECTORY)
        for (k, part) in parts.enumerated() {
            let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW
            do {
                dir = try dir.openAt(part, flags)
            } catch where error.errno == .noEntry && k == parts.count - 1 {
                if mkdirat(dir.rawValue, part, 0o755) != 0 && Glibc.errno != EEXIST { throw SystemError("mkdirat(\(path))", errno: .current) }
                dir = try dir.openAt(part, flags)
            } catch where error.errno == Errno(rawValue: ELOOP) || error.errno == Errno(rawValue: ENOTDIR) {
                let at = "/" + parts[...k].joined(separator: "/")
                throw SystemError("open(\(path)): \(at) is a symbolic link (or not a directory), which is not followed", errno: error.errno)
            }
        }
        let st = try dir.status()
        // A sticky directory (/tmp) is fine too: no one else can rename or remove what this process puts there.
        guard st.st_uid == 0 || st.st_uid == geteuid(), st.st_mode & 0o022 == 0 || st.st_mode & S_ISVTX != 0 else {
            throw SystemError("open(\(path)): the directory belongs to user \(st.st_uid) with mode \(String(st.st_mode & 0o7777, radix: 8)): only a directory of root's (or this user's) that no one else may write is written to", errno: .notPermitted)
        }
        return dir
    }
}

/// One step of `FileDescriptor.walkToDirectory`: a directory it passed through, or a symlink it followed.
public struct PathStep: Sendable, Hashable {
    public var path: String
    public var owner: UInt32
    /// Permission bits with setuid, setgid and sticky.
    public var mode: UInt32
    public var isSymlink: Bool
    public init(path: String, owner: UInt32, mode: UInt32, isSymlink: Bool) {
        (self.path, self.owner, self.mode, self.isSymlink) = (path, owner, mode, isSymlink)
    }
}

extension FileDescriptor {
    /// The directory at the absolute `path`, opened one component at a time from "/" (made with `mode` when the last
    /// one is missing and `creating`), and every directory and symlink passed on the way, so that a caller can decide
    /// whom it trusts: whoever may write a directory on the way, or owns a symlink followed, chooses what the path
    /// names. Symlinks are followed by reading them (at most 40), never by the kernel behind the caller's back.
    public static func walkToDirectory(_ path: String, creating: Bool, mode: mode_t = 0o755) throws(SystemError) -> (FileDescriptor, [PathStep]) {
        guard path.hasPrefix("/") else { throw SystemError("open(\(path)): not an absolute path", errno: .invalidArgument) }
        var steps: [PathStep] = []
        var dir = try open("/", O_RDONLY | O_DIRECTORY)
        var here = ""
        func note(_ fd: FileDescriptor, _ at: String) throws(SystemError) {
            let st = try fd.status()
            steps.append(PathStep(path: at.isEmpty ? "/" : at, owner: st.st_uid, mode: UInt32(st.st_mode & 0o7777), isSymlink: false))
        }
        try note(dir, "")
        var rest = path.split(separator: "/").map(String.init)
        var hops = 0
        while !rest.isEmpty {
            let part = rest.removeFirst()
            if part == "." { continue }
            if part == ".." {
                let up = here.split(separator: "/").dropLast().joined(separator: "/")
                here = up.isEmpty ? "" : "/" + up
                dir = try open(here.isEmpty ? "/" : here, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
                continue
            }
            let at = here + "/" + part
            var st = stat()
            if fstatat(dir.rawValue, part, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                guard Glibc.errno == ENOENT, creating, rest.isEmpty else { throw SystemError("stat(\(at))", errno: .current) }
                if mkdirat(dir.rawValue, part, mode) != 0 && Glibc.errno != EEXIST { throw SystemError("mkdir(\(at))", errno: .current) }
                rest.insert(part, at: 0)  // made: opened on the next turn
                continue
            }
            if st.st_mode & S_IFMT == S_IFLNK {
                hops += 1
                guard hops <= 40 else { throw SystemError("open(\(path)): too many symbolic links", errno: Errno(rawValue: ELOOP)) }
                steps.append(PathStep(path: at, owner: st.st_uid, mode: UInt32(st.st_mode & 0o7777), isSymlink: true))
                var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
                let n = readlinkat(dir.rawValue, part, &buffer, buffer.count - 1)
                if n < 0 { throw SystemError("readlink(\(at))", errno: .current) }
                let target = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                rest = target.split(separator: "/").map(String.init) + rest
                if target.hasPrefix("/") {
                    here = ""
                    dir = try open("/", O_RDONLY | O_DIRECTORY)
                }
                continue
            }
            dir = try dir.openAt(part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            here = at
            try note(dir, here)
        }
        return (dir, steps)
    }
}

