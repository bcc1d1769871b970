// flock(2) on a file of a state directory: which process uses a device, and one writer at a time for the records
// beside it. The lock goes with the descriptor: it is released when the process exits, however it exits.
import Glibc

public final class FileLock {
    public let path: String
    private let file: FileDescriptor

    private init(path: String, file: FileDescriptor) {
        self.path = path
        self.file = file
    }

    /// Whether the lock was taken, and when not, what the holder wrote into the file (its pid).
    public enum Attempt {
        case taken(FileLock)
        case held(by: String)
    }

    /// Opens (or makes, mode 0644) `name` in `directory` and takes its lock exclusively: `wait` blocks until the
    /// holder lets go; otherwise a held lock is `.held` at once. The file is opened without following a symlink.
    public static func exclusive(_ name: String, in directory: String, wait: Bool) throws(SystemError) -> Attempt {
        let path = "\(directory)/\(name)"
        if mkdir(directory, 0o755) != 0 && Glibc.errno != EEXIST { throw SystemError("mkdir(\(directory))", errno: .current) }
        let dir = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY)
        let file: FileDescriptor
        do { file = try dir.openAt(name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY, mode: 0o644) } catch where error.errno == .accessDenied {
            // A process that may not write the directory may still read its records: it takes the lock all the same
            // (flock needs no write access), and writes nothing.
            file = try dir.openAt(name, O_RDONLY | O_NOFOLLOW | O_NOCTTY)
        }
        let fd = file.rawValue
        do {
            _ = try retryingInterrupts("flock(\(path))") { flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) }
        } catch where error.errno == .wouldBlock {
            let holder = (try? file.readAll(limit: 64)).map { String(decoding: $0, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? "" } ?? ""
            return .held(by: holder)
        }
        return .taken(FileLock(path: path, file: file))
    }

    /// Replaces the file's contents with `text` (the holder's pid, for whoever finds the lock held).
    public func record(_ text: String) {
        guard ftruncate(file.rawValue, 0) == 0 else { return }
        _ = lseek(file.rawValue, 0, SEEK_SET)
        try? file.writeAll(Array(text.utf8))
    }

    /// Lets go (closing the descriptor does too).
    public func release() { file.close() }
}
