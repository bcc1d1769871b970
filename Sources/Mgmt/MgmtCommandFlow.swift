// The mgmt command flow as a value type, like HCI's CommandFlow: one command pending at a time, its reply matched
// by opcode, a timeout per command. Events in, actions out; MgmtConnection executes the actions.
import BluetoothHCI
import HCIHost

/// A management command that did not succeed: the kernel's status, or nil when no answer came (timeout, closed).
public struct MgmtFailure: Error, Sendable, Hashable {
    public let status: MgmtStatus?
    public init(status: MgmtStatus?) { self.status = status }
}

public struct MgmtCommandFlow: Sendable {
    public typealias Token = UInt64

    public enum Action: Sendable, Hashable {
        /// Send this command frame.
        case write([UInt8])
        /// The command with this token finished: its return parameters or why not.
        case complete(Token, Result<[UInt8], MgmtFailure>)
        case armTimer(Duration)
        case cancelTimer
        /// An event that answers none of our commands (Index Removed, New Settings, Advertising Removed …).
        case event(MgmtEvent)
    }

    private struct Pending: Sendable {
        var token: Token
        var command: MgmtCommand
        var index: UInt16
    }

    private var queue: [Pending] = []
    private var pending: Pending?
    public let timeout: Duration

    public init(timeout: Duration = .seconds(3)) { self.timeout = timeout }

    public var isIdle: Bool { pending == nil && queue.isEmpty }
    public var pendingOpcode: MgmtOpcode? { pending?.command.opcode }

    /// Queues `command` for controller `index` (commands without an index go to MgmtCommand.noIndex).
    public mutating func enqueue(_ command: MgmtCommand, index: UInt16, token: Token) -> [Action] {
        let global = command.opcode == .readVersion || command.opcode == .readIndexList
        queue.append(Pending(token: token, command: command, index: global ? MgmtCommand.noIndex : index))
        return sendNext()
    }

    public mutating func received(_ event: MgmtEvent) -> [Action] {
        let opcode: MgmtOpcode
        let result: Result<[UInt8], MgmtFailure>
        switch event.kind {
        case .commandComplete(let op, let status, let params):
            opcode = op
            result = status == .success ? .success(params) : .failure(MgmtFailure(status: status))
        case .commandStatus(let op, let status):
            opcode = op
            result = status == .success ? .success([]) : .failure(MgmtFailure(status: status))
        default:
            return [.event(event)]
        }
        // Replies to other sockets' commands never reach us; a reply we are not waiting for (late, after a
        // timeout) is dropped.
        guard let p = pending, p.command.opcode == opcode else { return [] }
        pending = nil
        return [.cancelTimer, .complete(p.token, result)] + sendNext()
    }

    /// The pending command got no answer in time: it fails and the next one goes.
    public mutating func timerFired() -> [Action] {
        guard let p = pending else { return [] }
        pending = nil
        return [.complete(p.token, .failure(MgmtFailure(status: nil)))] + sendNext()
    }

    /// Everything pending fails.
    public mutating func closed() -> [Action] {
        let failed = (pending.map { [$0] } ?? []) + queue
        pending = nil
        queue = []
        return [.cancelTimer] + failed.map { .complete($0.token, .failure(MgmtFailure(status: nil))) }
    }

    private mutating func sendNext() -> [Action] {
        guard pending == nil, !queue.isEmpty else { return [] }
        let p = queue.removeFirst()
        pending = p
        return [.write(p.command.frame(index: p.index)), .armTimer(timeout)]
    }
}

/// One command of a sequence, and whether its failure ends the sequence.
public struct MgmtStep: Sendable, Hashable {
    public var command: MgmtCommand
    /// A failure here is expected and harmless: go on with the next step.
    public var mayFail: Bool
    public init(_ command: MgmtCommand, mayFail: Bool = false) {
        self.command = command
        self.mayFail = mayFail
    }
}

/// A step sequence that stopped: at which step and why.
public typealias MgmtStepFailure = SequenceFailure<MgmtStep, MgmtFailure>
