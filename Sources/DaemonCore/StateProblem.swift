// Why the state directory, or a lock in it, cannot be used, and what that means for what is kept there: BeacondApp's
// StateLock finds the problem, the decisions here say what it means, the stores carry them out.
import SystemConditions

/// Why the state directory, or a lock in it, cannot be used.
public struct StateProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// There is no such directory and none can be made: nothing is kept, and nothing is shared through it.
        case absent
        /// Not this user's, writable by others, or a lock file that is no lock: not used at all.
        case unusable
        /// Another process holds a lock past the deadline.
        case busy
    }
    public var kind: Kind
    public var description: String

    public init(kind: Kind, description: String) {
        (self.kind, self.description) = (kind, description)
    }

    /// What to do instead, said at the end of each refusal of a state directory. With sudo, `$(mktemp -d)` runs as the
    /// caller and makes a directory root's beacond refuses: the directory must be made by beacond's own user.
    public static let remedy = "give beacond a state directory of its own, made by the user it runs as (STATE_DIRECTORY=$(mktemp -d); "
        + "with sudo: STATE_DIRECTORY=$(sudo mktemp -d)), or the unit's StateDirectory="

    /// Why the lock file `file` in the state directory `directory` is no lock this process (of user `me`) can take.
    /// `device`: the device's lock (another beacond uses it), else the records' lock, waited for `waitMilliseconds`.
    public init(lock refusal: LockRefusal, file: String, directory: String, device: String?, me: UInt32, waitMilliseconds: Int) {
        switch refusal {
        case .held(let pid):
            let who = pid.map { "another beacond (pid \($0))" } ?? "another beacond"
            if let device {
                self.init(kind: .busy, description: "\(who) is running on \(device) with the state directory \(directory): stop it first, "
                          + "or give this one a state directory of its own (STATE_DIRECTORY=$(mktemp -d))")
            } else {
                self.init(kind: .busy, description: "\(file) is held by \(pid.map { "pid \($0)" } ?? "another process") for more than \(waitMilliseconds / 1000) s")
            }
        case .notRegularFile:
            self.init(kind: .unusable, description: "\(file) is not a regular file, so it is no lock: remove it")
        case .links(let n):
            self.init(kind: .unusable, description: "\(file) has \(n) links (a hard link to another file), so it is no lock: remove it")
        case .owner(let uid):
            self.init(kind: .unusable, description: "\(file) belongs to user \(uid), not to the user this beacond runs as (\(me)): "
                      + "remove it (a beacond run by hand in another user's state directory leaves such files); \(Self.remedy)")
        case .system(_, let text):
            self.init(kind: .unusable, description: "\(file) cannot be locked: \(text)")
        }
    }

    /// Why the device was not claimed (DeviceClaim, outside any state directory): another beacond holds it, or the
    /// claim itself failed. One controller takes one beacond, whatever its state directory (issue #53).
    public init(claim refusal: LockRefusal, device: String) {
        switch refusal {
        case .held(let pid):
            let who = pid.map { "another beacond (pid \($0))" } ?? "another beacond"
            self.init(kind: .busy, description: "\(who) is running on \(device): stop it first (one controller takes one beacond, whatever its "
                      + "state directory: beacond.service and beacond@hci0.service are two)")
        case .system(_, let text):
            self.init(kind: .unusable, description: "cannot claim \(device) for this beacond: \(text)")
        case .notRegularFile, .links, .owner:
            self.init(kind: .unusable, description: "cannot claim \(device) for this beacond: \(refusal)")
        }
    }

    /// Why no static address can be kept, and whether a beacon without its own `address` may fall back to the public
    /// address: only with no state directory at all (none can be made: a user without one). Anything else (a
    /// directory not beacond's, a lock held by another) is refused, so that no beacon goes on the air from an
    /// address other than its kept one.
    public var staticAddressRefusal: (message: String, fallsBack: Bool) {
        kind == .absent
            ? ("Cannot keep a static address: \(self); or set address = \"public\" or \"rotating\"", true)
            : ("Cannot keep a static address: \(self)", false)
    }

    /// The warning when the ownership record at `path` cannot be read: nil with no state directory at all (no earlier
    /// run kept one there).
    public func ownershipUnread(_ path: String) -> String? {
        kind == .absent ? nil : "Cannot read \(path): \(self); what an earlier run left on the controller is not removed"
    }
}
