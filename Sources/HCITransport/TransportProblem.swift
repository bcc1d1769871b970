// HCITransport's errors in the pure modules' words (TransportProblem), for the decisions the raw-HCI backend and
// `scan` share (DaemonCore's HCIDecisions).
import SystemCalls
import SystemConditions

extension TransportError {
    /// What the failure means, in the pure modules' words (SystemConditions' TransportProblem).
    public var problem: TransportProblem {
        switch self {
        case .deviceAbsent: .absent
        case .deviceDown(_, let cap): .down(capability: cap)
        case .permissionDenied(_, let cap, let e): .permission(capability: cap, detail: "\(e)")
        case .system(_, let e) where e.errno == .addressFamilyNotSupported: .noBluetooth
        default: .other("\(self)")
        }
    }
}
