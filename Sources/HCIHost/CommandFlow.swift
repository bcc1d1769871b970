// The HCI command flow as a value type: one command in flight, credits respected, a timeout per command,
// each reply matched to its command. Events in, actions out; a small class elsewhere executes the actions.
import BluetoothHCI

/// Why a command did not succeed.
public struct CommandError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        /// The controller answered with this status.
        case status(HCIStatus)
        /// No answer within the timeout.
        case timeout
        /// The transport closed before the answer came.
        case transportClosed
        /// The answer could not be decoded.
        case malformedReply
        /// Never sent: the controller gave no command credit back for this long and counts as hung.
        case noCredit(Duration)
        /// Never sent: the sequence it belonged to was stopped before it, for this reason.
        case withheld(String)
    }

    public let opcode: Opcode
    public let reason: Reason

    public init(opcode: Opcode, reason: Reason) {
        self.opcode = opcode
        self.reason = reason
    }

    public var status: HCIStatus? { if case .status(let s) = reason { s } else { nil } }

    /// The controller answered nothing: no reply in time, or no command credit to send it with.
    public var unanswered: Bool {
        switch reason {
        case .timeout, .noCredit: true
        case .status, .transportClosed, .malformedReply, .withheld: false
        }
    }

    /// `LE Set Advertising Enable (0x200A) → Command Disallowed (0x0C)`.
    public var description: String {
        switch reason {
        case .status(let s): "\(opcode) → \(s)"
        case .timeout: "\(opcode) → no answer from the controller (timeout)"
        case .transportClosed: "\(opcode) → connection to the controller lost"
        case .malformedReply: "\(opcode) → malformed reply"
        case .noCredit(let d): "\(opcode) → not sent: the controller gave no command credit back within \(d.components.seconds) s and is treated as hung"
        case .withheld(let why): "\(opcode) → not sent: \(why)"
        }
    }
}

/// Opaque identifier the owner uses to match completions to its callbacks.
public typealias CommandToken = UInt64

public struct CommandFlow: Sendable {
    public enum Action: Sendable, Hashable {
        /// Send these H4 bytes (type byte first).
        case write([UInt8])
        /// The command with this token finished: its return parameters (status first) or why it failed.
        case complete(CommandToken, Result<[UInt8], CommandError>)
        /// (Re)arm the single command timer.
        case armTimer(Duration)
        case cancelTimer
        /// An event not answering one of our commands (Hardware Error, LE Meta, replies to other sockets' commands).
        case unsolicited(HCIEvent)
        /// The controller took a command, gave back no credit, and none came within `creditTimeout`: it is hung
        /// (the Linux kernel's ncmd timer). Everything pending has failed; the owner reopens the controller.
        case controllerHung(Duration)
    }

    private struct Pending: Sendable {
        var token: CommandToken
        var command: HCICommand
    }

    private var queue: [Pending] = []
    private var inFlight: Pending?
    private var credits: UInt8 = 1
    /// The timer runs for a credit, not for a reply: commands wait and the controller owes us a credit.
    private var waitingForCredit = false
    /// On a kernel socket the kernel does the flow control; the credits in events are the kernel's, not ours.
    public let respectsCredits: Bool
    public let timeout: Duration
    /// How long commands may wait for a credit before the controller counts as hung. The kernel uses 4 s
    /// (HCI_NCMD_TIMEOUT) and then resets the controller.
    public let creditTimeout: Duration

    public init(timeout: Duration = .seconds(2), respectsCredits: Bool = true, creditTimeout: Duration = .seconds(4)) {
        self.timeout = timeout
        self.respectsCredits = respectsCredits
        self.creditTimeout = creditTimeout
    }

    public var isIdle: Bool { inFlight == nil && queue.isEmpty }
    public var inFlightOpcode: Opcode? { inFlight?.command.opcode }

    public mutating func enqueue(_ command: HCICommand, token: CommandToken) -> [Action] {
        queue.append(Pending(token: token, command: command))
        return sendNext()
    }

    public mutating func received(_ event: HCIEvent) -> [Action] {
        switch event {
        case .commandComplete(let ncmd, let opcode, let ret):
            if opcode.rawValue == 0 {  // only hands back credits
                credits = ncmd
                return sendNext()
            }
            guard let p = inFlight, p.command.opcode == opcode else { return [.unsolicited(event)] }
            credits = ncmd
            inFlight = nil
            let result: Result<[UInt8], CommandError>
            if let status = ret.first {
                result = status == 0 ? .success(ret) : .failure(CommandError(opcode: opcode, reason: .status(HCIStatus(rawValue: status))))
            } else {
                result = .failure(CommandError(opcode: opcode, reason: .malformedReply))
            }
            return [.cancelTimer, .complete(p.token, result)] + sendNext()
        case .commandStatus(let status, let ncmd, let opcode):
            if opcode.rawValue == 0 {
                credits = ncmd
                return sendNext()
            }
            guard let p = inFlight, p.command.opcode == opcode else { return [.unsolicited(event)] }
            credits = ncmd
            inFlight = nil
            // None of our commands completes by Command Status; a success here still ends the command.
            let result: Result<[UInt8], CommandError> = status == .success
                ? .success([status.rawValue]) : .failure(CommandError(opcode: opcode, reason: .status(status)))
            return [.cancelTimer, .complete(p.token, result)] + sendNext()
        default:
            return [.unsolicited(event)]
        }
    }

    /// The in-flight command got no answer in time. It fails; the controller is presumed to have dropped it,
    /// so one credit is assumed back (the owner usually reopens the transport after a timeout anyway).
    public mutating func timerFired() -> [Action] {
        if waitingForCredit {
            waitingForCredit = false
            return transportClosed(reason: .noCredit(creditTimeout)) + [.controllerHung(creditTimeout)]
        }
        guard let p = inFlight else { return [] }
        inFlight = nil
        credits = 1
        return [.complete(p.token, .failure(CommandError(opcode: p.command.opcode, reason: .timeout)))] + sendNext()
    }

    /// Everything pending fails; the flow starts over with one credit.
    public mutating func transportClosed() -> [Action] { transportClosed(reason: .transportClosed) }

    private mutating func transportClosed(reason: CommandError.Reason) -> [Action] {
        var actions: [Action] = [.cancelTimer]
        let failed = (inFlight.map { [$0] } ?? []) + queue
        inFlight = nil
        queue = []
        credits = 1
        waitingForCredit = false
        for p in failed {
            actions.append(.complete(p.token, .failure(CommandError(opcode: p.command.opcode, reason: reason))))
        }
        return actions
    }

    private mutating func sendNext() -> [Action] {
        guard inFlight == nil, !queue.isEmpty else { return [] }
        if respectsCredits && credits == 0 {
            // Commands wait for a credit. A controller that never gives one back must not hold them forever.
            guard !waitingForCredit else { return [] }
            waitingForCredit = true
            return [.armTimer(creditTimeout)]
        }
        waitingForCredit = false
        let p = queue.removeFirst()
        inFlight = p
        if respectsCredits { credits -= 1 }
        return [.write(p.command.h4Frame), .armTimer(timeout)]
    }
}

/// A step sequence that stopped: which step and why (the controller's error).
public typealias StepFailure = SequenceFailure<Step, CommandError>

extension SequenceFailure where SequenceStep == Step, Failure == CommandError {
    public var error: CommandError { failure }
    public init(index: Int, step: Step, error: CommandError) {
        self.init(index: index, step: step, failure: error)
    }
}
