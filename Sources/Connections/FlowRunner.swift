// The one runner both connection shells use: it carries a pure command flow's actions to a channel and a timer on
// the event loop, keeps the callback of each command, and fails whatever is pending at close. ControllerConnection
// (HCI over a transport) and MgmtConnection (the management socket) only read their channel and say what the
// flow's own actions (unsolicited events, a hung controller) mean.
import BluetoothHCI
import HCIHost
import Mgmt
import SystemCalls
import SystemdSupport

/// The part of a flow's action every runner handles the same way.
public enum RunnerAction<Failure: Error> {
    case write([UInt8])
    case armTimer(Duration)
    case cancelTimer
    case complete(UInt64, Result<[UInt8], Failure>)
}

/// What the runner needs of a command flow.
public protocol RunnableFlow {
    associatedtype Command
    associatedtype Input
    associatedtype Failure: Error
    associatedtype Action
    mutating func enqueue(_ command: Command, token: UInt64) -> [Action]
    mutating func received(_ input: Input) -> [Action]
    mutating func timerFired() -> [Action]
    mutating func closed() -> [Action]
    /// The action in the runner's terms, or nil for one its owner handles.
    static func common(_ action: Action) -> RunnerAction<Failure>?
    /// The failure of a command sent on a closed connection.
    static func notSent(_ command: Command) -> Failure
}

public final class FlowRunner<Flow: RunnableFlow> {
    public private(set) var flow: Flow
    private var timer: EventSource?
    private var callbacks: [UInt64: (Result<[UInt8], Flow.Failure>) -> Void] = [:]
    private var nextToken: UInt64 = 1
    public private(set) var isClosed = false

    /// Writes a frame to the channel.
    var write: ([UInt8]) throws -> Void = { _ in }
    /// A write failed: true when the owner dealt with it and the run goes on, false when the connection is gone.
    var writeFailed: (any Error) -> Bool = { _ in false }
    /// An action of the flow's own (an unsolicited event, a hung controller): false when the connection is gone.
    var other: (Flow.Action) -> Bool = { _ in true }

    init(_ flow: Flow, loop: EventLoop) throws(SystemError) {
        self.flow = flow
        timer = try loop.addIdleTimer { [weak self] in
            guard let self else { return }
            self.perform(self.flow.timerFired())
        }
    }

    /// Sends one command; `completion` gets its reply or failure.
    func send(_ command: Flow.Command, completion: @escaping (Result<[UInt8], Flow.Failure>) -> Void) {
        guard !isClosed else { return completion(.failure(Flow.notSent(command))) }
        let token = nextToken
        nextToken += 1
        callbacks[token] = completion
        perform(flow.enqueue(command, token: token))
    }

    /// Something read from the channel.
    func received(_ input: Flow.Input) { perform(flow.received(input)) }

    /// Stops the timer and fails whatever is pending.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        timer?.cancel()
        perform(flow.closed())
    }

    func perform(_ actions: [Flow.Action]) {
        for action in actions {
            guard let common = Flow.common(action) else {
                if !other(action) { return }
                continue
            }
            switch common {
            case .write(let frame):
                guard !isClosed else { continue }
                do { try write(frame) } catch {
                    if !writeFailed(error) { return }
                }
            case .armTimer(let d): timer?.rearm(after: d)
            case .cancelTimer: timer?.disarm()
            case .complete(let token, let result):
                if let cb = callbacks.removeValue(forKey: token) { cb(result) }
            }
        }
    }
}

extension CommandFlow: RunnableFlow {
    public mutating func closed() -> [Action] { transportClosed() }
    public static func common(_ a: Action) -> RunnerAction<CommandError>? {
        switch a {
        case .write(let f): .write(f)
        case .armTimer(let d): .armTimer(d)
        case .cancelTimer: .cancelTimer
        case .complete(let t, let r): .complete(t, r)
        case .unsolicited, .controllerHung: nil
        }
    }
    public static func notSent(_ command: HCICommand) -> CommandError { CommandError(opcode: command.opcode, reason: .transportClosed) }
}

/// MgmtCommandFlow for one controller index.
public struct IndexedMgmtFlow: RunnableFlow {
    public var flow = MgmtCommandFlow()
    public let index: UInt16
    public mutating func enqueue(_ command: MgmtCommand, token: UInt64) -> [MgmtCommandFlow.Action] {
        flow.enqueue(command, index: index, token: token)
    }
    public mutating func received(_ event: MgmtEvent) -> [MgmtCommandFlow.Action] { flow.received(event) }
    public mutating func timerFired() -> [MgmtCommandFlow.Action] { flow.timerFired() }
    public mutating func closed() -> [MgmtCommandFlow.Action] { flow.closed() }
    public static func common(_ a: MgmtCommandFlow.Action) -> RunnerAction<MgmtFailure>? {
        switch a {
        case .write(let f): .write(f)
        case .armTimer(let d): .armTimer(d)
        case .cancelTimer: .cancelTimer
        case .complete(let t, let r): .complete(t, r)
        case .event: nil
        }
    }
    public static func notSent(_ command: MgmtCommand) -> MgmtFailure { MgmtFailure(status: nil) }
}
