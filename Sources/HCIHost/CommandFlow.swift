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
    }

    public let opcode: Opcode
    public let reason: Reason

    public init(opcode: Opcode, reason: Reason) {
        self.opcode = opcode
        self.reason = reason
    }

    public var status: HCIStatus? { if case .status(let s) = reason { s } else { nil } }

    /// `LE Set Advertising Enable (0x200A) → Command Disallowed (0x0C)`.
    public var description: String {
        switch reason {
        case .status(let s): "\(opcode) → \(s)"
        case .timeout: "\(opcode) → no answer from the controller (timeout)"
        case .transportClosed: "\(opcode) → connection to the controller lost"
        case .malformedReply: "\(opcode) → malformed reply"
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
    }

    private struct Pending: Sendable {
        var token: CommandToken
        var command: HCICommand
    }

    private var queue: [Pending] = []
    private var inFlight: Pending?
    private var credits: UInt8 = 1
    /// On a kernel socket the kernel does the flow control; the credits in events are the kernel's, not ours.
    public let respectsCredits: Bool
    public let timeout: Duration

    public init(timeout: Duration = .seconds(2), respectsCredits: Bool = true) {
        self.timeout = timeout
        self.respectsCredits = respectsCredits
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
        guard let p = inFlight else { return [] }
        inFlight = nil
        credits = 1
        return [.complete(p.token, .failure(CommandError(opcode: p.command.opcode, reason: .timeout)))] + sendNext()
    }

    /// Everything pending fails; the flow starts over with one credit.
    public mutating func transportClosed() -> [Action] {
        var actions: [Action] = [.cancelTimer]
        let failed = (inFlight.map { [$0] } ?? []) + queue
        inFlight = nil
        queue = []
        credits = 1
        for p in failed {
            actions.append(.complete(p.token, .failure(CommandError(opcode: p.command.opcode, reason: .transportClosed))))
        }
        return actions
    }

    private mutating func sendNext() -> [Action] {
        guard inFlight == nil, !queue.isEmpty else { return [] }
        if respectsCredits && credits == 0 { return [] }
        let p = queue.removeFirst()
        inFlight = p
        if respectsCredits { credits -= 1 }
        return [.write(p.command.h4Frame), .armTimer(timeout)]
    }
}
