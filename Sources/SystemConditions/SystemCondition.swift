// What a failed system call means, in words a pure module can decide from. SystemCalls says which one a SystemError
// is (SystemError.condition); BeaconCore and DaemonCore decide what it means for beacond (which message, which
// problem) without seeing SystemCalls, and BeacondApp only carries the decision out. No system calls, no dependencies.

/// A system call's failure: the kinds beacond's decisions tell apart, and the errno's own words.
public struct SystemCondition: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// ENOENT: no such file or directory.
        case notFound
        /// EEXIST: the name is taken.
        case exists
        /// EACCES: permission denied.
        case accessDenied
        /// EISDIR: a directory where a file was meant.
        case isDirectory
        /// EINVAL: for an open of a file, one that is no regular file (a FIFO, a device, a socket).
        case invalidArgument
        /// EFBIG: more than the reader takes.
        case tooLarge
        /// Any other errno.
        case other
    }

    public var kind: Kind
    /// The errno's own words (strerror's text: `No such file or directory`), what a message shows.
    public var description: String

    public init(_ kind: Kind, _ description: String) {
        (self.kind, self.description) = (kind, description)
    }
}

/// Why a lock file's lock was not taken (SystemCalls' FileLock.Failure.refusal), in the pure modules' words.
public enum LockRefusal: Sendable, Hashable {
    /// Another open file description holds it: the holder's pid, when the kernel names it.
    case held(by: Int32?)
    /// A FIFO, device, socket or directory.
    case notRegularFile
    /// A hard link: this many links.
    case links(UInt64)
    /// Not this process's user's: the owner.
    case owner(UInt32)
    /// A system call failed: what it means, and the failure's own words (call and errno).
    case system(SystemCondition, text: String)
}
