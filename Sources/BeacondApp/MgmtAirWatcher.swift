// The mgmt backend's proof of the air: follows, through the raw channel, the advertising enable commands that reach
// the controller while beacond's instances are registered (HCIHost's AirWatch decides), so that "the kernel holds
// beacond's instances" is checked against what the controller was told.
import BluetoothHCI
import Connections
import DaemonCore
import HCIHost
import HCITransport
import SystemCalls
import SystemdSupport

final class MgmtAirWatcher {
    /// The controller was told to stop and not to start again while beacond's instances are held: the reason.
    var onSilence: (String) -> Void = { _ in }
    /// beacond's instances on the air now, in beacon order; nil while nothing is applied (no check then, and no
    /// waiting counted).
    var instances: () -> [UInt8]? = { nil }

    private let index: UInt16
    private let device: DeviceSpec
    private let sets: Bool
    private let loop: EventLoop
    private let log: Logger
    private var watch: AirWatch?
    private var connection: ControllerConnection?
    private var timer: EventSource?
    private var unavailableSaid = false

    init(index: UInt16, device: DeviceSpec, sets: Bool, loop: EventLoop, log: Logger) {
        (self.index, self.device, self.sets, self.loop, self.log) = (index, device, sets, loop, log)
    }

    /// After each apply (the raw channel is opened the first time).
    func applied(ours: Set<UInt8>) {
        if watch != nil { watch!.applied(ours: ours); return arm() }
        do {
            let c = try ControllerConnection(transport: try Transport.watchCommands(index: index), loop: loop)
            c.onForeignCommand = { [weak self] opcode, p in self?.watched(opcode, p) }
            c.onClosed = { [weak self] _ in self?.end() }
            connection = c
            watch = AirWatch(sets: sets, ours: ours)
        } catch {
            if !unavailableSaid {
                unavailableSaid = true
                log.notice("Cannot watch the commands that reach \(device) (\(error)): beacond takes the kernel's word that its instances are on the air", ["HCI_DEVICE=\(device)"])
            }
        }
    }

    func end() {
        timer?.disarm()
        connection?.close()
        (watch, connection) = (nil, nil)
    }

    func close() {
        end()
        timer?.cancel()
    }

    private static func now() -> Duration { .microseconds(Int64(monotonicMicroseconds())) }

    private func watched(_ opcode: Opcode, _ p: [UInt8]) {
        guard watch != nil else { return }
        watch!.command(opcode, p, at: Self.now())
        arm()
    }

    private func arm() {
        guard let next = watch?.nextCheck else { timer?.disarm(); return }
        if timer == nil { timer = try? loop.addIdleTimer { [weak self] in self?.check() } }
        let now = Self.now()
        timer?.rearm(after: next > now ? next - now : .zero)
    }

    private func check() {
        guard watch != nil, let instances = instances() else { return }
        let now = Self.now()
        let off = watch!.offSince.map { now - $0 } ?? .zero
        if watch!.due(at: now) { onSilence(MgmtDecisions.silenceReason(device: device.description, off: off, instances: instances)) }
        arm()
    }
}
