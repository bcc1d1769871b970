// `scan --expect`: what beacond configs say should be on the air, checked against what a scanner hears. Pure:
// the beacons of the configs in, reports in, a verdict per beacon out (heard, missing, or heard with other content).
import BluetoothHCI

/// One beacon a config puts on the air, as a receiver can recognize it.
public struct ExpectedBeacon: Sendable, Hashable {
    public var configPath: String
    /// 1-based, in file order, and how many the file has.
    public var index: Int
    public var count: Int
    /// Where its table starts.
    public var location: SourceLocation
    public var beacon: Beacon
    /// The random static address the config chooses for it (as `C6:…`), which the frame must come from.
    public var chosenAddress: String?
    /// `address = "resolvable"`: the key every address it comes from must resolve under (any other sender of its
    /// frame is a copy), and the file it is in (for messages).
    public var resolvingKey: IdentityKey?
    public var resolvingKeyFile: String?
    /// With a resolving key: `address_rotation_s`, how long the beacon keeps one address.
    public var addressRotationSeconds: UInt64?
    /// An Eddystone-TLM beacon: the expectation (an index into the check's list) of the Eddystone-UID beacon whose
    /// address it goes out from; nil when it has its own.
    public var follows: Int?
    /// An Eddystone-TLM beacon whose address nobody can predict (the kernel's own through mgmt, or an address
    /// policy of its own): any telemetry frame counts.
    public var anyTelemetry = false

    /// `PATH:LINE`, and "beacon K of N" when the file has several.
    public var source: String { "\(configPath):\(location.line)" }
    public var label: String { count > 1 ? "beacon \(index) of \(count) in \(source)" : "the beacon in \(source)" }
}

extension ExpectedBeacon {
    /// Every beacon of one config, in file order. `base` is the index the first one gets in the check's list (for
    /// the telemetry beacons' `follows`). A BTHome self-report is not a beacon to expect (its values change, and
    /// Home Assistant is its receiver): it is left out.
    public static func all(in config: BeaconConfiguration, path: String, base: Int = 0) -> [ExpectedBeacon] {
        let plan = config.addressPlan
        let kept = config.beacons.indices.filter { config.beacons[$0].beacon.format != .bthome }
        let position = Dictionary(uniqueKeysWithValues: kept.enumerated().map { ($1, $0) })
        return kept.map { k in
            let b = config.beacons[k]
            var e = ExpectedBeacon(configPath: path, index: k + 1, count: config.beacons.count, location: b.location, beacon: b.beacon)
            if case .chosen(let a)? = plan.wanted[k].setting { e.chosenAddress = a.description }
            if plan.wanted[k].setting == .policy(.resolvable) {
                (e.resolvingKey, e.resolvingKeyFile) = (plan.wanted[k].resolvingKey, plan.resolvingKeyFiles[k])
                e.addressRotationSeconds = UInt64(max(0, plan.rotation.components.seconds))
            }
            if b.beacon.isTelemetry, e.chosenAddress == nil {
                // Through mgmt the kernel gives each instance an address of its own: telemetry cannot be paired.
                if plan.beacondChooses, let uid = plan.sharesWith[k], let p = position[uid] { e.follows = base + p } else { e.anyTelemetry = true }
            }
            return e
        }
    }
}

/// The state of a fleet's beacons as heard from the air.
public struct AirCheck: Sendable {
    public enum Verdict: String, Sendable, Hashable {
        /// A frame with the beacon's identity and exactly the config's content.
        case heard
        /// Nothing with its identity.
        case missing
        /// A frame with its identity but other content (another measured power, another format, another address).
        case mismatch
    }

    /// A sender as heard: its last report.
    public struct Sighting: Sendable, Hashable {
        public var frame: BeaconFrame
        public var address: String
        public var addressType: String
        /// dBm; 127: not available.
        public var rssi: Int8
        public var packets: Int
        /// Wall clock, microseconds since the Unix epoch.
        public var lastSeen: UInt64
        /// An Eddystone-EID frame: how far this scanner's clock was from the EID's period, in seconds (0: within
        /// it; see `EddystoneEID.offset`).
        public var eidOffset: Int64?

        init(_ frame: BeaconFrame, _ r: AdvertisingReport, at now: UInt64, eidOffset: Int64? = nil) {
            self.frame = frame
            address = r.addressString
            addressType = r.addressTypeName
            rssi = r.rssi
            packets = 0
            lastSeen = now
            heard(frame, r, at: now, eidOffset: eidOffset)
        }

        mutating func heard(_ f: BeaconFrame, _ r: AdvertisingReport, at now: UInt64, eidOffset: Int64? = nil) {
            frame = f
            address = r.addressString
            addressType = r.addressTypeName
            rssi = r.rssi
            packets += 1
            lastSeen = now
            self.eidOffset = eidOffset
        }
    }

    /// Something with a beacon's identity whose content differs from its config, and what differs.
    public struct Mismatch: Sendable, Hashable {
        public var differences: [String]
        public var sighting: Sighting
    }

    public struct Entry: Sendable, Hashable {
        public var expected: ExpectedBeacon
        /// The latest frame that matched the config exactly.
        public var heard: Sighting?
        /// The frames with its identity but other content, one per sender and content (at most `mismatchLimit`).
        public var mismatches: [Mismatch] = []
        /// Where the matching frames came from (a telemetry beacon that follows this one is paired by them).
        public var addresses: [String] = []
        /// Another expectation with the same identity: receivers cannot tell the two apart.
        public var sameIdentityAs: Int?

        public var verdict: Verdict { !mismatches.isEmpty ? .mismatch : heard != nil ? .heard : .missing }
    }

    /// One identity key the EID resolver holds, with every expectation that uses it: two configs may name the same
    /// key (the same beacon checked twice), and one frame is then heard for both.
    public struct EIDKeyUse: Sendable, Hashable {
        public var key: IdentityKey?
        public var exponent: UInt8
        public var expectations: [Int]
    }

    /// An Eddystone-EID frame the resolver matched: which of `eidKeys`, the period its EID belongs to, and this
    /// scanner's time counter when it was heard.
    public struct EIDMatch: Sendable, Hashable {
        public var key: Int
        public var periodStart: UInt32
        public var heardAt: UInt32
        public init(key: Int, periodStart: UInt32, heardAt: UInt32) { (self.key, self.periodStart, self.heardAt) = (key, periodStart, heardAt) }
    }

    /// How far (seconds) the scanner's clock may be outside an EID's period for the EID to count as the beacon's
    /// own: the clocks of a synchronized beacon and receiver differ by far less. Anything older is a recording (or a
    /// clock that is off) and is reported as such, never as heard.
    public static let eidSkew: Int64 = 60

    /// How long past its `address_rotation_s` a resolvable address may still be heard as the beacon's (a rotation
    /// waits for a time slice or a retry): longer, it is a recording replayed, as an EID of a past period is.
    public static let rotationSlack: UInt64 = 60
    /// When each resolvable address that resolved under an expected beacon's key was first heard (wall clock,
    /// microseconds), by this check or, given back, by an earlier one (at most `firstHeardLimit`).
    public var firstHeard: [String: UInt64] = [:]
    public static let firstHeardLimit = 4096

    public private(set) var entries: [Entry]
    /// Beacons of an expected UUID or namespace that no config names, by identity (at most `unexpectedLimit`).
    public private(set) var unexpected: [String: Sighting] = [:]
    /// Telemetry frames by sender (at most `telemetryLimit` senders), for the telemetry beacons' pairing.
    private var telemetry: [String: Sighting] = [:]
    private var byIdentity: [String: [Int]] = [:]
    private var uuids: Set<BeaconUUID> = []
    private var namespaces: Set<[UInt8]> = []
    /// The keys the EID resolver should hold, in the order its matches name them.
    public private(set) var eidKeys: [EIDKeyUse] = []

    /// AES-128, for the resolvable addresses (nil: none expected).
    private let cipher: BlockCipher?

    public static let mismatchLimit = 4
    public static let unexpectedLimit = 256
    public static let telemetryLimit = 256
    static let addressLimit = 16

    public init(_ expected: [ExpectedBeacon], cipher: BlockCipher? = nil) {
        entries = expected.map { Entry(expected: $0) }
        self.cipher = cipher
        for (i, e) in expected.enumerated() {
            guard let id = Self.identity(of: e.beacon) else { continue }
            if let first = byIdentity[id]?.first { entries[i].sameIdentityAs = first }
            byIdentity[id, default: []].append(i)
            switch e.beacon {
            case .iBeacon(let b): uuids.insert(b.uuid)
            case .altBeacon(let b): uuids.insert(b.uuid)
            case .eddystoneUID(let b): namespaces.insert(b.namespace)
            default: break
            }
        }
        var keyIndex: [String: Int] = [:]
        for (i, e) in expected.enumerated() {
            guard case .eddystoneEID(let b) = e.beacon else { continue }
            let id = "\(b.exponent) " + (b.key.map { hexString($0.bytes) } ?? "none \(i)")
            if let k = keyIndex[id] { eidKeys[k].expectations.append(i); continue }
            keyIndex[id] = eidKeys.count
            eidKeys.append(EIDKeyUse(key: b.key, exponent: b.exponent, expectations: [i]))
        }
    }

    /// What a receiver tells beacons apart by: uuid/major/minor (an iBeacon and an AltBeacon with the same three are
    /// the same beacon to it, so one in place of the other is a mismatch), namespace/instance. Nil for telemetry and
    /// EID, which are recognized by address and key.
    static func identity(of b: Beacon) -> String? {
        switch b {
        case .iBeacon(let x): "\(x.uuid) \(x.major) \(x.minor)"
        case .altBeacon(let x): "\(x.uuid) \(x.major) \(x.minor)"
        case .eddystoneUID(let x): "\(hexString(x.namespace)) \(hexString(x.instance))"
        case .eddystoneTLM, .eddystoneEID, .bthome: nil
        }
    }

    static func identity(of f: BeaconFrame) -> String? {
        switch f {
        case .iBeacon(let x): "\(x.uuid) \(x.major) \(x.minor)"
        case .altBeacon(let x): "\(x.uuid) \(x.major) \(x.minor)"
        case .eddystoneUID(let x): "\(hexString(x.namespace)) \(hexString(x.instance))"
        default: nil
        }
    }

    /// One report. `eidMatch`: for an EID frame, the key of `eidKeys` that resolved it and the EID's period.
    /// Returns true when it may have changed a verdict (a beacon or a sender heard for the first time, a new
    /// mismatch): only then can `complete` have changed.
    @discardableResult
    public mutating func record(_ frame: BeaconFrame, _ r: AdvertisingReport, at now: UInt64, eidMatch: EIDMatch? = nil) -> Bool {
        switch frame {
        case .eddystoneTLM:
            let address = r.addressString
            if telemetry[address] != nil { telemetry[address]!.heard(frame, r, at: now); return false }
            guard telemetry.count < Self.telemetryLimit else { return false }
            telemetry[address] = Sighting(frame, r, at: now)
            return true
        case .eddystoneEID:
            guard let m = eidMatch, eidKeys.indices.contains(m.key) else { return false }
            let use = eidKeys[m.key]
            let offset = EddystoneEID.offset(ofPeriod: m.periodStart, exponent: use.exponent, at: m.heardAt)
            var stale: [String] = []
            if abs(offset) > Self.eidSkew {
                let periods = (Int64(m.periodStart) - Int64(EddystoneEID.periodStart(m.heardAt, exponent: use.exponent))) >> use.exponent
                stale = [periods < 0
                    ? "the EID of \(-periods) period\(periods == -1 ? "" : "s") ago by this scanner's clock (a recording replayed, or the beacon's clock is behind): --expect takes the current period ±\(Self.eidSkew) s"
                    : "the EID of \(periods) period\(periods == 1 ? "" : "s") ahead by this scanner's clock (the beacon's clock is ahead): --expect takes the current period ±\(Self.eidSkew) s"]
            }
            var changed = false
            for i in use.expectations where compare(i, frame, r, at: now, eidOffset: offset, also: stale) { changed = true }
            return changed
        default:
            guard let id = Self.identity(of: frame) else { return false }
            guard let matching = byIdentity[id] else {
                let known: Bool
                switch frame {
                case .iBeacon(let b): known = uuids.contains(b.uuid)
                case .altBeacon(let b): known = uuids.contains(b.uuid)
                case .eddystoneUID(let b): known = namespaces.contains(b.namespace)
                default: known = false
                }
                guard known else { return false }
                let key = "\(frame.kind) \(id)"
                if unexpected[key] != nil { unexpected[key]!.heard(frame, r, at: now) }
                else if unexpected.count < Self.unexpectedLimit { unexpected[key] = Sighting(frame, r, at: now) }
                return false
            }
            var changed = false
            for i in matching where compare(i, frame, r, at: now) { changed = true }
            return changed
        }
    }

    /// True when this was the entry's first frame as configured, or a new mismatch.
    private mutating func compare(_ i: Int, _ frame: BeaconFrame, _ r: AdvertisingReport, at now: UInt64,
                                  eidOffset: Int64? = nil, also: [String] = []) -> Bool {
        let e = entries[i].expected
        var d = Self.differences(expected: e.beacon, heard: frame) + also
        if let chosen = e.chosenAddress, r.addressString != chosen || r.addressType != 1 {
            d.append("from \(r.addressString) (\(r.addressTypeName)); the config chooses \(chosen)")
        }
        if let irk = e.resolvingKey, r.addressType != 1 || !(cipher.map { ResolvableAddress.resolves(r.address, irk: irk.bytes, cipher: $0) } ?? false) {
            d.append("from \(r.addressString) (\(r.addressTypeName)), which does not resolve under the beacon's resolving key \(e.resolvingKeyFile ?? ""): a copy of its frame from another sender")
        } else if e.resolvingKey != nil, let rotation = e.addressRotationSeconds {
            let first = firstHeard[r.addressString] ?? now
            if firstHeard[r.addressString] == nil, firstHeard.count < Self.firstHeardLimit { firstHeard[r.addressString] = now }
            let age = now > first ? (now - first) / 1_000_000 : 0
            if age > rotation + Self.rotationSlack {
                d.append("from \(r.addressString), a resolvable address heard for more than \(rotation + Self.rotationSlack) s: the beacon takes a new one every \(rotation) s (address_rotation_s), so this is a recording replayed, or a beacon that no longer rotates; --expect takes an address for address_rotation_s + \(Self.rotationSlack) s")
            }
        }
        if d.isEmpty {
            var first = false
            if entries[i].heard == nil { entries[i].heard = Sighting(frame, r, at: now, eidOffset: eidOffset); first = true }
            else { entries[i].heard!.heard(frame, r, at: now, eidOffset: eidOffset) }
            if !entries[i].addresses.contains(r.addressString), entries[i].addresses.count < Self.addressLimit {
                entries[i].addresses.append(r.addressString)
                first = true  // a telemetry beacon that follows this one may pair now
            }
            return first
        }
        if let k = entries[i].mismatches.firstIndex(where: { $0.differences == d && $0.sighting.address == r.addressString }) {
            entries[i].mismatches[k].sighting.heard(frame, r, at: now, eidOffset: eidOffset)
            return false
        }
        guard entries[i].mismatches.count < Self.mismatchLimit else { return false }
        entries[i].mismatches.append(Mismatch(differences: d, sighting: Sighting(frame, r, at: now, eidOffset: eidOffset)))
        return true
    }

    /// What differs between a config's beacon and a frame with its identity, in the config's words.
    static func differences(expected: Beacon, heard: BeaconFrame) -> [String] {
        func power(_ name: String, _ air: Int8, _ config: Int8) -> [String] {
            air == config ? [] : ["\(name) \(air) on the air; the config says \(config)"]
        }
        switch (expected, heard) {
        case (.iBeacon(let c), .iBeacon(let a)):
            return power("measured_power", a.measuredPower, c.measuredPower)
        case (.altBeacon(let c), .altBeacon(let a)):
            return power("measured_power", a.referenceRSSI, c.referenceRSSI)
                + (a.companyID == c.companyID ? [] : ["company_id \(a.companyID) on the air; the config says \(c.companyID)"])
                + (a.reserved == c.reserved ? [] : ["reserved \(a.reserved) on the air; the config says \(c.reserved)"])
        case (.eddystoneUID(let c), .eddystoneUID(let a)):
            return power("measured_power (at 0 m)", a.txPowerAt0m, c.txPowerAt0m)
        case (.eddystoneEID(let c), .eddystoneEID(let a)):
            return power("measured_power (at 0 m)", a.txPowerAt0m, c.txPowerAt0m)
        default:
            return ["heard as \(displayName(heard)); the config says \(expected.format.displayName)"]
        }
    }

    static func displayName(_ f: BeaconFrame) -> String {
        switch f {
        case .iBeacon: "an iBeacon"
        case .altBeacon: "an AltBeacon"
        case .eddystoneUID: "an Eddystone-UID"
        case .eddystoneTLM: "an Eddystone-TLM"
        case .eddystoneEID: "an Eddystone-EID"
        case .malformedIBeacon, .other: "something else"
        }
    }

    /// An entry with telemetry beacons paired: a telemetry frame from the address its Eddystone-UID was heard from
    /// (or its own chosen address, or any telemetry frame when no address can pair them).
    public func resolved(_ i: Int) -> Entry {
        var entry = entries[i]
        let e = entry.expected
        guard e.beacon.isTelemetry else { return entry }
        let from: [String]
        if let chosen = e.chosenAddress { from = [chosen] }
        else if let uid = e.follows, entries.indices.contains(uid) { from = entries[uid].addresses }
        else { from = e.anyTelemetry ? Array(telemetry.keys) : [] }
        entry.heard = from.compactMap { telemetry[$0] }.max { $0.lastSeen < $1.lastSeen }
        if let h = entry.heard { entry.addresses = [h.address] }
        return entry
    }

    /// Every entry, telemetry paired.
    public var results: [Entry] { entries.indices.map(resolved) }

    /// True once every beacon was heard, as configured or not: listening longer cannot change the verdict's
    /// success. (A beacon heard as configured may still be heard with other content later; that is a later check's.)
    public var complete: Bool { results.allSatisfy { $0.verdict != .missing } }

    public var succeeded: Bool { results.allSatisfy { $0.verdict == .heard } }

    public func count(_ v: Verdict) -> Int { results.filter { $0.verdict == v }.count }
}

// MARK: output

extension AirCheck {
    /// The config's fields for the beacon: those its frame will carry, as scan names them (an EID beacon's identifier
    /// changes, so its key file and K instead).
    static func configFields(_ b: Beacon) -> [(OutputKey, JSONValue)] {
        switch b {
        case .iBeacon(let x): BeaconFrame.iBeacon(x).jsonFields
        case .altBeacon(let x): BeaconFrame.altBeacon(x).jsonFields
        case .eddystoneUID(let x): BeaconFrame.eddystoneUID(x).jsonFields
        case .eddystoneEID(let x):
            [(.identityKeyFile, .string(x.keyFile)), (.rotationExponent, JSONValue(x.exponent)), (.measuredPower0m, JSONValue(x.txPowerAt0m))]
        case .eddystoneTLM, .bthome: []
        }
    }

    /// Microseconds as seconds with three decimals.
    static func seconds(_ microseconds: UInt64) -> String {
        "\(microseconds / 1_000_000).\(String(microseconds % 1_000_000 / 1000 + 1000).dropFirst())"
    }

    static func sightingFields(_ s: Sighting) -> [(OutputKey, JSONValue)] {
        [(.rssi, JSONValue(s.rssi == 127 ? nil : s.rssi)), (.address, .string(s.address)), (.addressType, .string(s.addressType)),
         (.packets, JSONValue(s.packets)), (.lastSeen, .numeral(seconds(s.lastSeen)))] + (s.eidOffset.map { [(.eidPeriodOffsetS, JSONValue($0))] } ?? [])
    }

    /// One JSON line for an entry: the config's side, the verdict, and what was heard.
    public static func jsonLine(_ e: Entry) -> String {
        let x = e.expected
        var f: [(OutputKey, JSONValue)] = [(.kind, .string("expect")), (.status, .string(e.verdict.rawValue)), (.config, .string(x.configPath)),
                                           (.line, JSONValue(x.location.line)), (.beacon, JSONValue(x.index)), (.format, .string(x.beacon.format.rawValue))]
        f += configFields(x.beacon)
        if let a = x.chosenAddress { f.append((.chosenAddress, .string("\(a)"))) }
        if let k = x.resolvingKeyFile { f.append((.resolvingKeyFile, .string(k))) }
        if let h = e.heard { f += sightingFields(h) }
        if !e.mismatches.isEmpty { f.append((.mismatches, .array(e.mismatches.map(jsonObject)))) }
        return JSONValue(f).text
    }

    static func jsonObject(_ m: Mismatch) -> JSONValue {
        JSONValue([(.differences, JSONValue(strings: m.differences)), (.kind, .string(m.sighting.frame.kind))]
                  + m.sighting.frame.jsonFields + sightingFields(m.sighting))
    }

    public static func jsonLine(unexpected s: Sighting) -> String {
        JSONValue([(.kind, .string("unexpected")), (.format, .string(s.frame.kind))] + s.frame.jsonFields + sightingFields(s)).text
    }

    /// A frame heard, in one line with its power.
    public static func summary(of f: BeaconFrame) -> String {
        switch f {
        case .iBeacon(let b): "iBeacon \(b.uuid) major \(b.major) minor \(b.minor), measured_power \(b.measuredPower)"
        case .altBeacon(let b): "AltBeacon \(b.uuid) major \(b.major) minor \(b.minor), measured_power \(b.referenceRSSI)"
        case .eddystoneUID(let b): "Eddystone-UID namespace \(hexString(b.namespace)) instance \(hexString(b.instance)), measured_power \(b.txPowerAt0m) at 0 m"
        default: f.kind
        }
    }

    /// One line per beacon: the verdict, the beacon, where it came from, and what was heard.
    public static func textLine(_ e: Entry) -> String {
        let x = e.expected
        var s = e.verdict.rawValue.uppercased().padding(8) + " " + x.beacon.summary
        if let a = x.chosenAddress { s += " from \(a)" }
        if let k = x.resolvingKeyFile { s += " from addresses of \(k)" }
        s += "  (\(x.label))"
        if let h = e.heard {
            s += "\n         heard from \(h.address) (\(h.addressType)), rssi \(h.rssi == 127 ? "n/a" : "\(h.rssi) dBm"), \(h.packets) packet\(h.packets == 1 ? "" : "s")"
            if let o = h.eidOffset { s += o == 0 ? ", the EID of the current period" : ", the EID's period \(o > 0 ? "starts in" : "ended") \(abs(o)) s" }
            if case .eddystoneTLM(let t) = h.frame {
                s += ": battery \(t.batteryMillivolts) mV, \(t.celsius.map { decimal($0, 1) + " °C" } ?? "no temperature"), \(t.advertisingCount) advertisements, up \(decimal(Double(t.uptimeTenths) / 10, 1)) s"
            }
        }
        for m in e.mismatches {
            s += "\n         heard from \(m.sighting.address) (\(m.sighting.addressType)), rssi \(m.sighting.rssi == 127 ? "n/a" : "\(m.sighting.rssi) dBm"): "
                + m.differences.joined(separator: "; ")
        }
        if !e.mismatches.isEmpty, e.heard != nil {
            s += "\n         (also heard exactly as configured: the beacon is on the air, and something else sends its identity)"
        }
        if let other = e.sameIdentityAs { s += "\n         (the same identity as expectation \(other + 1): receivers cannot tell the two apart)" }
        return s + "\n"
    }

    /// The check in Prometheus' text exposition format, for node_exporter's textfile collector.
    public func prometheusText(device: String, startedAt: UInt64, duration: Double, clockSynchronized: Bool = true) -> String {
        func label(_ s: String) -> String {
            var out = ""
            for c in s.unicodeScalars {
                switch c {
                case "\\": out += "\\\\"
                case "\"": out += "\\\""
                case "\n": out += "\\n"
                default: out.unicodeScalars.append(c)
                }
            }
            return "\"" + out + "\""
        }
        let all = results
        // The beacon's identity, one label a field, as its config writes them: uuid (uppercase), major and minor;
        // an Eddystone-UID's namespace and instance in lowercase hex as `eddystone_namespace` and
        // `eddystone_instance`, since Prometheus gives every scraped series an `instance` label of its own (the
        // target: node_exporter's host:port), which would rename ours to `exported_instance`, and Kubernetes' service
        // discovery is commonly relabelled to `namespace`; an Eddystone-EID's key file by its name as the config
        // writes it (`key_file`; never the key). Telemetry has no identity of its own: `config` and `beacon` name it.
        // Each format has only its own labels (an absent label is an empty one to PromQL, and node_exporter's textfile
        // collector fills in the others of a family as empty).
        func identityLabels(_ b: Beacon) -> String {
            switch b {
            case .iBeacon(let x): ",uuid=\(label(x.uuid.description)),major=\"\(x.major)\",minor=\"\(x.minor)\""
            case .altBeacon(let x): ",uuid=\(label(x.uuid.description)),major=\"\(x.major)\",minor=\"\(x.minor)\""
            case .eddystoneUID(let x): ",eddystone_namespace=\"\(hexString(x.namespace))\",eddystone_instance=\"\(hexString(x.instance))\""
            case .eddystoneEID(let x): ",key_file=\(label(x.keyFile))"
            case .eddystoneTLM, .bthome: ""
            }
        }
        func labels(_ e: Entry) -> String {
            "{config=\(label(e.expected.configPath)),beacon=\"\(e.expected.index)\",format=\"\(e.expected.beacon.format.rawValue)\""
                + identityLabels(e.expected.beacon) + ",device=\(label(device))}"
        }
        var t = ""
        func family(_ name: String, _ help: String, _ samples: [(String, String)]) {
            guard !samples.isEmpty else { return }
            t += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
            for (l, v) in samples { t += "\(name)\(l) \(v)\n" }
        }
        // A beacon heard as configured and also with other content has both at 1: it is on the air, and something
        // else sends its identity (a copy, or a second device); only the mismatch, and it is not.
        family("beacond_verify_beacon_heard", "1 when a frame exactly as the beacon's config says was heard in the last check, else 0.",
               all.map { (labels($0), $0.heard != nil ? "1" : "0") })
        family("beacond_verify_beacon_mismatch", "1 when a frame with the beacon's identity but other content was heard in the last check.",
               all.map { (labels($0), $0.verdict == .mismatch ? "1" : "0") })
        // The beacons heard (as configured, or with other content): their last report.
        let heard: [(Entry, Sighting)] = all.compactMap { e in (e.heard ?? e.mismatches.first?.sighting).map { (e, $0) } }
        family("beacond_verify_beacon_rssi_dbm", "The last RSSI the beacon was heard with (beacons heard in the last check only).",
               heard.filter { $0.1.rssi != 127 }.map { (labels($0.0), "\($0.1.rssi)") })
        family("beacond_verify_beacon_last_seen_timestamp_seconds", "When the beacon was last heard, in seconds since the Unix epoch (beacons heard in the last check only).",
               heard.map { (labels($0.0), Self.seconds($0.1.lastSeen)) })
        family("beacond_verify_beacons", "Beacons in the last check, by verdict.",
               [Verdict.heard, .missing, .mismatch].map { v in ("{state=\"\(v.rawValue)\",device=\(label(device))}", "\(all.filter { $0.verdict == v }.count)") })
        family("beacond_verify_success", "1 when every expected beacon was heard as configured in the last check.",
               [("{device=\(label(device))}", succeeded ? "1" : "0")])
        family("beacond_verify_last_run_timestamp_seconds", "When the last check started, in seconds since the Unix epoch.",
               [("{device=\(label(device))}", Self.seconds(startedAt))])
        family("beacond_verify_last_run_duration_seconds", "How long the last check listened.",
               [("{device=\(label(device))}", decimal(duration, 3))])
        if !eidKeys.isEmpty {
            family("beacond_verify_clock_synchronized", "1 when the kernel called this receiver's clock synchronized at the last check (Eddystone-EID beacons are judged by it).",
                   [("{device=\(label(device))}", clockSynchronized ? "1" : "0")])
        }
        return t
    }
}

extension String {
    fileprivate func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
