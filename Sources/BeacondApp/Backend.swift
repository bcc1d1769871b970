// The contract between the daemon's policy (retry, reload, stop, status) and the two ways of advertising on a
// controller: raw HCI commands (any device) and the kernel's management interface (hciN).
import BeaconCore
import BluetoothHCI
import HCIHost

/// What the controller (or the kernel) confirmed is on the air.
struct OnAir {
    /// The interval actually used (may differ from the config: raised for an old controller, or the kernel's
    /// default when the kernel cannot take one).
    var interval: AdvertisingInterval
    /// Short facts for STATUS: the backend and command family, the instance, the TX power.
    var details: [String]
    /// True when the interval is the kernel's default, not the configured one.
    var intervalIsKernelDefault = false
}

/// Why a backend could not do what it was asked.
struct BackendFailure: Error {
    /// A full sentence for the log and STATUS, naming the command and status where there is one.
    var message: String
    var level: LogLevel = .err
    var fields: [String] = []
    /// Set when retrying cannot help: a missing capability (77), no Bluetooth in this kernel (69).
    var fatal: ExitCode?
}

/// Things a backend notices on its own.
enum BackendEvent {
    /// The connection or the controller is gone: close this backend and retry.
    case lost(BackendFailure)
    /// Still connected, but the beacon is off the air because of someone else: apply it again after `delay`.
    case reapply(reason: String, delay: Duration, fields: [String])
}

/// One way of advertising on one controller. Single-threaded; every callback comes from the event loop.
protocol AdvertisingBackend: AnyObject {
    /// `hci` or `mgmt`.
    var name: String { get }
    var onEvent: (BackendEvent) -> Void { get set }
    /// Opens the controller and learns what it can do.
    func open(_ done: @escaping (BackendFailure?) -> Void)
    /// Puts `request` on the air. With `dataOnlyAllowed`, a change of data alone is made without taking
    /// advertising down; otherwise the full sequence runs.
    func apply(_ request: AdvertisingRequest, dataOnlyAllowed: Bool, _ done: @escaping (Result<OnAir, BackendFailure>) -> Void)
    /// Takes the beacon off the air (best effort); `done` is always called.
    func stop(_ done: @escaping () -> Void)
    /// Releases everything; no callbacks after this.
    func close()
}
