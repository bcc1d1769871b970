// What the executor and the state file read of the lifecycle: the backend, the reload record, the clock, which
// periodic timers the config wants, how often the beacons are on the air. Queries only; the decisions are in
// Lifecycle.swift.
import BeaconCore
import HCIHost

extension Lifecycle {
    /// The backend in use (nil when none is open).
    public var backend: BackendKind? { choice.open }

    var lastStatus: String { systemd.lastStatus }
    /// The wall clock as last told (Eddystone's time counter), and whether it was synchronized.
    var clock: (time: UInt32, synchronized: Bool)? { content.clock }
    /// Whether the last clock told said if it is synchronized.
    public var clockSynchronizationKnown: Bool { content.clockSynchronizationKnown }

    /// Reloads begun since the start (SIGHUPs taken; several before one is handled count once).
    public var reloadCount: Int { systemd.reloadCount }
    public var reloadResult: ReloadResult? { systemd.reloadResult }
    /// The last file refused, and how many were refused since the start (a new refusal of the same errors counts).
    public var lastRefusal: ConfigError? { systemd.lastRefusal }
    public var refusalCount: Int { systemd.refusalCount }

    /// True while an open, an apply or a stop waits for the backend.
    public var isWaitingForBackend: Bool {
        switch phase {
        case .opening, .applying, .powerCycling: true
        case .stopping: backend != nil
        default: false
        }
    }

    /// The config has an Eddystone-EID beacon: the clock matters, and the EID timer runs.
    public var hasEID: Bool { config.beacons.contains { $0.beacon.eid != nil } }

    /// The EID timer's period: 2^K seconds for the smallest K.
    public var eidPeriod: Duration {
        .seconds(1 << Int(config.beacons.compactMap { $0.beacon.eid?.exponent }.min() ?? 10))
    }

    /// `address = "rotating"` or `"resolvable"` where beacond drives the controller (through mgmt the kernel rotates
    /// its own): the address timer runs.
    public var rotatesAddress: Bool { config.addressPlan.rotates && backend != .mgmt }

    /// The config has an Eddystone-TLM beacon or a BTHome self-report: the telemetry timer runs.
    public var hasTelemetry: Bool { config.beacons.contains { $0.beacon.isTelemetry || $0.beacon.format == .bthome } }

    /// How often each beacon is on the air, when the controller confirmed them; nil when not advertising.
    public var onAirEvery: [Duration]? {
        guard phase == .advertising, let onAir else { return nil }
        // The time between two of a beacon's events: a time slice that holds two gives two each round.
        if !onAir.beacons.isEmpty { return onAir.beacons.map { $0.paused == nil ? $0.every / $0.events : .zero } }
        return [.microseconds(Int64(onAir.interval.units) * 625)]
    }
}
