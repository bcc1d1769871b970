// What `run` and `scan` both do first on a controller: reset it when beacond owns it, learn what it can do, and
// pick the command family; and the one rule for switching family when the controller refuses the first choice.
import BluetoothHCI

/// Why a probe did not produce a ControllerInfo.
public enum ProbeFailure: Error, Sendable {
    case step(StepFailure)
    case malformedReply
}

/// Why the probe for advertising failed: the probe itself, or the read of the set count after it.
public enum AdvertisingProbeFailure: Error, Sendable {
    case probe(ProbeFailure)
    case sets(StepFailure)
}

extension CommandFamily {
    /// When a start sequence in this family failed at `failure`, whether the other family is the one to use, and
    /// why (a sentence for the log). Only the first `leadingSteps` steps (the disable and the parameters) can tell:
    /// Command Disallowed there is the mixing rule (the other family was used since the controller's last reset);
    /// Unknown HCI Command is a controller that sets the LE Extended Advertising feature bit without implementing the
    /// commands (BlueZ's emulator does this).
    public func switchReason(after failure: StepFailure, leadingSteps: Int) -> String? {
        guard failure.index < leadingSteps, let s = failure.error.status else { return nil }
        switch s {
        case .commandDisallowed: return "\(other) commands are in use there"
        case .unknownHCICommand: return "the controller does not implement \(self) commands"
        default: return nil
        }
    }
}
