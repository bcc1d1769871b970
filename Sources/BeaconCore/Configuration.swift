// The beacond config schema: tables, keys, types, ranges and defaults, validated with every mistake reported.
import BluetoothHCI
import HCITransport

/// How beacond talks to a kernel device.
public enum ControllerBackend: String, Sendable, Hashable, CaseIterable {
    /// mgmt when the kernel's management interface is usable, the raw HCI channel otherwise.
    case auto
    /// The kernel's management interface (cooperates with bluetoothd).
    case mgmt
    /// Raw HCI commands.
    case hci
}

/// syslog priorities, as systemd names them.
public enum LogLevel: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    case emerg = 0, alert, crit, err, warning, notice, info, debug

    public init?(name: String) {
        switch name.lowercased() {
        case "emerg", "emergency": self = .emerg
        case "alert": self = .alert
        case "crit", "critical": self = .crit
        case "err", "error": self = .err
        case "warning", "warn": self = .warning
        case "notice": self = .notice
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }

    public var description: String {
        ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"][rawValue]
    }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public static let validNames = "emerg, alert, crit, err, warning, notice, info, debug"
}

public struct AdvertisingSettings: Sendable, Hashable {
    public var interval: AdvertisingInterval = .appleRecommended
    public var connectable = false
    /// Requested TX power in dBm; nil = the controller's choice.
    public var txPower: Int8?

    public init() {}

    public var legacyType: LegacyAdvertisingType { connectable ? .connectableUndirected : .nonConnectableUndirected }
}

public struct ControllerSettings: Sendable, Hashable {
    public var device: DeviceSpec = .kernel(index: 0)
    public var backend: ControllerBackend = .auto
    public init() {}
}

public struct DaemonSettings: Sendable, Hashable {
    /// Nil = the program's default (or --log-level).
    public var logLevel: LogLevel?
    public init() {}
}

/// A validated beacond configuration.
public struct BeaconConfiguration: Sendable, Hashable {
    /// Nil when `[beacon]` has no `uuid` yet (the file as a fresh install ships it): beacond then runs and
    /// advertises nothing rather than putting a made-up identity on the air.
    public var beacon: Beacon?
    /// Where the `[beacon]` table that lacks its uuid starts (nil when there is a beacon).
    public var unprovisioned: SourceLocation?
    public var advertising: AdvertisingSettings
    public var controller: ControllerSettings
    public var daemon: DaemonSettings

    public init(beacon: Beacon?, unprovisioned: SourceLocation? = nil, advertising: AdvertisingSettings = .init(), controller: ControllerSettings = .init(),
                daemon: DaemonSettings = .init()) {
        self.beacon = beacon
        self.unprovisioned = beacon == nil ? unprovisioned ?? SourceLocation(line: 1, column: 1) : nil
        self.advertising = advertising
        self.controller = controller
        self.daemon = daemon
    }

    /// The schema: tables and their keys, in documentation order.
    public static let schema: [(table: String, keys: [String])] = [
        ("beacon", ["format", "uuid", "major", "minor", "measured_power", "company_id", "reserved", "namespace", "instance"]),
        ("advertising", ["interval_ms", "connectable", "tx_power"]),
        ("controller", ["device", "backend"]),
        ("daemon", ["log_level"]),
    ]

    /// Checks, parses and validates a whole file. Every mistake is reported, in file order.
    public static func parse(_ bytes: [UInt8]) throws(ConfigDiagnostics) -> BeaconConfiguration {
        if let fileProblem = ConfigFile.check(bytes) { throw ConfigDiagnostics([fileProblem]) }
        let (document, syntax) = TOMLSubset.parse(bytes)
        var v = Validator()
        let result = v.validate(document)
        let all = (syntax + v.diagnostics).sorted { ($0.location ?? .init(line: 0, column: 0)) < ($1.location ?? .init(line: 0, column: 0)) }
        if let result, all.isEmpty { return result }
        throw ConfigDiagnostics(all)
    }
}

private struct Validator {
    var diagnostics: [ConfigDiagnostic] = []

    mutating func fail(_ message: String, at location: SourceLocation, key: String) {
        diagnostics.append(ConfigDiagnostic(message, at: location, key: key))
    }

    mutating func validate(_ doc: TOMLDocument) -> BeaconConfiguration? {
        let tableNames = BeaconConfiguration.schema.map(\.table)
        var uuid: BeaconUUID?
        var unprovisioned: SourceLocation?
        var major: UInt16?
        var minor: UInt16?
        var measuredPower: Int8?
        var companyID = AltBeacon.defaultCompanyID
        var reserved: UInt8 = 0
        var namespace: [UInt8]?
        var instance: [UInt8]?
        // The format decides which [beacon] keys belong; nil when `format` itself is wrong.
        var format: BeaconFormat? = .ibeacon
        if let beaconTable = doc.tables.first(where: { $0.name == "beacon" && !$0.isDuplicate }),
           let entry = beaconTable.entries.first(where: { $0.key == "format" }) {
            let what = "'format' in [beacon]"
            if let text = string(entry.item, what, "beacon.format") {
                format = BeaconFormat(rawValue: text)
                if format == nil {
                    let names = BeaconFormat.allCases.map(\.rawValue)
                    var message = "\(what) must be one of \(names.map { "\"\($0)\"" }.joined(separator: ", ")), found \"\(text)\""
                    if let guess = closest(text, among: names) { message += "; did you mean \"\(guess)\"?" }
                    fail(message, at: entry.item.location, key: "beacon.format")
                }
            } else {
                format = nil
            }
        }
        var advertising = AdvertisingSettings()
        var controller = ControllerSettings()
        var daemon = DaemonSettings()

        for table in doc.tables where !table.isDuplicate {
            guard let name = table.name else {
                for e in table.entries {
                    if let home = BeaconConfiguration.schema.first(where: { $0.keys.contains(e.key) }) {
                        fail("key '\(e.key)' must be inside a table: put it under [\(home.table)]", at: e.keyLocation, key: e.key)
                    } else {
                        fail("unknown key '\(e.key)' outside any table; beacond's keys live in [beacon], [advertising], [controller] and [daemon]",
                             at: e.keyLocation, key: e.key)
                    }
                }
                continue
            }
            guard let keys = BeaconConfiguration.schema.first(where: { $0.table == name })?.keys else {
                var message = "unknown table [\(name)]"
                if let guess = closest(name, among: tableNames) { message += "; did you mean [\(guess)]?" }
                else { message += "; beacond knows [beacon], [advertising], [controller] and [daemon]" }
                fail(message, at: table.location, key: name)
                continue
            }
            for e in table.entries {
                let key = "\(name).\(e.key)"
                guard keys.contains(e.key) else {
                    var message = "unknown key '\(e.key)' in [\(name)]"
                    if let guess = closest(e.key, among: keys) {
                        message += "; did you mean '\(guess)'?"
                    } else if let home = BeaconConfiguration.schema.first(where: { $0.keys.contains(e.key) }) {
                        message += "; '\(e.key)' belongs in [\(home.table)]"
                    } else {
                        message += " (known keys: \(keys.joined(separator: ", ")))"
                    }
                    fail(message, at: e.keyLocation, key: key)
                    continue
                }
                let item = e.item
                let what = "'\(e.key)' in [\(name)]"
                if name == "beacon", e.key != "format", let format, !format.keys.contains(e.key) {
                    let owners = BeaconFormat.allCases.filter { $0.keys.contains(e.key) }.map { "\"\($0.rawValue)\"" }
                    fail("\(what) belongs to format\(owners.count == 1 ? "" : "s") \(owners.joined(separator: " and ")), not to this beacon's format \"\(format.rawValue)\"",
                         at: e.keyLocation, key: key)
                    continue
                }
                switch key {
                case "beacon.format":
                    break  // read above
                case "beacon.company_id": companyID = integer(item, what, key, 0...65535).map { UInt16($0) } ?? companyID
                case "beacon.reserved": reserved = integer(item, what, key, 0...255).map { UInt8($0) } ?? reserved
                case "beacon.namespace": namespace = hexBytes(item, what, key, count: 10)
                case "beacon.instance": instance = hexBytes(item, what, key, count: 6)
                case "beacon.uuid":
                    guard let s = string(item, what, key) else { continue }
                    do {
                        uuid = try BeaconUUID(parsing: s)
                    } catch {
                        let at = item.contentColumn.map { SourceLocation(line: item.location.line, column: $0 + error.offset) } ?? item.location
                        fail("\(what) is not a valid UUID: \(error.message)", at: at, key: key)
                    }
                case "beacon.major": major = integer(item, what, key, 0...65535).map { UInt16($0) }
                case "beacon.minor": minor = integer(item, what, key, 0...65535).map { UInt16($0) }
                case "beacon.measured_power":
                    if format == .eddystoneUID {
                        if let v = integer(item, what, key, -100...20, unit: " dBm (at 0 m, for \"eddystone-uid\")") { measuredPower = Int8(v) }
                    } else if let v = integer(item, what, key, -127...20, unit: " dBm") { measuredPower = Int8(v) }
                case "advertising.interval_ms":
                    if let v = integer(item, what, key, 20...10240, unit: " ms"), let iv = AdvertisingInterval(milliseconds: Int(v)) {
                        advertising.interval = iv
                    }
                case "advertising.connectable":
                    if let v = boolean(item, what, key) { advertising.connectable = v }
                case "advertising.tx_power":
                    if let v = integer(item, what, key, -127...20, unit: " dBm") { advertising.txPower = Int8(v) }
                case "controller.device":
                    guard let s = string(item, what, key) else { continue }
                    do { controller.device = try DeviceSpec(parsing: s) } catch {
                        fail("\(what) is not valid: \(error.message)", at: item.location, key: key)
                    }
                case "controller.backend":
                    guard let s = string(item, what, key) else { continue }
                    if let b = ControllerBackend(rawValue: s) { controller.backend = b } else {
                        fail("\(what) must be one of \"auto\", \"mgmt\", \"hci\", found \"\(s)\"", at: item.location, key: key)
                    }
                case "daemon.log_level":
                    guard let s = string(item, what, key) else { continue }
                    if let l = LogLevel(name: s) { daemon.logLevel = l } else {
                        fail("\(what) must be one of \(LogLevel.validNames), found \"\(s)\"", at: item.location, key: key)
                    }
                default:
                    preconditionFailure("schema lists \(key) but the validator does not handle it")
                }
            }
        }

        if let beaconTable = doc.table("beacon") {
            let present = Set(beaconTable.entries.map(\.key) + beaconTable.failedKeys)
            let required: [String]
            switch format {
            case .ibeacon?, .altbeacon?:
                // No uuid yet is a fresh install, not a mistake: beacond waits for one.
                if !present.contains("uuid") { unprovisioned = beaconTable.location }
                required = ["major", "minor"]
            case .eddystoneUID?: required = ["namespace", "instance"]
            case nil: required = []
            }
            let suffix = format == .ibeacon ? "" : " (format \"\(format?.rawValue ?? "")\")"
            for key in required where !present.contains(key) {
                fail("missing required key '\(key)' in [beacon]\(suffix)", at: beaconTable.location, key: "beacon.\(key)")
            }
        } else {
            fail("missing required table [beacon] with keys uuid, major and minor", at: SourceLocation(line: 1, column: 1), key: "beacon")
        }

        guard diagnostics.isEmpty, let format else { return nil }
        let beacon: Beacon?
        switch format {
        case .ibeacon, .altbeacon:
            guard let major, let minor, uuid != nil || unprovisioned != nil else { return nil }
            let power = measuredPower ?? IBeacon.defaultMeasuredPower
            beacon = uuid.map {
                format == .ibeacon ? .iBeacon(IBeacon(uuid: $0, major: major, minor: minor, measuredPower: power))
                    : .altBeacon(AltBeacon(uuid: $0, major: major, minor: minor, referenceRSSI: power, companyID: companyID, reserved: reserved))
            }
        case .eddystoneUID:
            guard let namespace, let instance,
                  let uid = EddystoneUID(namespace: namespace, instance: instance, txPowerAt0m: measuredPower ?? EddystoneUID.defaultTxPowerAt0m)
            else { return nil }
            beacon = .eddystoneUID(uid)
        }
        return BeaconConfiguration(beacon: beacon, unprovisioned: unprovisioned, advertising: advertising, controller: controller,
                                   daemon: daemon)
    }

    /// Exactly `count` bytes written as 2 × count hex digits.
    mutating func hexBytes(_ item: TOMLItem, _ what: String, _ key: String, count: Int) -> [UInt8]? {
        guard let s = string(item, what, key) else { return nil }
        let digits = Array(s.unicodeScalars)
        let kind = "\(2 * count) hex digits (\(count) bytes)"
        if let bad = digits.firstIndex(where: { !$0.properties.isASCIIHexDigit }) {
            fail("\(what) must be \(kind): '\(digits[bad])' at character \(bad + 1) is not a hex digit", at: item.location, key: key)
            return nil
        }
        guard digits.count == 2 * count else {
            fail("\(what) must be \(kind), found \(digits.count)", at: item.location, key: key)
            return nil
        }
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0]) + String(digits[$0 + 1]), radix: 16)! }
    }

    mutating func string(_ item: TOMLItem, _ what: String, _ key: String) -> String? {
        if case .string(let s) = item.value { return s }
        fail("\(what) must be a string, found \(item.value.kindDescription)", at: item.location, key: key)
        return nil
    }

    mutating func boolean(_ item: TOMLItem, _ what: String, _ key: String) -> Bool? {
        if case .boolean(let v) = item.value { return v }
        fail("\(what) must be true or false, found \(item.value.kindDescription)", at: item.location, key: key)
        return nil
    }

    mutating func integer(_ item: TOMLItem, _ what: String, _ key: String, _ range: ClosedRange<Int64>, unit: String = "") -> Int64? {
        guard case .integer(let v) = item.value else {
            fail("\(what) must be an integer, found \(item.value.kindDescription)", at: item.location, key: key)
            return nil
        }
        guard range.contains(v) else {
            fail("\(what) must be from \(range.lowerBound) to \(range.upperBound)\(unit), found \(v)", at: item.location, key: key)
            return nil
        }
        return v
    }
}

/// The candidate within edit distance 2 (or a third of the word's length, if larger), nearest first.
func closest(_ word: String, among candidates: [String]) -> String? {
    let limit = max(2, word.count / 3)
    let scored = candidates.map { ($0, editDistance(word.lowercased(), $0)) }.filter { $0.1 <= limit }
    return scored.min { $0.1 < $1.1 }?.0
}

/// Levenshtein distance over characters.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
