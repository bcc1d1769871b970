// The words the lifecycle and the backends share: which backend, what is on the air, why something failed, the
// exit codes, and the retry backoff.
import BeaconCore
import BluetoothHCI
import HCIHost
import Mgmt

/// The two ways of advertising on a controller.
public enum BackendKind: String, Sendable, Hashable, CustomStringConvertible {
    /// Raw HCI commands (any device).
    case hci
    /// The kernel's management interface (hciN), next to bluetoothd.
    case mgmt
    public var description: String { rawValue }
}

/// What opening a backend learned about the controller that bears on the choice of backend.
public struct ControllerTraits: Sendable, Hashable {
    /// The controller has advertising sets of its own (LE extended advertising, as the kernel's management interface
    /// reports it in Read Advertising Features' supported flags); nil when the backend did not learn it.
    public var advertisingSets: Bool?
    public init(advertisingSets: Bool? = nil) { self.advertisingSets = advertisingSets }
}

/// Everything beacond wants on the air on one controller.
public struct AdvertisingSchedule: Sendable, Hashable {
    /// One advertisement per beacon, in config order, each with the public address: the backend puts in the address
    /// each beacon's setting gives.
    public var beacons: [AdvertisingRequest]
    /// Each beacon's address setting and identity, in the same order (the config's `addressesWanted`).
    public var addresses: [BeaconAddressWanted]
    /// `rotating`: a new value asks for new private addresses.
    public var addressGeneration: UInt64

    public init(beacons: [AdvertisingRequest], addresses: [BeaconAddressWanted], addressGeneration: UInt64 = 0) {
        precondition(addresses.count == beacons.count, "one address per beacon")
        self.beacons = beacons
        self.addresses = addresses
        self.addressGeneration = addressGeneration
    }

    /// Every beacon with the same setting, each filed under "beacon k" (tests, tools).
    public init(beacons: [AdvertisingRequest], address: AddressPolicy? = nil, addressGeneration: UInt64 = 0) {
        self.init(beacons: beacons, addresses: beacons.indices.map { BeaconAddressWanted(address.map { .policy($0) }, key: "beacon \($0 + 1)") },
                  addressGeneration: addressGeneration)
    }

    /// A single beacon (tests, tools).
    public init(_ request: AdvertisingRequest, address: AddressPolicy? = nil) {
        self.init(beacons: [request], address: address)
    }
}

/// What one beacon actually gets.
public struct BeaconOnAir: Sendable, Hashable {
    /// How often it is on the air: its interval, or for time-sliced beacons the whole round.
    public var every: Duration
    /// Short facts: the set or instance, the TX power, "time slice k of n", the address.
    public var details: [String]
    /// The TX power the controller reported selecting for it (dBm), when it reported one.
    public var txPower: Int8?
    /// Its own address when the beacons do not all share one.
    public var address: OwnAddress?
    /// Why it is off the air while the others are on (its address refused and the public one not for it, its
    /// counters not kept); nil when it is on the air.
    public var paused: String?
    /// Advertising events it gets each time it is on the air (a time slice that holds two: two); Eddystone-TLM counts them.
    public var events: Int
    public init(every: Duration, details: [String], txPower: Int8? = nil, address: OwnAddress? = nil, paused: String? = nil, events: Int = 1) {
        self.paused = paused
        self.events = max(1, events)
        self.every = every
        self.details = details
        self.txPower = txPower
        self.address = address
    }
}

/// What `beacond status` says about the controller in use: facts, not prose.
public struct ControllerSummary: Sendable, Hashable {
    public var backend: BackendKind
    /// The advertising commands in use: "legacy" or "extended" (HCI commands, or mgmt's Add Advertising and Add
    /// Extended Advertising).
    public var family: CommandFamily
    /// "5.0", "4.2"… as the controller reports it.
    public var bluetoothVersion: String?
    /// The company identifier of the controller's maker (Bluetooth Assigned Numbers).
    public var manufacturer: UInt16?
    /// Raw HCI, extended: the controller's advertising sets.
    public var sets: Int?
    /// mgmt: the kernel's advertising instances on this controller.
    public var instances: Int?
    /// Several beacons take turns on one advertiser (legacy time slices, or the kernel's rotation).
    public var timeSliced: Bool

    public init(backend: BackendKind, family: CommandFamily, bluetoothVersion: String? = nil, manufacturer: UInt16? = nil, sets: Int? = nil,
                instances: Int? = nil, timeSliced: Bool = false) {
        self.backend = backend
        self.family = family
        self.bluetoothVersion = bluetoothVersion
        self.manufacturer = manufacturer
        self.sets = sets
        self.instances = instances
        self.timeSliced = timeSliced
    }
}

/// What the controller (or the kernel) confirmed is on the air.
public struct OnAir: Sendable, Hashable {
    /// The interval actually used (may differ from the config: raised for an old controller, or the kernel's
    /// default when the kernel cannot take one). With several beacons: the first one's.
    public var interval: AdvertisingInterval
    /// Short facts for STATUS: the backend and command family, the instance, the TX power, the address.
    public var details: [String]
    /// Set when the kernel chose the interval, not beacond (through mgmt): what it uses.
    public var kernelInterval: KernelInterval?
    /// A single beacon's TX power as the controller reported it (dBm); with several, each beacon's own.
    public var txPower: Int8?
    /// Per beacon, in the schedule's order (empty: a single beacon described by the fields above).
    public var beacons: [BeaconOnAir]
    /// The controller, for `beacond status` (nil from a backend that does not say).
    public var controller: ControllerSummary?
    /// Each beacon's own address as the backend set it, in the schedule's order (nil where the kernel or the
    /// controller picks it); empty when the backend does not say.
    public var addresses: [OwnAddress?]
    /// Why the beacons go out from other addresses than their own settings give, for now ("another program scans on
    /// hci0"); nil when each has its own.
    public var addressesHeldBack: String?

    public init(interval: AdvertisingInterval, details: [String], kernelInterval: KernelInterval? = nil, txPower: Int8? = nil,
                beacons: [BeaconOnAir] = [], controller: ControllerSummary? = nil, addresses: [OwnAddress?] = [], addressesHeldBack: String? = nil) {
        self.addressesHeldBack = addressesHeldBack
        self.interval = interval
        self.details = details
        self.kernelInterval = kernelInterval
        self.txPower = txPower
        self.beacons = beacons
        self.controller = controller
        self.addresses = addresses
    }

    /// The TX power of beacon `k` of `count`, when the controller reported one.
    public func txPower(of k: Int, count: Int) -> Int8? {
        count == 1 || beacons.isEmpty ? txPower : k < beacons.count ? beacons[k].txPower : nil
    }
}

extension KernelInterval {
    /// For STATUS: "every <this>".
    public var description: String {
        switch self {
        case .addAdvertisingDefault: "\(spoken) (kernel default)"
        case .legacyNonConnectable: "\(spoken) (the kernel's choice)"
        }
    }

    /// Why the configured intervals (each beacon's own) are not used, and what to do about it.
    public func warning(configured: [AdvertisingInterval]) -> String {
        let distinct = configured.reduce(into: [AdvertisingInterval]()) { if !$0.contains($1) { $0.append($1) } }
        let named = distinct.count == 1 ? "interval \(distinct[0]) is"
            : "intervals \(distinct.dropLast().map(\.description).joined(separator: ", ")) and \(distinct.last!) are"
        let why = switch self {
        case .addAdvertisingDefault: "the kernel's management interface here can only advertise at its default interval (\(spoken))"
        case .legacyNonConnectable: "on a controller without advertising sets the kernel sends non-connectable advertising at \(spoken) whatever the instance asks"
        }
        return "The configured \(named) not used: \(why). Set backend = \"hci\" when the interval matters."
    }
}

/// Why a backend could not do what it was asked.
public struct BackendFailure: Error, Sendable, Hashable {
    /// A full sentence for the log and STATUS, naming the command and status where there is one.
    public var message: String
    public var level: LogLevel
    public var fields: [String]
    /// Set when retrying cannot help: a missing capability (77), no Bluetooth in this kernel (69).
    public var fatal: ExitCode?
    /// The management interface cannot serve this device, but raw HCI may (backend auto then falls back): mgmt
    /// refused beacond (no CAP_NET_ADMIN), or the device exists and mgmt calls it an invalid index (the kernel's
    /// setup of it failed at registration; raw HCI brings it up again with HCIDEVUP).
    public var rawHCIMayWork: Bool
    /// The controller answered nothing (a command timed out, or it gave no command credit back): on a kernel
    /// device, failures like this in a row end in a power cycle.
    public var unanswered: Bool

    public init(message: String, level: LogLevel = .err, fields: [String] = [], fatal: ExitCode? = nil, rawHCIMayWork: Bool = false,
                unanswered: Bool = false) {
        self.message = message
        self.level = level
        self.fields = fields
        self.fatal = fatal
        self.rawHCIMayWork = rawHCIMayWork || fatal == .noPermission
        self.unanswered = unanswered
    }
}

extension BackendFailure {
    /// No AF_BLUETOOTH here: retrying cannot help (exit 69).
    public static func noBluetooth(_ device: String) -> BackendFailure {
        BackendFailure(message: "Cannot use \(device): this kernel or network namespace has no Bluetooth (AF_BLUETOOTH)", fatal: .unavailable)
    }
}

/// Exit codes (sysexits.h, as systemd and swift-argument-parser use them).
public enum ExitCode: Int32, Sendable, Hashable {
    case success = 0
    case failure = 1
    /// `scan --expect`: a beacon of the configs was not heard before the timeout.
    case beaconMissing = 2
    /// `scan --expect`: a frame with a beacon's identity but other content than its config's was heard.
    case beaconMismatch = 3
    /// `status`, `reload`: no beacond runs (LSB's "program is not running", as `systemctl status` says it).
    public static let notRunning = ExitCode.beaconMismatch
    case usage = 64
    /// No controller reachable.
    case unavailable = 69
    /// EX_TEMPFAIL: not now, later. `run`: another beacond uses the device with the same state directory (the unit
    /// tries again).
    case temporaryFailure = 75
    /// Missing privilege (a capability), or `run`'s state directory or lock is not its user's own.
    case noPermission = 77
    /// Config file errors.
    case config = 78
}

/// Exponential backoff from 250 ms to 30 s with ±20 % jitter (never above 30 s), so a fleet does not retry in
/// lockstep. The jitter comes from a seeded generator, so a test can replay a sequence.
public struct Backoff: Sendable {
    public static let first = Duration.milliseconds(250)
    public static let limit = Duration.seconds(30)
    public private(set) var attempt = 0
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> Duration {
        var base = Self.first
        for _ in 0..<attempt where base < Self.limit { base *= 2 }
        if base > Self.limit { base = Self.limit }
        attempt += 1
        let jittered = base * (0.8 + 0.4 * unitRandom())
        return min(jittered, Self.limit)
    }

    public mutating func reset() { attempt = 0 }

    /// SplitMix64, mapped to [0, 1).
    private mutating func unitRandom() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }
}

/// Counts for Eddystone-TLM: the time since beacond started and the advertising PDUs its beacons sent, from the time
/// each was on the air and how often (an advertising event sends one PDU on each of the three primary channels).
/// The controller reports no such count, so it is computed, to within one telemetry period.
public struct TelemetryClock: Sendable {
    public let startedAt: UInt64
    private var lastAt: UInt64
    private var pdus: Double = 0

    /// `startedAt`: CLOCK_MONOTONIC in µs.
    public init(startedAt: UInt64) {
        self.startedAt = startedAt
        lastAt = startedAt
    }

    /// Moves to `now`; `onAir`: how often each beacon was on the air since the last call (nil: none was).
    public mutating func advance(to now: UInt64, onAir: [Duration]?) {
        let elapsed = Double(now &- lastAt) / 1_000_000
        lastAt = max(lastAt, now)
        for every in onAir ?? [] {
            let seconds = Double(every.components.seconds) + Double(every.components.attoseconds) / 1e18
            if seconds > 0 { pdus += 3 * elapsed / seconds }
        }
    }

    public func telemetry(temperature: Int16?) -> Telemetry {
        // The counter wraps, as a 32-bit counter on a beacon does.
        Telemetry(temperature: temperature, advertisingCount: UInt32(truncatingIfNeeded: UInt64(min(pdus, 1.8e19))),
                  uptimeTenths: UInt32(clamping: (lastAt &- startedAt) / 100_000))
    }
}
