// What the beacons carry at each apply, apart from the config: the Eddystone-TLM values, the BTHome self-report, the
// wall clock for the EIDs and the generation of the rotating address. The lifecycle says when it changes; this value
// keeps it and makes the schedule the controller gets.
import BeaconCore
import HCIHost

struct AirContent: Sendable {
    /// Only new content, not news for the journal: new telemetry, the next EIDs, a renewed self-report.
    enum Refresh: Sendable { case telemetry, eid, selfReport }

    /// What the Eddystone-TLM beacons report now (and the BTHome self-report's uptime).
    var telemetry = Telemetry()
    /// The BTHome self-report: its frame, packet id, address and counters.
    var selfReport = SelfReport()
    /// An apply that waits for the self-report's supply from the state directory: its arguments.
    var deferredApply: (dataOnlyAllowed: Bool, refresh: Refresh?)?
    /// Bumped for every new rotating address.
    var addressGeneration: UInt64 = 0
    /// The wall clock as last told (Eddystone's time counter), and whether it was synchronized.
    private(set) var clock: (time: UInt32, synchronized: Bool)?
    /// Whether the last clock told said if it is synchronized (false: adjtimex refused, no timesyncd flag; `clock`
    /// then counts it as synchronized, and the state file and STATUS say "unknown").
    private(set) var clockSynchronizationKnown = true
    /// It was said that the clock's synchronization cannot be told.
    private var clockUnknownSaid = false
    /// The unsynchronized clock was said (once until it is synchronized again).
    private var clockWarned = false
    /// AES-128 for the EID beacons (libgcrypt's, passed in by the executor; nil in configs without them).
    let cipher: BlockCipher?
    /// AES-CCM for an encrypted self-report (libgcrypt's, passed in by the executor).
    let seal: CCMSeal?

    init(cipher: BlockCipher?, seal: CCMSeal?) {
        self.cipher = cipher
        self.seal = seal
    }

    /// beacond's uptime in whole seconds, as of the last telemetry.
    var uptime: UInt32 { telemetry.uptimeTenths / 10 }

    /// For STATUS: false when the clock is not synchronized, nil when that cannot be told.
    var clockSynchronized: Bool? {
        clock?.synchronized == false ? false : !clockSynchronizationKnown ? nil : true
    }

    /// The schedule for `config` now; nil without a beacon (unprovisioned).
    func request(_ config: BeaconConfiguration) -> AdvertisingSchedule? {
        guard !config.beacons.isEmpty else { return nil }
        let time = clock?.time ?? 0
        var addresses = config.addressPlan.wanted
        for (k, b) in config.beacons.enumerated() {
            if let e = b.beacon.eid { addresses[k].period = UInt64(e.period(of: time)) }
        }
        return AdvertisingSchedule(beacons: config.beacons.map {
            AdvertisingRequest(data: onAirBeacon($0.beacon, at: time).advertisingData, type: config.advertising.legacyType,
                               interval: config.interval(of: $0), txPower: config.advertising.txPower, scanResponse: $0.scanResponse)
        }, addresses: addresses, addressGeneration: addressGeneration)
    }

    /// A beacon as it goes on the air now: the telemetry's values, the self-report's frame, an EID beacon's
    /// identifier for `time`.
    private func onAirBeacon(_ b: Beacon, at time: UInt32) -> Beacon {
        var t = b.withTelemetry(telemetry)
        if let data = selfReport.serviceData { t = t.withSelfReport(data) }
        guard let cipher, b.eid != nil else { return t }
        // The executor checked the cipher against FIPS-197 before the start: it does not fail on 16-byte input.
        return (try? t.withEphemeralID(time, cipher: cipher)) ?? t
    }

    /// Each EID beacon's period now (empty without a clock or EID beacons).
    func eidPeriods(_ config: BeaconConfiguration) -> [UInt32] {
        guard let time = clock?.time else { return [] }
        return config.beacons.compactMap { $0.beacon.eid?.period(of: time) }
    }

    /// The wall clock (Unix seconds), and whether the kernel calls it synchronized (nil: it cannot tell, which counts
    /// as synchronized, said once). What to say of it when the config has EID beacons.
    mutating func tell(clock sinceEpoch: Duration, synchronized told: Bool?, hasEID: Bool) -> [Lifecycle.Action] {
        var out: [Lifecycle.Action] = []
        // Unknown (adjtimex refused, no timesyncd) is not called unsynchronized: only what the kernel says is.
        if told == nil, hasEID, !clockUnknownSaid {
            clockUnknownSaid = true
            out.append(.log(.notice, "Cannot tell whether the system clock is synchronized (adjtimex refused, no systemd-timesyncd flag): the Eddystone-EID beacons assume it is", []))
        }
        let synchronized = told ?? true
        clockSynchronizationKnown = told != nil
        clock = (eidTimeCounter(unixSeconds: UInt64(clamping: sinceEpoch.components.seconds)), synchronized)
        if hasEID && !synchronized && !clockWarned {
            clockWarned = true
            out.append(.log(.warning, "The system clock is not synchronized: the Eddystone-EID beacons' identifiers come from the wall clock, and a resolver will not recognize them until it is (check timedatectl)", []))
        } else if synchronized && clockWarned {
            clockWarned = false
            out.append(.log(.notice, "The system clock is synchronized now", []))
        }
        return out
    }
}

extension Lifecycle {
    /// The time from the wall clock's `seconds`.`milliseconds` until its next multiple of `period` (5 ms past it, so
    /// the new EID period has begun when the timer fires).
    public static func untilBoundary(of period: Duration, wallSeconds seconds: UInt64, milliseconds: Int) -> Duration {
        let p = max(1, UInt64(period.components.seconds))
        let into = Int64(seconds % p) * 1000 + Int64(milliseconds)
        return .milliseconds(Int64(p) * 1000 - into + 5)
    }
}
