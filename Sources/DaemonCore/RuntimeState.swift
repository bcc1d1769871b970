// What `beacond status` and `beacond reload` read: the daemon's state as a value, made from the lifecycle, and its
// JSON. The executor writes it to $RUNTIME_DIRECTORY/state.json whenever it differs from the last one written: on
// changes of phase, config, controller, addresses or reloads, never per time slice or telemetry refresh. No secrets:
// an Eddystone-EID beacon shows its key's name only, and no text field carries a run of 16 hex digits (Redaction); a
// refused file is its count of errors and their first lines, never their text (any user reads the file).
import BeaconCore
import BluetoothHCI

public struct RuntimeState: Sendable, Hashable {
    public struct BeaconState: Sendable, Hashable {
        /// 1-based, in config order.
        public var index: Int
        /// The config's `format` value ("ibeacon", "eddystone-uid" …).
        public var format: String
        /// The identity as the config's keys name it.
        public var identity: [Field]
        /// The address it advertises from when beacond set it; nil when the kernel or the controller picks it, or it
        /// is not on the air.
        public var address: OwnAddress?
        /// static, chosen, public, rotating, resolvable, eid (a new one with each EID), kernel (the kernel's choice,
        /// through mgmt).
        public var addressKind: AddressKind
        /// Why it goes out from `address` and not from what `addressKind` gives, for now (another program scans on
        /// the controller); nil when it has its own.
        public var addressHeldBack: String?
        /// Why it is off the air while the others are on (BeaconOnAir.paused).
        public var paused: String?
        /// How often it is on the air (its interval, or a time-sliced beacon's whole round), in ms.
        public var intervalMs: Double?
        public var onAir: Bool
        /// Unix seconds; kept while it stays on the air with the same identity.
        public var onAirSince: UInt64?
        public var warnings: [String]
    }

    public struct Field: Sendable, Hashable {
        public var name: OutputKey
        public var value: JSONValue
    }

    public let version: String
    public let pid: Int32
    public let configPath: String
    /// SHA-256 of the config file's bytes as last taken (hex).
    public let configDigest: String
    public let phase: String
    /// The STATUS= text.
    public let status: String
    public let device: String
    public let controller: ControllerSummary?
    public let beacons: [BeaconState]
    public let reloadCount: Int
    public let reloadResult: String?
    /// The refused file's errors, when the last reload was refused: how many, and the first lines with one.
    public let reloadErrors: Refusal?
    public let lastRefused: (at: UInt64, errors: Refusal)?
    /// Set when an Eddystone-EID beacon is configured: whether the kernel calls the clock synchronized, nil when it
    /// cannot be told (adjtimex refused under ProtectClock= with chrony or ntpsec, and no timesyncd flag).
    public let clockSynchronized: Bool??

    /// The state file's text: one JSON object (its fields: OutputSchema's state rows), rendered once.
    public private(set) var json = ""

    public static func == (a: Self, b: Self) -> Bool { a.json == b.json }
    public func hash(into h: inout Hasher) { h.combine(json) }

    /// The lifecycle's state now. `previous`: the state last written (keeps each beacon's on-air time and the
    /// refusal's time); `now`: Unix seconds.
    public init(_ l: Lifecycle, pid: Int32, configDigest: String, now: UInt64, previous: RuntimeState?) {
        version = beacondVersion
        self.pid = pid
        configPath = l.configPath
        self.configDigest = configDigest
        phase = Self.name(l.phase)
        status = l.lastStatus
        device = l.device.description
        let onAir = l.phase == .advertising ? l.onAir : nil
        controller = l.backend == nil ? nil : l.onAir?.controller
        let n = l.config.beacons.count
        let plan = l.config.addressPlan
        beacons = l.config.beacons.enumerated().map { k, b in
            var warnings: [String] = []
            var interval: Double?
            if let o = onAir {
                let every = k < o.beacons.count ? o.beacons[k].every
                    : Duration.microseconds(Int64((o.kernelInterval?.typical ?? o.interval).units) * 625)
                interval = Double(every.components.seconds) * 1000 + Double(every.components.attoseconds) / 1e15
                if let ki = o.kernelInterval { warnings.append(ki.warning(configured: [l.config.interval(of: b)])) }
                if let tx = o.txPower(of: k, count: n), let m = b.beacon.measuredPowerAt1m,
                   let off = MeasuredPowerCheck.offBy(measuredAt1m: m, tx: Int(tx)) {
                    warnings.append("measured_power \(m) dBm at 1 m is \(abs(off)) dB \(off > 0 ? "stronger" : "weaker") than a \(tx) dBm transmitter is usually heard at 1 m; measure it with 'beacond scan --calibrate 30'")
                }
            }
            if b.beacon.eid != nil, l.clock?.synchronized == false {
                warnings.append("the system clock is not synchronized: receivers will not resolve the EIDs")
            }
            let kind = plan.kind(k, throughKernel: l.backend == .mgmt)
            let address: OwnAddress? = onAir.flatMap { k < $0.addresses.count ? $0.addresses[k] : nil }
            let heldBack = address == .public && kind != .public ? onAir?.addressesHeldBack : nil
            let paused = onAir.flatMap { k < $0.beacons.count ? $0.beacons[k].paused : nil }
            var s = BeaconState(index: k + 1, format: b.beacon.format.rawValue, identity: Self.identity(b.beacon), address: address,
                                addressKind: kind, addressHeldBack: heldBack, paused: paused, intervalMs: paused == nil ? interval : nil,
                                onAir: onAir != nil && paused == nil, onAirSince: nil, warnings: warnings)
            if s.onAir {
                let before = previous.flatMap { k < $0.beacons.count ? $0.beacons[k] : nil }
                s.onAirSince = before.flatMap { $0.onAir && $0.identity == s.identity && $0.format == s.format ? $0.onAirSince : nil } ?? now
            }
            return s
        }
        reloadCount = l.reloadCount
        reloadResult = l.reloadResult?.rawValue
        reloadErrors = l.reloadResult == .refused ? l.lastRefusal.map(Refusal.init) : nil
        if let r = l.lastRefusal {
            let same = previous?.lastRefused != nil && previous?.refusals == l.refusalCount
            lastRefused = (same ? previous!.lastRefused!.at : now, Refusal(r))
        } else {
            lastRefused = nil
        }
        refusals = l.refusalCount
        clockSynchronized = l.hasEID ? (l.clockSynchronizationKnown ? .some(l.clock?.synchronized ?? true) : .some(nil)) : nil
        json = rendered
    }

    /// Whether the lifecycle's state now is one to write. Not while an apply replaces what is confirmed on the air
    /// (new telemetry, the next EID, a rotated address, a reload's data): the beacons stay on the air meanwhile, and
    /// the file keeps saying so until the controller confirms the new state. Nor once exited.
    public static func publishes(_ l: Lifecycle) -> Bool {
        if case .exited = l.phase { return false }
        return !(l.phase == .applying && l.hasConfirmedAir)
    }

    /// How many refusals `lastRefused` is the last of (to keep its time).
    private let refusals: Int

    /// A refused file as the state keeps it: how many errors, and the first lines with one (ConfigError.lines).
    public struct Refusal: Sendable, Hashable {
        public var count: Int
        public var lines: [Int]
        public init(_ e: ConfigError) {
            count = e.diagnostics.count
            lines = e.lines
        }
        var members: [(OutputKey, JSONValue)] { [(.errorCount, JSONValue(count)), (.errorLines, .array(lines.map { JSONValue($0) }))] }
    }

    public static func name(_ p: Lifecycle.Phase) -> String {
        switch p {
        case .idle: "starting"
        case .unprovisioned: "unprovisioned"
        case .opening: "opening"
        case .applying: "applying"
        case .advertising: "advertising"
        case .reapplyWait: "reapply-wait"
        case .waiting: "waiting"
        case .powerCycling: "power-cycling"
        case .stopping: "stopping"
        case .exited: "exited"
        }
    }

    /// The identity by the config's own key names; an EID beacon's key by its file's name only.
    public static func identity(_ b: Beacon) -> [Field] {
        func uuid(_ u: BeaconUUID, _ major: UInt16, _ minor: UInt16) -> [Field] {
            [Field(name: .uuid, value: .string(u.description)), Field(name: .major, value: JSONValue(major)), Field(name: .minor, value: JSONValue(minor))]
        }
        switch b {
        case .iBeacon(let x): return uuid(x.uuid, x.major, x.minor)
        case .altBeacon(let x): return uuid(x.uuid, x.major, x.minor)
        case .eddystoneUID(let x): return [Field(name: .namespace, value: .string(hexString(x.namespace))), Field(name: .instance, value: .string(hexString(x.instance)))]
        case .eddystoneEID(let x): return [Field(name: .key, value: .string(Redaction.apply(x.keyFile))), Field(name: .rotationExponent, value: JSONValue(x.exponent))]
        case .eddystoneTLM: return []
        case .bthome(let x): return x.bindkeyFile.map { [Field(name: .bindkeyFile, value: .string($0))] } ?? []
        }
    }

    private var rendered: String {
        // Every text field goes through Redaction: what any user reads never holds a key. What goes on the air is no
        // secret: a beacon's UUID or namespace stays (Redaction takes out any other 32 hex digits, issue #53).
        let onAir = beacons.flatMap(\.identity).compactMap { f -> String? in
            guard f.name == .uuid || f.name == .namespace, case .string(let v) = f.value else { return nil }
            return v
        }
        func text(_ v: String?) -> JSONValue { JSONValue(v.map { Redaction.apply($0, showing: onAir) }) }
        let x = controller
        let c = JSONValue([
            (.device, .string(device)), (.backend, JSONValue(x?.backend.rawValue)), (.family, JSONValue(x?.family.rawValue)),
            (.bluetoothVersion, text(x?.bluetoothVersion)), (.manufacturer, JSONValue(x?.manufacturer)), (.sets, JSONValue(x?.sets)),
            (.instances, JSONValue(x?.instances)), (.timeSliced, .bool(x?.timeSliced ?? false)),
        ])
        let bs = beacons.map { b in
            JSONValue([
                (.index, JSONValue(b.index)), (.format, .string(b.format)), (.identity, JSONValue(b.identity.map { ($0.name, $0.value) })),
                (.address, text(b.address?.description)), (.addressKind, .string(b.addressKind.rawValue)), (.addressHeldBack, text(b.addressHeldBack)), (.paused, text(b.paused)),
                (.intervalMs, JSONValue(b.intervalMs, decimals: 3)), (.onAir, .bool(b.onAir)), (.onAirSince, JSONValue(b.onAirSince)),
                (.warnings, .array(b.warnings.map { text($0) })),
            ])
        }
        let reload = JSONValue([(.count, JSONValue(reloadCount)), (.result, text(reloadResult))] + (reloadErrors?.members ?? []))
        let refused = lastRefused.map { JSONValue([(.at, JSONValue($0.at))] + $0.errors.members) } ?? .null
        let clock = clockSynchronized.map { JSONValue([(.synchronized, $0.map { .bool($0) } ?? .string("unknown"))]) } ?? .null
        return JSONValue([
            (.version, .string(version)), (.pid, JSONValue(pid)), (.config, JSONValue([(.path, .string(configPath)), (.sha256, .string(configDigest))])),
            (.phase, .string(phase)), (.status, text(status)), (.controller, c), (.beacons, .array(bs)),
            (.reload, reload), (.lastRefused, refused), (.clock, clock),
        ]).text + "\n"
    }
}
