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

extension ControllerConnection {
    /// The probe, then how many advertising sets an extended controller has (LE Read Number of Supported Advertising
    /// Sets; a controller that sets the feature bit without the command refuses it and gets 1, ending up on legacy
    /// commands anyway). `capacity(reply)` reads the count from the reply.
    public func probeForAdvertising(capacity: @escaping ([UInt8]?) -> Int?,
                                    _ done: @escaping (Result<(ControllerInfo, capacity: Int?), AdvertisingProbeFailure>) -> Void) {
        probe { [weak self] result in
            guard let self else { return }
            switch result {
            case .failure(let f): done(.failure(.probe(f)))
            case .success(let info) where info.preferredFamily != .extended: done(.success((info, 1)))
            case .success(let info):
                self.run([Step(.leReadNumberOfSupportedAdvertisingSets, tolerating: [.unknownHCICommand, .unsupportedFeatureOrParameterValue, .commandDisallowed])]) { result in
                    switch result {
                    case .success(let replies): done(.success((info, capacity(replies.first))))
                    case .failure(let f): done(.failure(.sets(f)))
                    }
                }
            }
        }
    }
}
