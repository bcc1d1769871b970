// HCITransport's errors in DaemonCore's words (TransportProblem), for the decisions HCIBackend and `scan` share.
import DaemonCore
import HCITransport
import SystemCalls

extension TransportError {
    var problem: TransportProblem {
        switch self {
        case .deviceAbsent: .absent
        case .deviceDown(_, let cap): .down(capability: cap)
        case .permissionDenied(_, let cap, let e): .permission(capability: cap, detail: "\(e)")
        case .system(_, let e) where e.errno == .addressFamilyNotSupported: .noBluetooth
        default: .other("\(self)")
        }
    }
}
