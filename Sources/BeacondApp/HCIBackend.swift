// Advertising with raw HCI commands: on an H4 stream beacond owns (reset, probe, advertise) or on a kernel hciN
// through the raw channel (never reset; other programs' commands are watched). This class carries commands and arms
// timers; the decisions are HCIHost's (HCIAdvertiser, event meanings, ForeignCommand) and DaemonCore's (HCIDecisions).
import BeaconCore
import BluetoothHCI
import Connections
import DaemonCore
import HCIHost
import HCITransport
import SystemCalls
import SystemdSupport

final class HCIBackend: AdvertisingBackend {
    let kind = BackendKind.hci
    let traits = ControllerTraits()
    var onEvent: (BackendEvent) -> Void = { _ in }

    private let device: DeviceSpec
    private var name: String { device.description }
    private let loop: EventLoop
    private let log: Logger
    private let mayBringUp: Bool
    private let owned: OwnershipStore
    private var connection: ControllerConnection?
    /// Carries the advertiser's steps on the open connection; nil before the connection.
    private var runner: HCIAdvertiserRunner?
    private var closed = false

    private let addresses: AddressKeeper

    init(device: DeviceSpec, loop: EventLoop, log: Logger, mayBringUp: Bool, owned: OwnershipStore, addresses: AddressKeeper) {
        (self.owned, self.device, self.loop, self.log, self.mayBringUp, self.addresses) = (owned, device, loop, log, mayBringUp, addresses)
    }

    func open(_ done: @escaping (BackendFailure?) -> Void) {
        let transport: Transport, c: ControllerConnection
        do { transport = try Transport.open(device, mayBringUp: mayBringUp) } catch { return done(HCIDecisions.opening(name, error.problem, mayBringUp: mayBringUp)) }
        do { c = try ControllerConnection(transport: transport, loop: loop) } catch {
            return done(BackendFailure(message: "Failed to watch \(device): \(error)", fatal: .failure))
        }
        connection = c
        let runner = HCIAdvertiserRunner(connection: c, device: device, loop: loop, log: log, owned: owned, addresses: addresses)
        runner.onEvent = { [weak self] e in self?.onEvent(e) }
        self.runner = runner
        // The backend may be gone by the time the connection reports (the daemon drops it on the first failure).
        c.onClosed = { [weak self] reason in
            guard let self, !self.closed else { return }
            self.onEvent(.lost(HCIDecisions.lost(self.name, reason.loss)))
        }
        c.onUnsolicited = { [weak self] event in self?.unsolicited(event) }
        c.onMalformed = { [weak self] code, reason in
            self?.runner?.oddity("malformed-\(code)", "The controller on \(self?.name ?? "") sent a malformed event \(hex8(code)) (\(reason)); ignoring it")
        }
        c.onForeignCommand = { [weak self] opcode, params in self?.foreignCommand(opcode, params) }
        c.probeForAdvertising(capacity: HCIDecisions.capacity(fromReply:)) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .failure(let f): done(HCIDecisions.probeFailed(f, device: self.name))
            case .success(let (probed, capacity)):
                // On a kernel hciN, the sets a killed run left: the first apply removes those no beacon needs.
                let owns = c.transport.ownsController
                let a = HCIAdvertiser(device: self.name, info: probed, capacity: capacity, ownsController: owns,
                                      leftOver: owns ? [] : self.owned[self.name, .hciSets])
                runner.advertiser = a
                for (level, line) in HCIDecisions.probeLines(probed, family: a.family, capacity: capacity, device: self.name) { self.log.log(level, line) }
                done(nil)
            }
        }
    }

    /// Takes hciINDEX down and up again (Transport.powerCycle): nil, or why it failed.
    static func powerCycle(index: UInt16) -> BackendFailure? {
        do throws(TransportError) { try Transport.powerCycle(index: index) } catch { return BackendFailure(message: "\(error)", level: .warning) }
        return nil
    }

    func apply(_ schedule: AdvertisingSchedule, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void) {
        guard let runner else { return done(.failure(BackendFailure(message: "The controller on \(device) is not open"))) }
        runner.apply(schedule, dataOnlyAllowed: dataOnlyAllowed, done)
    }

    func stop(_ done: @escaping () -> Void) {
        guard let runner else { return done() }
        runner.stop(done)
    }

    func close() {
        closed = true
        runner?.close()
        connection?.close()
        connection = nil
    }

    private func unsolicited(_ event: HCIEvent) {
        guard !closed else { return }
        switch event.unsolicitedMeaning(device: name, ownsController: connection?.transport.ownsController == true) {
        case .lost(let message): onEvent(.lost(BackendFailure(message: message)))
        case .oddity(let kind, let message): runner?.oddity(kind, message)
        case .connectableInterrupted(let why) where runner?.advertiser?.connectableInterrupted() == true:
            onEvent(.reapply(reason: "Connectable advertising on \(device) stopped: \(why)", delay: .zero, fields: ["HCI_DEVICE=\(device)"]))
        case .connectableInterrupted, .nothing: break
        }
    }

    /// Another program talked to our kernel device: if it can take our advertising off the air, put it back shortly.
    private func foreignCommand(_ opcode: Opcode, _ p: [UInt8]) {
        // A scan beside beacond's beacons (the kernel's, for Home Assistant): the advertiser moves them itself.
        runner?.otherProgramCommand(opcode, p)
        guard runner?.advertiser?.foreignCommand(opcode, p) == true else { return }
        runner?.syncAfterEvent()
        onEvent(.reapply(reason: ForeignCommand.reason(opcode, device: name), delay: ForeignCommand.delay(opcode),
                         fields: ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(opcode.rawValue))"]))
    }
}
