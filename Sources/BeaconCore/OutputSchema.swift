// The reports beacond prints as data, as ConfigSchema is the config's: one row per field (its place, its JSON types
// and its meaning). Every JSON beacond writes names its members by `OutputKey` and goes out through `JSONValue.text`;
// the tables of docs/output.md and the README's `status --json` table are these rows' rendering (OutputSchemaTests),
// and the integration tests hold real output against them.

/// Every member name of beacond's JSON: the vocabulary the rows below place and describe.
public enum OutputKey: String, Sendable, CaseIterable {
    case version, pid, config, path, sha256, phase, status, controller, device, backend, family
    case bluetoothVersion = "bluetooth_version", manufacturer, sets, instances, timeSliced = "time_sliced"
    case beacons, index, format, identity, uuid, major, minor, namespace, instance, key
    case rotationExponent = "rotation_exponent", bindkeyFile = "bindkey_file", address, addressKind = "address_kind"
    case addressHeldBack = "address_held_back", paused, intervalMs = "interval_ms", onAir = "on_air", onAirSince = "on_air_since"
    case warnings, reload, count, result, errorCount = "error_count", errorLines = "error_lines", lastRefused = "last_refused"
    case at, clock, synchronized
    case ok, problems, daemons, unit, stateFile = "state_file", unreadable
    case controllers, up, rfkill, soft, hard, bluetoothd, running, passiveScanning = "passive_scanning", passiveScanningUnknown = "passive_scanning_unknown", mgmt, powered, lowEnergy = "low_energy"
    case maxDataLength = "max_data_length", advertisingSets = "advertising_sets", mgmtError = "mgmt_error", hci
    case extendedAdvertising = "extended_advertising", txPowerRange = "tx_power_range", hciError = "hci_error", run, why
    case sharing, addresses, notes
    case measuredPower = "measured_power", companyID = "company_id", reserved, measuredPower0m = "measured_power_0m"
    case periodStart = "period_start", eid, batteryMv = "battery_mv", temperatureC = "temperature_c", encrypted
    case connectable, pdu, txPower = "tx_power", advertisingData = "advertising_data", addressSetting = "address_setting"
    case addressSettingWithSets = "address_setting_with_sets", scanResponse = "scan_response"
    case kind, advCount = "adv_count", uptimeS = "uptime_s", name, timeCounter = "time_counter", resolved, reason, data
    case addressResolvedBy = "address_resolved_by"
    case rssi, rssiSmoothed = "rssi_smoothed", rssiFilter = "rssi_filter", distanceM = "distance_m"
    case distanceModel = "distance_model", proximity, packets, addressType = "address_type", calibration, samples
    case medianRSSI = "median_rssi", measuredPowerAt = "measured_power_at", final, entries, capacity, evicted
    case line, beacon, identityKeyFile = "identity_key_file", chosenAddress = "chosen_address"
    case resolvingKeyFile = "resolving_key_file", lastSeen = "last_seen", eidPeriodOffsetS = "eid_period_offset_s"
    case mismatches, differences, expected, heard, missing, mismatched, unexpected, seconds, exit
    case keyTrials = "key_trials", addressesSkipped = "addresses_skipped", keyTrialsSkipped = "key_trials_skipped"
}

/// A JSON type a field can have.
public enum OutputType: String, Sendable, CaseIterable {
    case string, integer, number, boolean, object, array, null
}

/// One field of a report: where it is (`beacons[].address`: in each element of `beacons`), its types, its meaning.
public struct OutputField: Sendable, Hashable {
    public let path: String
    public let types: [OutputType]
    public let meaning: String

    public init(_ path: String, _ types: [OutputType], _ meaning: String) {
        self.path = path
        self.types = types
        self.meaning = meaning
    }

    /// The member's own name (the path's last part).
    public var name: String { String(path.split(separator: ".").last!.prefix { $0 != "[" }) }
    /// The path of the object it is in ("" at the top).
    public var parent: String { path.contains(".") ? String(path[..<path.lastIndex(of: ".")!]) : "" }

    /// Its line of a reference table.
    public var tableRow: String {
        "| `\(path)` | \(types.map(\.rawValue).joined(separator: " or ")) | \(meaning) |"
    }
}

/// The JSON reports, in documentation order.
public enum OutputReport: String, Sendable, CaseIterable {
    case state, status, check, payload, scan, expect

    /// The command or file, as the reference's heading names it.
    public var title: String {
        switch self {
        case .state: "`state.json`"
        case .status: "`beacond status --json`"
        case .check: "`beacond status --check --json`"
        case .payload: "`beacond payload --format json`"
        case .scan: "`beacond scan --json`"
        case .expect: "`beacond scan --expect FILE --json`"
        }
    }

    public var lead: String {
        switch self {
        case .state: "What `run` writes to `$RUNTIME_DIRECTORY/state.json` (one object and a newline) within 10 ms of a change of its state, and before it tells systemd READY=1."
        case .status: "One object: the verdict, and each running beacond's state file with where it was read."
        case .check: "One object: the controller's own answers and what `run` would do with the config, without advertising."
        case .payload: "One object per beacon, one line each: the frame and the advertising settings."
        case .scan: "One object per line: each sender when its entry changes (about each second) and once more at the end with `final`, then a summary."
        case .expect: "One object per line: a verdict per configured beacon (`kind` `expect`), each beacon heard in none of the configs (`unexpected`), then `expect_summary`."
        }
    }

    public var fields: [OutputField] { OutputSchema.fields(self) }

    /// Members under this path prefix that are another report's rows (a daemon's state file, a mismatch's sighting).
    public var inherits: (prefix: String, report: OutputReport)? {
        switch self {
        case .status: ("daemons[].", .state)
        case .expect: ("mismatches[].", .expect)
        default: nil
        }
    }

    /// What in `value` (one object of this report) no row describes, or has a type its row does not give: empty
    /// when the rows hold.
    public func violations(_ value: JSONValue) -> [String] {
        var out: [String] = []
        func row(_ path: String) -> OutputField? {
            if let f = fields.first(where: { $0.path == path }) { return f }
            guard let (prefix, other) = inherits, path.hasPrefix(prefix) else { return nil }
            return other.fields.first { $0.path == path.dropFirst(prefix.count) }
        }
        func walk(_ v: JSONValue, _ at: String) {
            guard case .object(let members, let order) = v else { return }
            for name in order {
                let path = at.isEmpty ? name : at + "." + name, member = members[name]!
                guard let f = row(path) else { out.append("\(path): no row"); continue }
                if !f.types.contains(where: member.isA) { out.append("\(path): \(member.text) is not \(f.types.map(\.rawValue).joined(separator: " or "))") }
                if case .array(let items) = member { items.forEach { walk($0, path + "[]") } } else { walk(member, path) }
            }
        }
        walk(value, "")
        return out
    }

    /// The report's section of docs/output.md: heading, lead and table.
    public var reference: String {
        "## \(title)\n\n\(lead)\n\n| field | type | meaning |\n|---|---|---|\n" + fields.map { $0.tableRow + "\n" }.joined()
    }
}

public enum OutputSchema {
    typealias F = OutputField

    /// A beacon frame's own fields as payload, scan and scan --expect name them (the config's key names).
    static let frameFields: [F] = [
        F("uuid", [.string], "iBeacon, AltBeacon: the UUID, upper case"),
        F("major", [.integer], "iBeacon, AltBeacon"),
        F("minor", [.integer], "iBeacon, AltBeacon"),
        F("measured_power", [.integer], "the power expected at 1 m, dBm (AltBeacon's reference RSSI; Eddystone's 0 m value − 41 dB)"),
        F("company_id", [.integer], "AltBeacon: the manufacturer's company id"),
        F("reserved", [.integer], "AltBeacon: the reserved byte"),
        F("namespace", [.string], "Eddystone-UID: 20 hex digits"),
        F("instance", [.string], "Eddystone-UID: 12 hex digits"),
        F("measured_power_0m", [.integer], "Eddystone: the power at 0 m, dBm, as the frame carries it"),
    ]

    /// Eddystone-TLM's telemetry.
    static let telemetryFields: [F] = [
        F("battery_mv", [.integer], "Eddystone-TLM: the battery, mV (0: none)"),
        F("temperature_c", [.number, .null], "Eddystone-TLM: the temperature, °C; null when not known"),
    ]

    /// Eddystone-TLM's counters and an EID as received (scan, scan --expect).
    static let receivedFields: [F] = [
        F("adv_count", [.integer], "Eddystone-TLM: advertisements since power-up"),
        F("uptime_s", [.number], "Eddystone-TLM: seconds since power-up"),
        F("eid", [.string], "Eddystone-EID: the identifier heard, 16 hex digits"),
    ]

    /// Who sent it, and how often it was heard.
    static let senderFields: [F] = [
        F("address", [.string], "the sender's address"),
        F("address_type", [.string], "`public`, `random`, …"),
        F("packets", [.integer], "packets heard"),
    ]

    /// What a receiver heard of one sender (scan --expect).
    static let sightingFields: [F] = [F("rssi", [.integer, .null], "the last packet's RSSI, dBm; null when the controller did not measure it")] + senderFields + [
        F("last_seen", [.number], "seconds since the scan started, when last heard"),
        F("eid_period_offset_s", [.integer], "an Eddystone-EID resolved: its period's start against the scan's clock, s"),
    ]

    static let stateFields: [F] = [
        F("version", [.string], "beacond's version"),
        F("pid", [.integer], "its process id"),
        F("config", [.object], "the file on the air"),
        F("config.path", [.string], "its path"),
        F("config.sha256", [.string], "the SHA-256 of its bytes (a refused file does not change it)"),
        F("phase", [.string], "`advertising`, `unprovisioned` (no uuid yet), `starting`, `opening`, `applying`, `reapply-wait`, `waiting`, `power-cycling`, `stopping`"),
        F("status", [.string], "the STATUS line `systemctl status` shows"),
        F("controller", [.object], "the controller; null values while none is open"),
        F("controller.device", [.string], "the device, as `--device` names it"),
        F("controller.backend", [.string, .null], "`hci` or `mgmt`"),
        F("controller.family", [.string, .null], "`legacy` or `extended` advertising"),
        F("controller.bluetooth_version", [.string, .null], "the version the controller reports (`5.0`)"),
        F("controller.manufacturer", [.integer, .null], "its company id"),
        F("controller.sets", [.integer, .null], "advertising sets (raw HCI, extended)"),
        F("controller.instances", [.integer, .null], "the kernel's advertising instances (mgmt)"),
        F("controller.time_sliced", [.boolean], "the beacons take turns on one set"),
        F("beacons", [.array], "one object per configured beacon, in config order"),
        F("beacons[].index", [.integer], "1-based, in config order"),
        F("beacons[].format", [.string], "the config's `format`"),
        F("beacons[].identity", [.object], "the identity by the config's keys (none for Eddystone-TLM)"),
        F("beacons[].identity.uuid", [.string], "iBeacon, AltBeacon"),
        F("beacons[].identity.major", [.integer], "iBeacon, AltBeacon"),
        F("beacons[].identity.minor", [.integer], "iBeacon, AltBeacon"),
        F("beacons[].identity.namespace", [.string], "Eddystone-UID"),
        F("beacons[].identity.instance", [.string], "Eddystone-UID"),
        F("beacons[].identity.key", [.string], "Eddystone-EID: the identity key's file name, never the key"),
        F("beacons[].identity.rotation_exponent", [.integer], "Eddystone-EID"),
        F("beacons[].identity.bindkey_file", [.string], "BTHome: the bind key's file name, when encrypted"),
        F("beacons[].address", [.string, .null], "the address it goes out from; null where the kernel or the controller picks it"),
        F("beacons[].address_kind", [.string], "`static`, `chosen`, `public`, `rotating`, `resolvable`, `eid`, `kernel`"),
        F("beacons[].address_held_back", [.string, .null], "why it goes out from the public address for now (another program scans on the controller)"),
        F("beacons[].paused", [.string, .null], "why it is off the air while the others are on: its address refused and the public one not for it (another program scans), or its self-report counters not kept"),
        F("beacons[].interval_ms", [.number, .null], "how often it is on the air, ms (a time-sliced beacon's whole round)"),
        F("beacons[].on_air", [.boolean], "the controller confirmed it"),
        F("beacons[].on_air_since", [.integer, .null], "since when, Unix seconds"),
        F("beacons[].warnings", [.array], "strings: what may keep receivers from hearing it as meant"),
        F("reload", [.object], "reloads since the start"),
        F("reload.count", [.integer], "how many"),
        F("reload.result", [.string, .null], "the last one's: `applied`, `refused`, `in-progress`"),
        F("reload.error_count", [.integer], "when refused: the file's errors (never their text: the journal and `check-config` have it)"),
        F("reload.error_lines", [.array], "when refused: the first 20 lines with an error"),
        F("last_refused", [.object, .null], "the last refused file, kept after a later good reload"),
        F("last_refused.at", [.integer], "when, Unix seconds"),
        F("last_refused.error_count", [.integer], "its errors"),
        F("last_refused.error_lines", [.array], "the first 20 lines with one"),
        F("clock", [.object, .null], "when an Eddystone-EID beacon is configured"),
        F("clock.synchronized", [.boolean, .string], "`true`, `false`, or `\"unknown\"` where adjtimex is refused"),
    ]

    static let statusFields: [F] = [
        F("ok", [.boolean], "every beacond found is on the air as configured (and runs the expected file)"),
        F("problems", [.array], "strings: each problem with what to do"),
        F("daemons", [.array], "one object per running beacond: these members, then its state file's"),
        F("daemons[].unit", [.string, .null], "`beacond.service`, `beacond@hci1.service`; null when run by hand"),
        F("daemons[].state_file", [.string], "where it was read"),
        F("daemons[].unreadable", [.string], "why its state file cannot be read (then only `pid` follows)"),
    ]

    static let checkFields: [F] = [
        F("ok", [.boolean], "`run` would put every beacon on the air"),
        F("problems", [.array], "strings: each problem with what to do"),
        F("device", [.string], "the device checked"),
        F("controllers", [.array], "the kernel's controllers"),
        F("controllers[].device", [.string], "`hciN`"),
        F("controllers[].up", [.boolean, .null], "powered up"),
        F("controllers[].rfkill", [.object], "its radio switch"),
        F("controllers[].rfkill.soft", [.boolean, .null], "blocked in software"),
        F("controllers[].rfkill.hard", [.boolean, .null], "blocked by a switch"),
        F("bluetoothd", [.object], "BlueZ's daemon"),
        F("bluetoothd.running", [.boolean, .null], "whether it runs"),
        F("bluetoothd.passive_scanning", [.boolean, .null], "whether it offers passive scanning on the adapter (AdvertisementMonitorManager1: `Experimental = true`); null when it could not be asked"),
        F("bluetoothd.passive_scanning_unknown", [.string, .null], "why it could not be asked"),
        F("mgmt", [.object, .null], "the kernel's management interface's answers"),
        F("mgmt.powered", [.boolean], "powered"),
        F("mgmt.low_energy", [.boolean], "LE enabled"),
        F("mgmt.bluetooth_version", [.string], "the controller's version"),
        F("mgmt.manufacturer", [.integer], "its company id"),
        F("mgmt.instances", [.integer, .null], "advertising instances"),
        F("mgmt.max_data_length", [.integer, .null], "advertising data bytes"),
        F("mgmt.advertising_sets", [.integer, .null], "the controller's sets, as the kernel says"),
        F("mgmt_error", [.string, .null], "why mgmt could not answer"),
        F("hci", [.object, .null], "the controller's own answers over raw HCI"),
        F("hci.bluetooth_version", [.string], "its version"),
        F("hci.manufacturer", [.integer], "its company id"),
        F("hci.extended_advertising", [.boolean], "extended advertising commands"),
        F("hci.sets", [.integer, .null], "advertising sets"),
        F("hci.tx_power_range", [.array, .null], "`[min, max]` dBm"),
        F("hci_error", [.string, .null], "why raw HCI could not answer"),
        F("run", [.object, .null], "what `run` would do with the config"),
        F("run.config", [.string], "the config's path"),
        F("run.backend", [.string, .null], "`hci` or `mgmt`"),
        F("run.why", [.string], "why that backend"),
        F("run.family", [.string, .null], "`legacy` or `extended`"),
        F("run.sharing", [.string, .null], "how the beacons share the controller"),
        F("run.addresses", [.array], "strings: each beacon's address (`kernel`: the kernel's own)"),
        F("run.notes", [.array], "strings"),
    ]

    static let payloadFields: [F] = [F("format", [.string], "the frame, as the config's `format` (absent for iBeacon)")] + frameFields + [
        F("rotation_exponent", [.integer], "Eddystone-EID: K, a new EID every 2^K s"),
        F("period_start", [.integer, .null], "Eddystone-EID: the time counter the EID is for"),
        F("eid", [.string], "Eddystone-EID: the ephemeral identifier, 16 hex digits"),
    ] + telemetryFields + [
        F("encrypted", [.boolean], "BTHome: the frame is encrypted"),
        F("interval_ms", [.number], "the configured advertising interval, ms: what the hcitool recipe gives this beacon alone; beacons that take turns on a controller without advertising sets get what the controller allows (`check-config` says what it depends on, `status` what they got)"),
        F("connectable", [.boolean], "`advertising.connectable`"),
        F("pdu", [.string], "the legacy PDU: `ADV_NONCONN_IND`, `ADV_SCAN_IND`, `ADV_IND`"),
        F("tx_power", [.integer, .null], "`advertising.tx_power`, dBm"),
        F("advertising_data", [.string], "the advertising data, hex"),
        F("address", [.string, .null], "the address it goes out from, when beacond chooses it"),
        F("address_setting", [.string], "the address on a controller without sets"),
        F("address_setting_with_sets", [.string], "the address on one with sets"),
        F("scan_response", [.string], "the scan response data, hex, when there is one"),
    ]

    static let scanFields: [F] = [
        F("kind", [.string], "`ibeacon`, `altbeacon`, `eddystone-uid`, `eddystone-tlm`, `eddystone-eid`, `malformed-ibeacon`, `other`; `summary` last"),
        F("name", [.string], "Eddystone-EID resolved: the key's name"),
        F("time_counter", [.integer], "Eddystone-EID resolved: the time counter it was resolved for"),
        F("resolved", [.boolean], "Eddystone-EID: whether a key resolved it"),
    ] + frameFields + telemetryFields + receivedFields + [
        F("reason", [.string], "`malformed-ibeacon`: what is wrong with it"),
        F("rssi", [.integer], "the last packet's RSSI, dBm (127: not measured)"),
        F("rssi_smoothed", [.number, .null], "the RSSI filtered"),
        F("rssi_filter", [.string], "which filter"),
        F("distance_m", [.number, .null], "the distance estimated from the smoothed RSSI, m"),
        F("distance_model", [.string], "`android-beacon-library`"),
        F("proximity", [.string], "`immediate`, `near`, `far`, `unknown`"),
        F("data", [.string], "`malformed-ibeacon`, `other`: the advertising data, hex"),
    ] + senderFields + [
        F("address_resolved_by", [.string], "a resolvable private address: the name of the key (`--eid-keys`) it resolves under"),
        F("calibration", [.object], "`--calibrate`, on final lines: the value for `measured_power`"),
        F("calibration.samples", [.integer], "RSSI samples"),
        F("calibration.median_rssi", [.number, .null], "their median, dBm"),
        F("calibration.measured_power", [.integer, .null], "the config value to use; null with too few samples"),
        F("calibration.measured_power_at", [.string], "`0 m` for Eddystone-UID, whose value is at 0 m"),
        F("final", [.boolean], "`true` on the lines at the end"),
        F("entries", [.integer], "summary: senders kept"),
        F("capacity", [.integer], "summary: how many it keeps"),
        F("evicted", [.integer], "summary: senders dropped to keep within it"),
        F("key_trials", [.integer], "summary, `--eid-keys`: resolvable addresses tried against a key (one AES block each)"),
        F("addresses_skipped", [.integer], "summary, `--eid-keys`: fresh resolvable addresses heard past the cap of 50,000 key trials a second, not tried then"),
        F("key_trials_skipped", [.integer], "summary, `--eid-keys`: the key trials those would have cost"),
    ]

    static let expectFields: [F] = [
        F("kind", [.string], "`expect`, `unexpected`, `expect_summary`"),
        F("status", [.string], "`heard`, `missing`, `mismatch`"),
        F("config", [.string], "the config file"),
        F("line", [.integer], "the beacon's line in it"),
        F("beacon", [.integer], "its number there, 1-based"),
        F("format", [.string], "the config's `format`; for `unexpected`, the frame's kind"),
    ] + frameFields + telemetryFields + receivedFields + [
        F("identity_key_file", [.string], "Eddystone-EID: the config's key file"),
        F("rotation_exponent", [.integer], "Eddystone-EID: K"),
        F("chosen_address", [.string], "the address the config chose"),
        F("resolving_key_file", [.string], "the config's resolving key file"),
    ] + sightingFields + [
        F("mismatches", [.array], "beacons heard with other content: each with what differs, then a frame's and a sighting's fields as above"),
        F("mismatches[].differences", [.array], "strings: each difference"),
        F("mismatches[].kind", [.string], "the frame heard"),
        F("device", [.string], "summary: the device"),
        F("expected", [.integer], "summary: beacons configured"),
        F("heard", [.integer], "summary: heard as configured"),
        F("missing", [.integer], "summary: not heard"),
        F("mismatched", [.integer], "summary: heard with other content"),
        F("unexpected", [.integer], "summary: beacons in none of the configs"),
        F("seconds", [.number], "summary: how long it listened"),
        F("exit", [.integer], "summary: the exit code"),
        F("final", [.boolean], "`true` on the summary"),
    ]

    public static func fields(_ report: OutputReport) -> [OutputField] {
        switch report {
        case .state: stateFields
        case .status: statusFields
        case .check: checkFields
        case .payload: payloadFields
        case .scan: scanFields
        case .expect: expectFields
        }
    }

    /// docs/output.md's tables, every report's.
    public static var reference: String { OutputReport.allCases.map(\.reference).joined(separator: "\n") }

    /// The README's `status --json` table: a daemon's own members and the state file's top level, an object's
    /// members named after its meaning.
    public static var readmeTable: String {
        let rows = statusFields.filter { $0.parent == "daemons[]" } + stateFields.filter { $0.parent.isEmpty }
        return "| field | type | meaning |\n|---|---|---|\n" + rows.map { row in
            let members = stateFields.filter { $0.parent == row.name || $0.parent == row.name + "[]" }.map { "`\($0.name)`" }
            let meaning = members.isEmpty ? row.meaning : row.meaning + ": " + members.joined(separator: ", ")
            return OutputField(row.name, row.types, meaning).tableRow + "\n"
        }.joined()
    }
}

extension JSONValue {
    /// An object whose members the output vocabulary names, in this order.
    public init(_ members: [(OutputKey, JSONValue)]) {
        self.init(members: members.map { ($0.0.rawValue, $0.1) })
    }

    public subscript(key: OutputKey) -> JSONValue? { self[key.rawValue] }

    /// A string, or null.
    public init(_ s: String?) { self = s.map { .string($0) } ?? .null }
    /// An integer, or null.
    public init<T: BinaryInteger>(_ n: T?) { self = n.map { .number(Double($0)) } ?? .null }
    /// A boolean, or null.
    public init(_ b: Bool?) { self = b.map { .bool($0) } ?? .null }
    /// `x` with `digits` fixed decimals (`decimal`), or null.
    public init(_ x: Double?, decimals digits: Int) { self = x.map { .numeral(decimal($0, digits)) } ?? .null }
    /// An array of strings.
    public init(strings: [String]) { self = .array(strings.map { .string($0) }) }

    /// Whether it is of this type (an integer is a number too).
    public func isA(_ type: OutputType) -> Bool {
        switch (type, self) {
        case (.string, .string), (.boolean, .bool), (.object, .object), (.array, .array), (.null, .null): true
        case (.number, _): number != nil
        case (.integer, .numeral(let s)): !s.contains(".") && !s.contains("e") && Int(s) != nil
        case (.integer, _): int != nil
        default: false
        }
    }
}
