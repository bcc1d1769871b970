// What the lifecycle told systemd (READY=1 once, the STATUS it has now, a reload under way) and the record of the
// reloads that `beacond reload` and `beacond status` read. The lifecycle decides when; this value words the
// datagrams and remembers.
import BeaconCore

extension Lifecycle {
    /// How a reload (SIGHUP) ended, for `beacond reload` and `beacond status`.
    public enum ReloadResult: String, Sendable, Hashable {
        /// The file was taken and what it asks for settled (on the air, or waiting for the controller).
        case applied
        /// The file has errors: the previous configuration stays.
        case refused
        case inProgress = "in-progress"
    }
}

struct SystemdRecord: Sendable {
    private var readySent = false
    /// Between RELOADING=1 and its READY=1.
    private(set) var reloading = false
    /// The STATUS systemd has now (without a refused reload's note).
    private(set) var lastStatus = ""
    /// Reloads begun since the start (SIGHUPs taken; several before one is handled count once).
    private(set) var reloadCount = 0
    private(set) var reloadResult: Lifecycle.ReloadResult?
    /// The last file refused, and how many were refused since the start (a new refusal of the same errors counts).
    private(set) var lastRefusal: ConfigError?
    private(set) var refusalCount = 0

    /// STATUS when it changed. `ready`: this state also completes start-up, so READY=1 goes with the first. During a
    /// reload nothing goes out: the final state goes with its READY=1 (`settled`).
    mutating func status(_ s: String, ready: Bool = false) -> Lifecycle.Action? {
        if ready && !readySent {
            readySent = true
            lastStatus = s
            return .notify(["READY=1", "STATUS=\(s)"])
        }
        guard s != lastStatus else { return nil }
        lastStatus = s
        return reloading ? nil : .notify(["STATUS=\(s)"])
    }

    /// A settled phase was entered: a reload under way ends, READY=1 with whatever STATUS is true now.
    mutating func settled() -> Lifecycle.Action? {
        guard reloading else { return nil }
        reloading = false
        reloadResult = .applied
        return .notify(["READY=1", "STATUS=\(lastStatus)"])
    }

    /// SIGHUP taken: RELOADING=1.
    mutating func reloadBegun() -> Lifecycle.Action {
        reloading = true
        reloadCount += 1
        reloadResult = .inProgress
        return .notifyReloading
    }

    /// The file was refused: READY=1, and a note on the STATUS that lasts in systemd until the state changes
    /// (`lastStatus` stays the plain state, so a second bad reload does not stack notes).
    mutating func refused(_ error: ConfigError) -> Lifecycle.Action {
        reloading = false
        reloadResult = .refused
        lastRefusal = error
        refusalCount += 1
        return .notify(["READY=1", "STATUS=\(lastStatus); kept previous configuration: \(error.summary)"])
    }
}
