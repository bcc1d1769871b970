// What `run` and `scan` both do first on a controller: reset it when beacond owns it, learn what it can do, and
// pick the command family; and the one rule for switching family when the controller refuses the first choice.
import BluetoothHCI

/// Why a probe did not produce a ControllerInfo.
public enum ProbeFailure: Error, Sendable {
    case step(StepFailure)
    case malformedReply
}

extension ControllerConnection {
    /// Reset (only for a controller beacond owns), the three probe commands, then `extra`; reports the decoded info.
    public func probe(then extra: [Step] = [], _ done: @escaping (Result<ControllerInfo, ProbeFailure>) -> Void) {
        let resets = transport.ownsController
        let steps = (resets ? [Step(.reset)] : []) + ControllerInfo.probe.map { Step($0) } + extra
        run(steps) { result in
            switch result {
            case .failure(let f): done(.failure(.step(f)))
            case .success(let replies):
                let start = resets ? 1 : 0
                guard let info = try? ControllerInfo(probeReplies: Array(replies[start..<(start + ControllerInfo.probe.count)])) else {
                    return done(.failure(.malformedReply))
                }
                done(.success(info))
            }
        }
    }
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
