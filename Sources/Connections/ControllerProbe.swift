// What `run` and `scan` both do first on a controller (ControllerProbe.swift in HCIHost has the pure part).
import BluetoothHCI
import HCIHost

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
