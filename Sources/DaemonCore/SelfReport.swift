// beacond's BTHome self-report as the lifecycle keeps it: what it reports, the frame on the air, its packet id, and
// for an encrypted one the address its nonce holds and the counter, with the blocks of counters reserved in the state
// directory so that a restarted beacond never sends a counter a receiver has seen (bthome-ble drops a frame whose
// counter went down). Pure: the address and the reservations come from the executor (`supplySelfReport`).
import BeaconCore
import BluetoothHCI

/// Counters for one address: an earlier run may have used every counter below `floor`; this run may use those below
/// `limit`, which the state directory now holds.
public struct CounterReservation: Sendable, Hashable {
    public var floor: UInt32
    public var limit: UInt32
    public init(floor: UInt32, limit: UInt32) {
        self.floor = floor
        self.limit = limit
    }
}

/// What an encrypted self-report needs from the state directory; the executor answers with `selfReportSupplied`.
public struct SelfReportNeeds: Sendable, Hashable {
    /// Its kept static address, filed under this identity (nil: the address is known).
    public var addressKey: String?
    /// The addresses the config chooses, which a new static address must not be.
    public var avoiding: Set<BluetoothAddress>
    /// Its address when known (chosen in the config, or supplied before).
    public var address: BluetoothAddress?
    /// Reserve counters for the address, from at least this value (nil: none needed).
    public var countersFrom: UInt32?
    /// Answer once the wall clock has reached this second (the next counter is ahead of it): the executor waits,
    /// looking at the clock at least every 10 s, so a clock set forward meanwhile (NTP after boot) ends the wait.
    public var notBefore: UInt32?

    public init(addressKey: String? = nil, avoiding: Set<BluetoothAddress> = [], address: BluetoothAddress? = nil, countersFrom: UInt32? = nil,
                notBefore: UInt32? = nil) {
        self.addressKey = addressKey
        self.avoiding = avoiding
        self.address = address
        self.countersFrom = countersFrom
        self.notBefore = notBefore
    }
}

/// The executor's answer: the address and the reservation, or why it could not give them (the address may come
/// without the counters).
public struct SelfReportSupply: Sendable, Hashable {
    public var address: BluetoothAddress?
    public var counters: CounterReservation?
    public var failure: String?
    /// The wall clock when the answer was made (Unix seconds): no counter goes out before the clock has reached it.
    public var clock: UInt32?
    /// beacond's uptime (seconds) when the answer was made, as the telemetry counts it: the wall clock is then
    /// counted on from there.
    public var uptime: UInt32?

    public init(address: BluetoothAddress? = nil, counters: CounterReservation? = nil, failure: String? = nil, clock: UInt32? = nil,
                uptime: UInt32? = nil) {
        self.address = address
        self.counters = counters
        self.failure = failure
        self.clock = clock
        self.uptime = uptime
    }
}

public struct SelfReport: Sendable {
    static let reservation = CounterBook.block

    /// Everything a frame says but its packet id and counter: a new frame when it changes.
    struct Content: Hashable {
        var beaconsOnAir: Int
        var problem: Bool
        var key: BindKey?
        var address: BluetoothAddress?
    }

    private(set) var packetID: UInt8 = 0
    /// The content and uptime of the frame on the air, and its service data.
    private(set) var last: (content: Content, uptime: UInt32, serviceData: [UInt8])?
    /// The supplied static address and the identity it is filed under.
    private var supplied: (key: String, address: BluetoothAddress)?
    /// The next counter, the end of the reservation, and the address they are for.
    private(set) var counter: UInt32?
    private(set) var limit: UInt32 = 0
    private var counterAddress: BluetoothAddress?
    /// A supply asked for and not answered yet, and the identity the address was asked for under.
    private(set) var asked = false
    private var askedKey: String?
    /// No counter was left for a new frame: the one on the air stays.
    private var stuck = false
    /// The wall clock the last supply told, and the uptime then: the wall clock now, counted on the monotonic uptime.
    private var wall: (seconds: UInt32, uptime: UInt32)?
    /// The last supply failed (said once until one succeeds).
    private var failure: String?
    private var failureSaid = false
    private var exhaustedSaid = false

    /// How far the wall clock may be behind the next counter before a frame goes out anyway (said once): a clock set
    /// back a little (fake-hwclock after a power cut, a restart within seconds of a reservation) is waited for; one a
    /// day or more behind (never set) would keep the self-report off for good.
    public static let longestClockWait: UInt32 = 86_400

    enum Preparation: Equatable {
        /// The frame is ready (`serviceData`); `ahead`: reserve more counters meanwhile.
        case ready(ahead: SelfReportNeeds?)
        /// Its first frame waits for the wall clock to reach its counter (a few seconds after a quick restart): why,
        /// and the ask that ends the wait (nil while one is out).
        case waiting(String, SelfReportNeeds?)
        /// Ask the executor first, then prepare again.
        case needs(SelfReportNeeds)
        /// No frame can be made: why.
        case failed(String)
    }

    /// The address the frame on the air was sealed for (its nonce holds it), when it is a kept static one.
    var sealedFor: BluetoothAddress? { last?.content.address }

    /// The service data on the air for the self-report (nil before the first frame).
    var serviceData: [UInt8]? { last?.serviceData }

    /// What the config's self-report says now: the other beacons of the config (all of them go on the air in the
    /// one apply the frame goes out in, or none does), and a problem when a beacon table has no uuid yet.
    static func content(_ config: BeaconConfiguration) -> (beaconsOnAir: Int, problem: Bool) {
        (config.beacons.filter { $0.beacon.format != .bthome }.count, !config.unprovisioned.isEmpty)
    }

    /// Makes the frame for `config` at `uptime` (seconds): a new one (next packet id and counter) when the content
    /// changed, or when the frame on the air is `period` old or older; else the one on the air.
    mutating func prepare(_ config: BeaconConfiguration, uptime: UInt32, period: UInt32, seal: CCMSeal?) -> Preparation {
        guard let k = config.beacons.firstIndex(where: { $0.beacon.format == .bthome }), let b = config.beacons[k].beacon.bthome else {
            return .ready(ahead: nil)
        }
        let (n, problem) = Self.content(config)
        let wanted = config.addressPlan.wanted[k]
        guard b.encrypted else {
            let content = Content(beaconsOnAir: n, problem: problem)
            if let l = last, l.content == content, uptime < l.uptime &+ period { return .ready(ahead: nil) }
            packetID &+= 1
            last = (content, uptime, BTHome.plainServiceData(BTHomeReport(packetID: packetID, beaconsOnAir: n, problem: problem, uptimeSeconds: uptime).objects))
            return .ready(ahead: nil)
        }
        guard let key = b.bindkey else { return .failed("the BTHome self-report's bindkey was not loaded") }
        guard let seal else { return .failed("no AES-CCM to encrypt the BTHome self-report with") }
        // The nonce holds the address the frame goes out from: the chosen one, or the static one kept for it.
        var address: BluetoothAddress?
        if case .chosen(let a)? = wanted.setting { address = a } else if let s = supplied, s.key == wanted.key { address = s.address }
        guard let address, counter != nil, counterAddress == address else {
            if let why = failure {
                // The answer to the last ask: this attempt fails (the next one asks again).
                failure = nil
                return .failed(why)
            }
            var avoiding = Set<BluetoothAddress>()
            for case .chosen(let a)? in config.addressPlan.wanted.map(\.setting) { avoiding.insert(a) }
            asked = true
            askedKey = address == nil ? wanted.key : nil
            return .needs(SelfReportNeeds(addressKey: askedKey, avoiding: avoiding, address: address, countersFrom: 0))
        }
        let content = Content(beaconsOnAir: n, problem: problem, key: key, address: address)
        if let l = last, l.content == content, uptime < l.uptime &+ period { return .ready(ahead: aheadNeeds(address)) }
        guard let c = counter, c < limit else {
            // Every reserved counter is used and no new block could be written: the frame on the air stays.
            if let l = last, l.content.address == address {
                stuck = true
                return .ready(ahead: aheadNeeds(address))
            }
            return .failed("no BTHome counter is reserved for \(address)")
        }
        // No counter goes out before the wall clock has reached it: every counter sent is at most the time it was sent,
        // so a later start (a restart, a restored backup, a clone) begins above all of them (CounterBook.reserve).
        if let w = wall {
            // The uptime this frame is made at may be older than the answer's (the telemetry ticks every 10 s): then
            // the clock as the answer told it, at least.
            let now = w.seconds &+ (uptime > w.uptime ? uptime - w.uptime : 0)
            if c > now, c - now <= Self.longestClockWait {
                if let l = last, l.content.address == address { return .ready(ahead: aheadNeeds(address)) }
                let ask: SelfReportNeeds? = asked ? nil : SelfReportNeeds(address: address, notBefore: c)
                if ask != nil { asked = true }
                return .waiting("its next counter, \(c), is \(c - now) s ahead of the wall clock (beacond restarted within seconds of its last reservation, or the clock was set back)", ask)
            }
        }
        let objects = BTHomeReport(packetID: packetID &+ 1, beaconsOnAir: n, problem: problem, uptimeSeconds: uptime).objects
        do {
            let data = try BTHome.encryptedServiceData(objects, key: key, address: address, counter: c, seal: seal)
            packetID &+= 1
            counter = c + 1
            last = (content, uptime, data)
            stuck = false
        } catch {
            return .failed("Cannot encrypt the BTHome self-report: \(error)")
        }
        return .ready(ahead: aheadNeeds(address))
    }

    /// The service data a start puts on the air first (packet id 1, uptime 0), from `address` with `counter` when
    /// encrypted: what `beacond payload` prints. Nil without a self-report; a failure says why it cannot be made.
    public static func firstServiceData(_ config: BeaconConfiguration, address: BluetoothAddress?, counter: UInt32,
                                        seal: CCMSeal?) -> Result<[UInt8], FirstFrameFailure>? {
        guard let k = config.beacons.firstIndex(where: { $0.beacon.format == .bthome }) else { return nil }
        var r = SelfReport()
        if config.beacons[k].beacon.bthome?.encrypted == true {
            guard let address else { return .failure(FirstFrameFailure(message: "its address is made at the first start, and an encrypted frame's nonce holds it")) }
            r.askedKey = config.addressPlan.wanted[k].key
            _ = r.supplied(SelfReportSupply(address: address, counters: CounterReservation(floor: counter, limit: counter &+ 1)))
        }
        switch r.prepare(config, uptime: 0, period: Lifecycle.selfReportRenewal, seal: seal) {
        case .ready: return r.serviceData.map { .success($0) }
        case .needs: return .failure(FirstFrameFailure(message: "its address or counter is not known"))
        case .failed(let why), .waiting(let why, _): return .failure(FirstFrameFailure(message: why))
        }
    }

    public struct FirstFrameFailure: Error, Sendable, Hashable { public var message: String }

    /// Counters for later, once half of the block is used (nil: enough are left, or an ask is out).
    private mutating func aheadNeeds(_ address: BluetoothAddress) -> SelfReportNeeds? {
        guard let c = counter, !asked, limit - c <= Self.reservation / 2, limit < UInt32.max else { return nil }
        asked = true
        return SelfReportNeeds(address: address, countersFrom: limit)
    }

    /// The executor's answer. Returns a line for the journal, if there is one to say.
    mutating func supplied(_ s: SelfReportSupply, uptime: UInt32 = 0) -> (LogLevel, String)? {
        asked = false
        if let c = s.clock { wall = (c, s.uptime ?? uptime) }
        if let a = s.address, let key = askedKey { supplied = (key, a) }
        askedKey = nil
        if let r = s.counters, let a = s.address {
            if counterAddress != a || counter == nil {
                // A new address (or the first reservation): its counters start where the state directory says.
                counter = r.floor
                counterAddress = a
                limit = r.limit
            }
            limit = max(limit, r.limit)
            failureSaid = false
            exhaustedSaid = false
        }
        guard let why = s.failure else {
            failure = nil
            return nil
        }
        // Without a counter the self-report cannot be made: the apply waiting for it fails with `why`. With counters
        // left, only the next block could not be reserved.
        if counter == nil || counterAddress != s.address { failure = why }
        guard !failureSaid else { return nil }
        failureSaid = true
        let left = counter.map { limit > $0 ? limit - $0 : 0 } ?? 0
        return counter == nil ? nil : (.warning, "\(why); the BTHome self-report has \(left) counter\(left == 1 ? "" : "s") left, then its frame stays as it is")
    }

    /// Said once when the counters ran out.
    mutating func exhaustionLine() -> String? {
        guard stuck, !exhaustedSaid else { return nil }
        exhaustedSaid = true
        return "The BTHome self-report used every counter reserved in the state directory and could not reserve more: its frame stays as it is (uptime and all) until it can"
    }
}

/// The state directory's `bthome-counters` file as a value: per address, the counter every earlier frame stayed
/// below. A reservation raises the address's number before any frame uses the counters under it, so after a crash
/// or a restart the next run starts above every counter sent, and no number ever goes down.
public struct CounterBook: Sendable, Hashable {
    /// How far ahead of the wall clock one write reserves: every counter goes out at or after the second it names, so
    /// a reservation covers the next few frames, and the next is made from the clock, far above the counter in use
    /// (a frame about a minute, the clock 60 a minute): writes come at the start, minutes later, hours later, then
    /// days apart. A restart within this many seconds of a reservation waits that long for its first frame.
    public static let block: UInt32 = 8

    public private(set) var entries: [BluetoothAddress: UInt32] = [:]
    private var order: [BluetoothAddress] = []

    public init() {}

    /// A line of the file that holds no entry.
    public struct Damaged: Error, Sendable, Hashable {
        public var line: Int
        public var reason: String
    }

    /// `# comments`, blank lines and `C6:12:34:56:78:9A 13000` lines.
    public init(parsing text: String) throws(Damaged) {
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.drop { $0 == " " }
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(separator: " ")
            guard parts.count == 2, let a = BluetoothAddress(parsing: String(parts[0])), let v = UInt32(parts[1]) else {
                throw Damaged(line: n + 1, reason: "not an address followed by a counter (0 to 4294967295)")
            }
            guard entries[a] == nil else { throw Damaged(line: n + 1, reason: "a second counter for \(a)") }
            entries[a] = v
            order.append(a)
        }
    }

    /// Reserves `count` counters for `address` from at least `from`: every counter below the returned floor may have
    /// been sent by an earlier run; this one may use up to the limit, which the book now holds.
    ///
    /// `clock` (the wall clock, Unix seconds) is a floor too, and no counter goes out before the clock reaches it
    /// (SelfReport.prepare): every counter any run sent is at most the second it was sent in, so a start at a later
    /// second begins above all of them, whatever the book says. A state directory restored from a backup, or a card
    /// cloned and started later, then reuses no (address, counter) pair, which under AES-CCM would reuse the keystream
    /// (issue #52). The book still bounds every counter sent, for a clock set back.
    public mutating func reserve(_ address: BluetoothAddress, from: UInt32, count: UInt32 = block, clock: UInt32 = 0) -> CounterReservation {
        let floor = max(entries[address] ?? 0, from, clock)
        let (sum, overflow) = floor.addingReportingOverflow(count)
        let limit = overflow ? UInt32.max : sum
        if entries[address] == nil { order.append(address) }
        entries[address] = limit
        return CounterReservation(floor: floor, limit: limit)
    }

    public var text: String {
        "# beacond's BTHome encryption counters, per address: every frame sent from it had a lower counter.\n"
            + "# Never lower or remove a number: receivers drop frames whose counter went down.\n"
            + order.map { "\($0) \(entries[$0]!)\n" }.joined()
    }
}
