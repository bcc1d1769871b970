// The lifecycle's vocabulary: its timings, its phases, the events it takes and the actions it gives (Lifecycle.swift
// has what it does with them).
import BeaconCore
import BluetoothHCI
import HCIHost

extension Lifecycle {
    /// After a power cycle, the longest wait for the kernel's "up" before the device is opened anyway.
    static let afterPowerCycle = Duration.seconds(1)

    /// The bound on an open or an apply. Each command has its own timeout (2 s HCI, 3 s mgmt) and a hung
    /// controller is caught within 4 s; this is the backstop that keeps any backend from holding the daemon.
    public static let operationDeadline = Duration.seconds(45)
    /// How long a stop may take before beacond exits anyway.
    public static let stopDeadline = Duration.seconds(3)
    /// How often Eddystone-TLM frames get new values.
    public static let telemetryPeriod = Duration.seconds(10)
    /// The longest a BTHome self-report stays the same. It rides the telemetry's ticks (every 10 s, each armed when the
    /// last fired, so late ticks add up): a frame 45 s old is renewed at the next tick, normally the fifth, 50 s after
    /// it, which leaves a tick's worth of lateness before a receiver would wait more than a minute.
    public static let selfReportPeriod = Duration.seconds(60)
    static let selfReportRenewal = UInt32((selfReportPeriod - telemetryPeriod * 3 / 2).components.seconds)

    /// Where the daemon is. Every phase but `exited` has a timer armed or an open backend whose fd moves it on
    /// (tests check this after every event).
    public enum Phase: Sendable, Hashable {
        /// Before `start`.
        case idle
        /// The config has no beacon uuid yet (a fresh install): no backend, nothing on the air, nothing armed. A
        /// reload (SIGHUP) or a stop moves it on.
        case unprovisioned
        /// A backend is being opened (probe); the operation deadline is armed.
        case opening
        /// An apply is running; the operation deadline is armed.
        case applying
        /// The controller confirmed the beacon on the air. Nothing is armed: the backend's fd (loss, foreign
        /// commands, connections), signals and device events move it on.
        case advertising
        /// Open, but the beacon was taken off the air by someone else; the timer puts it back.
        case reapplyWait
        /// No backend; the retry timer is armed.
        case waiting
        /// A kernel controller answered nothing again and again (the "command tx timeout" family): no backend, and
        /// the executor takes the device down and up again; the operation deadline is armed.
        case powerCycling
        /// SIGTERM: taking the beacon off the air; the stop deadline is armed.
        case stopping
        /// Final.
        case exited(ExitCode)
    }

    public enum Event: Sendable {
        case start
        /// The answer to `powerCycle`: nil when the device was powered off and on again.
        case powerCycled(BackendFailure?)
        /// With what the open learned about the controller.
        case opened(ControllerTraits = ControllerTraits())
        case openFailed(BackendFailure)
        case applied(OnAir)
        case applyFailed(BackendFailure)
        /// The backend finished taking the beacon off the air (or there was nothing to take off).
        case stopped
        case lost(BackendFailure)
        /// What is on the air changed by itself, the beacons still on it (the controller refused beacond's addresses
        /// while another program scans, or takes them again): STATUS follows.
        case onAirChanged(OnAir)
        /// The beacon is off the air because of another program or a connection; `at` is CLOCK_MONOTONIC's time.
        case reapply(reason: String, delay: Duration, fields: [String], at: Duration)
        /// A kernel device event for our hciN.
        case device(KernelDeviceEvent.Kind)
        case hangup
        case terminate(signal: String)
        case timerFired
        case configLoaded(BeaconConfiguration)
        case configRefused(ConfigError)
        /// New values for the Eddystone-TLM beacons (every `telemetryPeriod` while the config has one).
        case telemetry(Telemetry)
        /// `address = "rotating"` or `"resolvable"`: time for a new private address (every `address_rotation_s`).
        case addressPeriod
        /// The wall clock (Unix seconds) and whether it is synchronized: before the start, and at every EID period
        /// boundary (the `eidRotation` timer) while the config has an Eddystone-EID beacon.
        /// The wall clock, and whether the kernel calls it synchronized (nil: it cannot tell, which counts as
        /// synchronized, said once).
        case clock(sinceEpoch: Duration, synchronized: Bool?)
        /// The answer to `supplySelfReport`.
        case selfReportSupplied(SelfReportSupply)
    }

    public enum Action: Sendable, Hashable {
        /// Make a backend of this kind and open it; answer with `opened` or `openFailed`.
        case open(BackendKind, mayBringUp: Bool)
        /// Answer with `applied` or `applyFailed`.
        /// With `dataOnlyAllowed`, what is on the air and did not change stays untouched, and a beacon whose data
        /// alone changed is updated in place.
        case apply(AdvertisingSchedule, dataOnlyAllowed: Bool)
        /// Take everything of beacond's off the controller (with no backend open: what the kernel still keeps for
        /// beacond, such as a mgmt instance). Answer with `stopped`, always.
        case stopAdvertising
        /// Release the backend; none of its callbacks may arrive after this.
        case closeBackend
        /// Take the kernel device down and up again, as `hciconfig hci0 down` and `up` do (the kernel closes it
        /// whatever the controller answers; on a Raspberry Pi's UART radio the driver switches the chip's power
        /// pin). Answer with `powerCycled`.
        case powerCycle
        /// Read and validate the config file; answer with `configLoaded` or `configRefused`.
        case loadConfig
        case armTimer(Duration)
        case cancelTimer
        /// The periodic timers: answer with `telemetry` or `addressPeriod` when it fires (it is then spent; the
        /// lifecycle arms it again while it is still wanted).
        case armPeriodic(PeriodicTimer, Duration)
        case cancelPeriodic(PeriodicTimer)
        /// The encrypted BTHome self-report's address and counters from the state directory (its kept static address,
        /// a block of counters written ahead). Answer with `selfReportSupplied` at once, before any other event.
        case supplySelfReport(SelfReportNeeds)
        /// Send these sd_notify assignments as one datagram.
        case notify([String])
        /// RELOADING=1 with MONOTONIC_USEC (the executor reads the clock).
        case notifyReloading
        case log(LogLevel, String, [String])
        case setLogLevel(LogLevel)
        case exit(ExitCode)
    }

    public enum PeriodicTimer: Sendable, Hashable {
        /// New Eddystone-TLM values, every `telemetryPeriod`, while the config has such a beacon or a BTHome
        /// self-report (whose uptime comes with them).
        case telemetry
        /// A new private address, every `address_rotation_s`, while beacond rotates it.
        case addressRotation
        /// The next EID period boundary: every 2^K seconds of the wall clock (the smallest K of the EID beacons);
        /// the executor arms it to fire at the boundary itself and answers with `clock`.
        case eidRotation
    }
}
