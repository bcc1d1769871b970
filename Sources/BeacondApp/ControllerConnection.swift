// Executes the pure command flow against a real transport and a real timer on the event loop.
import BluetoothHCI
import HCIHost
import HCITransport
import SystemdSupport

/// A step sequence that stopped: which step and why.
struct StepFailure: Error {
    let index: Int
    let step: Step
    let error: CommandError
}

final class ControllerConnection {
    let transport: Transport
    private var flow: CommandFlow
    private var framer = H4Framer()
    private var reader: EventSource?
    private var timer: EventSource?
    private var callbacks: [CommandToken: (Result<[UInt8], CommandError>) -> Void] = [:]
    private var nextToken: CommandToken = 1
    private(set) var isClosed = false

    /// Events that answer none of our commands.
    var onUnsolicited: (HCIEvent) -> Void = { _ in }
    /// A command another program sent to the same kernel device (the raw channel shows them): opcode and parameters.
    var onForeignCommand: (Opcode, [UInt8]) -> Void = { _, _ in }
    /// The transport broke; everything pending has already failed.
    var onClosed: (TransportError) -> Void = { _ in }

    init(transport: Transport, loop: EventLoop, timeout: Duration = .seconds(2)) throws(SystemdError) {
        self.transport = transport
        flow = CommandFlow(timeout: timeout, respectsCredits: transport.ownsController)
        timer = try loop.addIdleTimer { [weak self] in self?.perform(self?.flow.timerFired() ?? []) }
        reader = try loop.addReader(fd: transport.fd) { [weak self] _ in self?.readable() }
    }

    /// Sends one command; `completion` gets the return parameters (status first) or the error.
    func send(_ command: HCICommand, completion: @escaping (Result<[UInt8], CommandError>) -> Void) {
        guard !isClosed else {
            completion(.failure(CommandError(opcode: command.opcode, reason: .transportClosed)))
            return
        }
        let token = nextToken
        nextToken += 1
        callbacks[token] = completion
        perform(flow.enqueue(command, token: token))
    }

    /// Runs the steps in order, stopping at the first failure; a tolerated status counts as success.
    func run(_ steps: [Step], completion: @escaping (Result<[[UInt8]], StepFailure>) -> Void) {
        var replies: [[UInt8]] = []
        func next(_ i: Int) {
            guard i < steps.count else { return completion(.success(replies)) }
            let step = steps[i]
            send(step.command) { result in
                switch result {
                case .success(let r):
                    replies.append(r)
                    next(i + 1)
                case .failure(let e):
                    if let s = e.status, step.tolerated.contains(s) {
                        replies.append([s.rawValue])
                        next(i + 1)
                    } else {
                        completion(.failure(StepFailure(index: i, step: step, error: e)))
                    }
                }
            }
        }
        next(0)
    }

    /// Closes the transport and fails whatever is pending (without calling onClosed).
    func close() {
        guard !isClosed else { return }
        isClosed = true
        reader?.cancel()
        timer?.cancel()
        transport.close()
        perform(flow.transportClosed())
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
                    perform(flow.received(try HCIEvent(packet: packet.bytes)))
                } catch {
                    // A malformed event on an otherwise sound stream: skip it, the command timeout covers the rest.
                    continue
                }
            }
        } catch let e as TransportError {
            fail(e)
        } catch {
            fail(.broken(transport.spec.description, reason: "broken H4 stream: \(error)"))
        }
    }

    private func fail(_ reason: TransportError) {
        guard !isClosed else { return }
        close()
        onClosed(reason)
    }

    private func perform(_ actions: [CommandFlow.Action]) {
        for action in actions {
            switch action {
            case .write(let frame):
                guard !isClosed else { continue }
                do { try transport.write(frame) } catch {
                    fail(error)
                    return
                }
            case .armTimer(let d): timer?.rearm(after: d)
            case .cancelTimer: timer?.disarm()
            case .complete(let token, let result):
                if let cb = callbacks.removeValue(forKey: token) { cb(result) }
            case .unsolicited(let event): onUnsolicited(event)
            }
        }
    }
}
