// Running a list of commands one after another on a connection that answers each asynchronously: the one place
// both shells (HCI's ControllerConnection, mgmt's MgmtConnection) do it.

/// The step a sequence stopped at, and why.
public struct SequenceFailure<SequenceStep: Sendable, Failure: Error>: Error {
    public let index: Int
    public let step: SequenceStep
    public let failure: Failure
    public init(index: Int, step: SequenceStep, failure: Failure) {
        self.index = index
        self.step = step
        self.failure = failure
    }
}

extension SequenceFailure: Hashable, Equatable where SequenceStep: Hashable, Failure: Hashable {}

/// Sends `steps` in order through `send`, each after the previous one answered. A failure that `tolerated` turns
/// into a reply counts as success; any other failure stops the sequence.
public func runInOrder<Step: Sendable, Reply, Failure: Error>(
    _ steps: [Step],
    send: @escaping (Step, @escaping (Result<Reply, Failure>) -> Void) -> Void,
    tolerated: @escaping (Step, Failure) -> Reply?,
    done: @escaping (Result<[Reply], SequenceFailure<Step, Failure>>) -> Void
) {
    func next(_ i: Int, _ replies: [Reply]) {
        guard i < steps.count else { return done(.success(replies)) }
        let step = steps[i]
        send(step) { result in
            switch result {
            case .success(let r):
                next(i + 1, replies + [r])
            case .failure(let f):
                if let r = tolerated(step, f) { return next(i + 1, replies + [r]) }
                done(.failure(SequenceFailure(index: i, step: step, failure: f)))
            }
        }
    }
    next(0, [])
}
