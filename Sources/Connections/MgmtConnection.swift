// The shell around MgmtCommandFlow: executes its actions against the management socket and a timer on the event
// loop, and runs step sequences. No policy.
import BluetoothHCI
import HCIHost
import Mgmt
import HCITransport
import SystemdSupport

public final class MgmtConnection {
    private let socket: MgmtSocket
    private let runner: FlowRunner<IndexedMgmtFlow>
    private var reader: EventSource?
    public let index: UInt16
    public var isClosed: Bool { runner.isClosed }

    /// Events that answer none of our commands.
    public var onEvent: (MgmtEvent) -> Void = { _ in }
    /// The socket failed; everything pending has already failed.
    public var onClosed: (TransportError) -> Void = { _ in }

    /// Opens the control channel for commands to controller `index`.
    public init(index: UInt16, loop: EventLoop) throws(TransportError) {
        self.index = index
        let socket = try MgmtSocket()
        self.socket = socket
        do {
            runner = try FlowRunner(IndexedMgmtFlow(index: index), loop: loop)
        } catch {
            socket.close()
            throw .system("mgmt", error)
        }
        runner.write = { frame in try socket.write(frame) }
        runner.writeFailed = { [weak self] error in
            guard let self else { return false }
            // The kernel runs a command inside write() and hands back the command's own error there. ENETDOWN is
            // "hciN is not running" (powered off): the command failed, the socket is fine.
            if case .system(_, let e)? = error as? TransportError, e.errno == .networkDown, let op = self.runner.flow.flow.pendingOpcode {
                self.runner.received(MgmtEvent(index: index, kind: .commandStatus(op, .notPowered)))
                return true
            }
            self.close()
            self.onClosed(error as? TransportError ?? .broken("mgmt", reason: "\(error)"))
            return false
        }
        runner.other = { [weak self] action in
            if case .event(let e) = action { self?.onEvent(e) }
            return true
        }
        do {
            reader = try loop.addReader(fd: socket.fd) { [weak self] _ in self?.readable() }
        } catch {
            runner.close()
            socket.close()
            throw .system("mgmt", error)
        }
    }

    public func send(_ command: MgmtCommand, _ done: @escaping (Result<[UInt8], MgmtFailure>) -> Void) {
        runner.send(command, completion: done)
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
        reader?.cancel()
        socket.close()
        runner.close()
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
            runner.received(event)
        }
    }
}
