// The contract between the lifecycle's executor and the two ways of advertising on a controller: raw HCI
// commands (any device) and the kernel's management interface (hciN).
import BeaconCore
import DaemonCore
import HCIHost

/// Things a backend notices on its own.
enum BackendEvent {
    /// The connection or the controller is gone: close this backend and retry.
    case lost(BackendFailure)
    /// Still connected, but the beacon is off the air because of someone else: apply it again after `delay`.
    case reapply(reason: String, delay: Duration, fields: [String])
    /// What is on the air changed by itself (the controller refused beacond's addresses while another program scans,
    /// or takes them again).
    case changed(OnAir)
}

/// One way of advertising on one controller. Single-threaded; every callback comes from the event loop.
protocol AdvertisingBackend: AnyObject {
    var kind: BackendKind { get }
    var onEvent: (BackendEvent) -> Void { get set }
    /// Opens the controller and learns what it can do.
    func open(_ done: @escaping (BackendFailure?) -> Void)
    /// What the open learned about the controller (read after a successful open).
    var traits: ControllerTraits { get }
    /// Puts every beacon of `schedule` on the air. With `dataOnlyAllowed`, beacons already on the air as wanted are
    /// not touched and a change of data alone is made without taking that beacon down; otherwise everything is
    /// sent in full.
    func apply(_ schedule: AdvertisingSchedule, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void)
    /// Takes everything of beacond's off the controller (best effort); `done` is always called.
    func stop(_ done: @escaping () -> Void)
    /// Releases everything; no callbacks after this.
    func close()
}
