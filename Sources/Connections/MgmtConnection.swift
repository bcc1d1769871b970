// The shell around MgmtCommandFlow: executes its actions against the management socket and a timer on the event
// loop, and runs step sequences. No policy.
import BluetoothHCI
import HCIHost
import Mgmt
import HCITransport
import SystemdSupport

public final class MgmtConnection {
    private let socket: MgmtSocket
    private var flow = MgmtCommandFlow()
    private var reader: EventSource?
    private var timer: EventSource?
    private var callbacks: [MgmtCommandFlow.Token: (Result<[UInt8], MgmtFailure>) -> Void] = [:]
    private var nextToken: MgmtCommandFlow.Token = 1
    public let index: UInt16
    public private(set) var isClosed = false

    /// Events that answer none of our commands.
    public var onEvent: (MgmtEvent) -> Void = { _ in }
    /// The socket failed; everything pending has already failed.
    public var onClosed: (TransportError) -> Void = { _ in }

    /// Opens the control channel for commands to controller `index`.
    public init(index: UInt16, loop: EventLoop) throws(TransportError) {
        self.index = index
        socket = try MgmtSocket()
        do {
            timer = try loop.addIdleTimer { [weak self] in self?.perform(self?.flow.timerFired() ?? []) }
            reader = try loop.addReader(fd: socket.fd) { [weak self] _ in self?.readable() }
        } catch {
            socket.close()
            throw .system("mgmt", error)
        }
    }

    public func send(_ command: MgmtCommand, _ done: @escaping (Result<[UInt8], MgmtFailure>) -> Void) {
        guard !isClosed else { return done(.failure(MgmtFailure(status: nil))) }
        let token = nextToken
        nextToken += 1
        callbacks[token] = done
        perform(flow.enqueue(command, index: index, token: token))
    }

    /// Runs the steps in order, stopping at the first failure of a step that may not fail (a step that may fail
    /// still stops the sequence when no answer came); the replies of all, empty for a tolerated failure.
    public func run(_ steps: [MgmtStep], _ done: @escaping (Result<[[UInt8]], MgmtStepFailure>) -> Void) {
        runInOrder(steps, send: { [weak self] step, answer in
            guard let self else { return answer(.failure(MgmtFailure(status: nil))) }
            self.send(step.command, answer)
        }, tolerated: { step, f in
            step.mayFail && f.status != nil ? [] : nil
        }, done: { result in
            done(result.mapError { MgmtStepFailure(index: $0.index, step: $0.step, failure: $0.failure) })
        })
    }

    /// Closes the socket and fails whatever is pending (without calling onClosed).
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        reader?.cancel()
        timer?.cancel()
        socket.close()
        perform(flow.closed())
    }

    private func readable() {
        guard !isClosed else { return }
        let frames: [[UInt8]]
        do { frames = try socket.read() } catch {
            close()
            return onClosed(error)
        }
        for frame in frames {
            guard !isClosed else { return }
            // A frame the codec cannot read is not ours to act on; the command timeout covers a lost reply.
            guard let event = try? MgmtEvent(frame: frame) else { continue }
            perform(flow.received(event))
        }
    }

    private func perform(_ actions: [MgmtCommandFlow.Action]) {
        for action in actions {
            switch action {
            case .write(let frame):
                guard !isClosed else { continue }
                do { try socket.write(frame) } catch {
                    // The kernel runs a command inside write() and hands back the command's own error there. ENETDOWN
                    // is "hciN is not running" (powered off): the command failed, the socket is fine.
                    if case .system(_, let e) = error, e.errno == .networkDown, let op = flow.pendingOpcode {
                        perform(flow.received(MgmtEvent(index: index, kind: .commandStatus(op, .notPowered))))
                        continue
                    }
                    close()
                    return onClosed(error)
                }
            case .armTimer(let d): timer?.rearm(after: d)
            case .cancelTimer: timer?.disarm()
            case .complete(let token, let result):
                if let cb = callbacks.removeValue(forKey: token) { cb(result) }
            case .event(let e): onEvent(e)
            }
        }
    }
}
