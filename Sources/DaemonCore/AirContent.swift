// What the beacons carry at each apply, apart from the config: the Eddystone-TLM values, the BTHome self-report, the
// wall clock for the EIDs and the generation of the rotating address. The lifecycle says when it changes; this value
// keeps it and makes the schedule the controller gets.
import BeaconCore
import BluetoothHCI
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
    /// Why the encrypted self-report is off the air while the other beacons are on (its address or counters could not
    /// be had from the state directory, or its next counter is ahead of the wall clock); nil when it is on the air, or
    /// there is none. Never in plaintext instead.
    private(set) var selfReportHeld: Held?
    struct Held: Sendable {
        var why: String
        /// It waits for the wall clock (a quick restart), not for the state directory.
        var waiting: Bool
        /// As `status` says it.
        var paused: String { waiting ? "it waits for the wall clock: \(why)" : "its counters could not be kept in the state directory: \(why)" }
    }
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

    /// What an apply does about the self-report first: go on (with what to say), wait for the executor's answer
    /// (asking it, unless an ask is out already), or fail.
    enum SelfReportStep {
        case proceed([Lifecycle.Action])
        case needs(SelfReportNeeds?)
        case fail(BackendFailure)
    }

    /// Makes the self-report's frame for an apply. One that cannot be made (its counters not kept, or its first
    /// counter ahead of the clock) is held off the air while the other beacons go on (issue #52): a damaged counters
    /// file or a full disk must not darken the host. Only when it is the config's only beacon does the apply fail.
    mutating func selfReportStep(_ config: BeaconConfiguration, device: DeviceSpec) -> SelfReportStep {
        let fields = ["BEACON_FORMAT=bthome", "HCI_DEVICE=\(device)"]
        var out: [Lifecycle.Action] = []
        let others = config.beacons.contains { $0.beacon.format != .bthome }
        switch selfReport.prepare(config, uptime: uptime, period: Lifecycle.selfReportRenewal, seal: seal) {
        case .ready(let ahead):
            if let ahead { out.append(.supplySelfReport(ahead)) }
            if selfReportHeld != nil {
                selfReportHeld = nil
                if config.beacons.contains(where: { $0.beacon.format == .bthome }) {
                    out.append(.log(.notice, "The BTHome self-report goes on the air", fields))
                }
            }
        case .needs(let needs):
            return .needs(needs)
        case .waiting(let why, let ask) where !others:
            // Alone: nothing else to put on the air meanwhile; the apply goes on once the clock has reached it.
            if selfReportHeld == nil { out.append(.log(.info, "The BTHome self-report waits for the wall clock: \(why)", fields)) }
            selfReportHeld = Held(why: why, waiting: true)
            return .needs(ask)
        case .waiting(let why, let ask):
            if let ask { out.append(.supplySelfReport(ask)) }
            if selfReportHeld == nil { out.append(.log(.info, "The BTHome self-report waits for the wall clock: \(why); the other beacons go on the air now", fields)) }
            selfReportHeld = Held(why: why, waiting: true)
        case .failed(let why):
            guard others else { return .fail(BackendFailure(message: "Cannot put the BTHome self-report on the air: \(why)", fields: fields)) }
            if selfReportHeld?.waiting != false {
                out.append(.log(.warning, "The BTHome self-report stays off the air: \(why). The other beacons go on the air without it; beacond tries again every \(Lifecycle.telemetryPeriod.components.seconds) s", fields))
            }
            selfReportHeld = Held(why: why, waiting: false)
        }
        if let line = selfReport.exhaustionLine() { out.append(.log(.err, line, ["BEACON_FORMAT=bthome"])) }
        return .proceed(out)
    }

    /// Which beacon of `config` is held off the air, if one is.
    func heldIndex(_ config: BeaconConfiguration) -> Int? {
        selfReportHeld == nil ? nil : config.beacons.firstIndex { $0.beacon.format == .bthome }
    }

    /// What the backend confirmed, with the held self-report put back in its place, paused with why.
    func withHeld(_ result: OnAir, _ config: BeaconConfiguration) -> OnAir {
        guard let k = heldIndex(config), let held = selfReportHeld else { return result }
        var r = result
        if r.beacons.isEmpty {
            let every = Duration.microseconds(Int64((r.kernelInterval?.typical ?? r.interval).units) * 625)
            r.beacons = [BeaconOnAir(every: every, details: [], txPower: r.txPower, address: r.addresses.first ?? nil)]
        }
        r.beacons.insert(BeaconOnAir(every: .zero, details: [], paused: held.paused), at: min(k, r.beacons.count))
        if !r.addresses.isEmpty { r.addresses.insert(nil, at: min(k, r.addresses.count)) }
        return r
    }

    /// The schedule for `config` now; nil without a beacon (unprovisioned). A held self-report is left out.
    func request(_ config: BeaconConfiguration) -> AdvertisingSchedule? {
        guard !config.beacons.isEmpty else { return nil }
        if let k = heldIndex(config), let all = request(config, held: nil) {
            var s = all
            s.beacons.remove(at: k)
            s.addresses.remove(at: k)
            return s
        }
        return request(config, held: nil)
    }

    private func request(_ config: BeaconConfiguration, held: Int?) -> AdvertisingSchedule? {
        let time = clock?.time ?? 0
        var addresses = config.addressPlan.wanted
        for (k, b) in config.beacons.enumerated() {
            if let e = b.beacon.eid { addresses[k].period = UInt64(e.period(of: time)) }
            // The encrypted self-report goes out from the address its frame was sealed for: one route, the supply's.
            if b.beacon.bthome?.encrypted == true, let a = selfReport.sealedFor { addresses[k].known = a }
        }
        let plan = config.addressPlan
        return AdvertisingSchedule(beacons: config.beacons.enumerated().map { k, b in
            AdvertisingRequest(data: onAirBeacon(b.beacon, at: time).advertisingData, type: config.advertising.legacyType,
                               interval: config.interval(of: b), txPower: config.advertising.txPower, scanResponse: b.scanResponse,
                               neverPublic: plan.neverPublic[k])
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
