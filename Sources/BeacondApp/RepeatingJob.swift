// A timer that runs while something holds: armed when it should run and is not armed yet, disarmed when it should
// not. The raw-HCI backend's time slices, refreshes and address retries are each one.
import SystemdSupport

final class RepeatingJob {
    private let loop: EventLoop
    private let fire: () -> Void
    private var timer: EventSource?

    init(_ loop: EventLoop, fire: @escaping () -> Void) {
        (self.loop, self.fire) = (loop, fire)
    }

    /// Armed for `after` when `active` and not armed already; disarmed when not `active`.
    func sync(active: Bool, after: Duration) {
        guard active else { timer?.disarm(); return }
        if timer == nil { timer = try? loop.addIdleTimer { [weak self] in self?.fire() } }
        if timer?.isArmed != true { timer?.rearm(after: after) }
    }

    /// Armed again for `after`, whatever it was.
    func rearm(after: Duration) { timer?.rearm(after: after) }

    func cancel() { timer?.cancel() }
}
