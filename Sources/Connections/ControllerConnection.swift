// The shell around CommandFlow: executes its actions against a real transport and a real timer on the event loop.
// It knows no policy; it runs commands and step sequences and reports what it sees.
import BluetoothHCI
import HCIHost
import HCITransport
import SystemCalls
import SystemConditions
import SystemdSupport

/// Why a connection ended without being closed by its owner.
public enum ConnectionLoss: Error, Sendable, CustomStringConvertible {
    /// What the loss means, in the pure modules' words.
    public var loss: LinkLoss {
        switch self {
        case .transport(let e): .transport(e.problem, text: "\(e)")
        case .hung(let d): .hung(d)
        }
    }

    /// The transport failed or the peer went away.
    case transport(TransportError)
    /// The controller kept no credit for us for this long (the kernel's ncmd timer).
    case hung(Duration)

    public var description: String {
        switch self {
        case .transport(let e): "\(e)"
        case .hung(let d): "the controller gave no command credit back within \(d.components.seconds) s"
        }
    }
}

public final class ControllerConnection {
    public let transport: Transport
    private let runner: FlowRunner<CommandFlow>
    private var framer = H4Framer()
    private var reader: EventSource?
    public var isClosed: Bool { runner.isClosed }

    /// Events that answer none of our commands.
    public var onUnsolicited: (HCIEvent) -> Void = { _ in }
    /// A command another program sent to the same kernel device (the raw channel shows them): opcode and parameters.
    public var onForeignCommand: (Opcode, [UInt8]) -> Void = { _, _ in }
    /// An event packet that does not decode (too short for its code, a length that disagrees): skipped.
    public var onMalformed: (_ code: UInt8, _ reason: String) -> Void = { _, _ in }
    /// The connection ended by itself; everything pending has already failed.
    public var onClosed: (ConnectionLoss) -> Void = { _ in }

    public init(transport: Transport, loop: EventLoop, timeout: Duration = .seconds(2)) throws(SystemError) {
        self.transport = transport
        runner = try FlowRunner(CommandFlow(timeout: timeout, respectsCredits: transport.ownsController), loop: loop)
        runner.write = { [transport] frame in try transport.write(frame) }
        runner.writeFailed = { [weak self] error in
            self?.fail(.transport(error as? TransportError ?? .broken(transport.spec.description, reason: "\(error)")))
            return false
        }
        runner.other = { [weak self] action in
            switch action {
            case .unsolicited(let event): self?.onUnsolicited(event); return true
            case .controllerHung(let d): self?.fail(.hung(d)); return false
            default: return true
            }
        }
        reader = try loop.addReader(fd: transport.fd) { [weak self] _ in self?.readable() }
    }

    /// Sends one command; `completion` gets the return parameters (status first) or the error.
    public func send(_ command: HCICommand, completion: @escaping (Result<[UInt8], CommandError>) -> Void) {
        runner.send(command, completion: completion)
    }

    /// Runs the steps in order, stopping at the first failure; a tolerated status counts as success. `withholding`
    /// is asked before each step is sent: an error it gives fails that step unsent (a sequence whose ground moved
    /// under it, such as an enable after another program wrote the controller's random address).
    public func run(_ steps: [Step], withholding: @escaping (Step) -> CommandError? = { _ in nil },
                    completion: @escaping (Result<[[UInt8]], StepFailure>) -> Void) {
        runInOrder(steps, send: { [weak self] step, answer in
            guard let self else { return answer(.failure(CommandFlow.notSent(step.command))) }
            if let withheld = withholding(step) { return answer(.failure(withheld)) }
            self.send(step.command, completion: answer)
        }, tolerated: { step, e in
            e.status.flatMap { step.tolerated.contains($0) ? [$0.rawValue] : nil }
        }, done: { result in
            completion(result.mapError { StepFailure(index: $0.index, step: $0.step, error: $0.failure) })
        })
    }

    /// Closes the transport and fails whatever is pending (without calling onClosed).
    public func close() {
        guard !isClosed else { return }
        reader?.cancel()
        transport.close()
        runner.close()
    }

    private func readable() {
        guard !isClosed else { return }
        do {
            let bytes = try transport.read()
            if bytes.isEmpty { return }
            framer.append(bytes)
            while !isClosed, let packet = try framer.next() {
                if packet.type == .command, packet.bytes.count >= 3 {
                    let opcode = Opcode(rawValue: UInt16(packet.bytes[0]) | UInt16(packet.bytes[1]) << 8)
                    onForeignCommand(opcode, Array(packet.bytes.dropFirst(3)))
                    continue
                }
                guard packet.type == .event else { continue }  // ACL/ISO data are not ours to handle
                do {
                    runner.received(try HCIEvent(packet: packet.bytes))
                } catch {
                    // A malformed event on an otherwise sound stream: skip it, the command timeout covers the rest.
                    onMalformed(error.code, error.reason)
                    continue
                }
            }
        } catch let e as TransportError {
            fail(.transport(e))
        } catch {
            fail(.transport(.broken(transport.spec.description, reason: "broken H4 stream: \(error)")))
        }
    }

    private func fail(_ reason: ConnectionLoss) {
        guard !isClosed else { return }
        close()
        onClosed(reason)
    }
}
