// The config schema as data, in the manner of systemd's ConfigTableItem: one row per key (and per format, where a
// key's range differs by format). The validator's checks, the README's key table, beacond.conf(5) (through
// `beacond check-config --schema`) and the Ansible role's typed keys all come from these rows; adding a key is one row
// here plus its meaning in the validator.
import BluetoothHCI

/// The tables of a beacond config, in documentation order.
public enum ConfigTable: String, Sendable, Hashable, CaseIterable {
    case beacon, advertising, controller, daemon
}

/// What a key's value must be. The validator checks it, and the reference describes it, from this alone.
public enum ConfigValueType: Sendable, Hashable {
    /// A TOML integer in `range`; `unit` ("ms", "dBm") and `note` are said after the range in messages. `{format}`
    /// in the note is the beacon's format.
    case integer(ClosedRange<Int64>, unit: String = "", note: String? = nil)
    case boolean
    /// One of these strings.
    case choice([String])
    /// The beacon's frame: one of `BeaconFormat`'s names.
    case format
    /// A syslog priority name (`LogLevel`, aliases accepted).
    case logLevel
    /// Exactly this many bytes, as twice as many hex digits.
    case hex(bytes: Int)
    /// A UUID, 8-4-4-4-12 hex digits.
    case uuid
    /// 1 to `maxBytes` bytes of UTF-8, no control characters.
    case text(maxBytes: Int)
    /// A file holding a 128-bit key (relative: in the credentials directory): an EID identity key, a bindkey, a
    /// resolving key. `check-config --schema` marks these rows `"keyFile": true`.
    case keyFile
    /// A controller: hciN, tcp:HOST:PORT, unix:PATH, serial:PATH[:BAUD].
    case device
    /// An address policy (`AddressPolicy`) or a random static address the user chose.
    case beaconAddress
    /// An address policy only.
    case addressPolicy

    /// An advertising interval in milliseconds: the Core's 20 ms to 10.24 s (AdvertisingInterval's range).
    public static let interval = ConfigValueType.integer(Int64(AdvertisingInterval.millisecondRange.lowerBound)...Int64(AdvertisingInterval.millisecondRange.upperBound), unit: "ms")

    /// The type as the reference's "type, range" column says it (U+2212 for minus signs).
    public var reference: String {
        func number(_ n: Int64) -> String { n < 0 ? "\u{2212}\(-n)" : "\(n)" }
        func quoted(_ names: [String]) -> String { names.map { "`\"\($0)\"`" }.joined(separator: ", ") }
        switch self {
        case .integer(let r, let unit, _): return "integer \(number(r.lowerBound))…\(number(r.upperBound))" + (unit.isEmpty ? "" : " \(unit)")
        case .boolean: return "boolean"
        case .choice(let names): return quoted(names)
        case .format: return quoted(BeaconFormat.allCases.map(\.rawValue))
        case .logLevel: return LogLevel.common.map { "`\($0)`" }.joined(separator: ", ")
        case .hex(let n): return "string, \(2 * n) hex digits (\(n) bytes)"
        case .uuid: return "string, 8-4-4-4-12 hex, any case"
        case .text(let n): return "string, 1…\(n) bytes of UTF-8"
        case .keyFile: return "string, a file holding 32 hex digits, mode 0600"
        case .device: return "string: " + DeviceSpec.forms.map { "`\($0)`" }.joined(separator: ", ")
        case .beaconAddress: return quoted(AddressPolicy.allCases.map(\.rawValue)) + ", or a random static address `\"C6:12:34:56:78:9A\"`"
        case .addressPolicy: return quoted(AddressPolicy.allCases.map(\.rawValue))
        }
    }

    /// The TOML kind it takes: "integer", "boolean" or "string" (the role renders a value by this).
    public var tomlKind: String {
        switch self {
        case .integer: "integer"
        case .boolean: "boolean"
        default: "string"
        }
    }
}

/// What happens when a key is not in the file.
public enum ConfigDefault: Sendable, Hashable {
    /// The value beacond uses, written as in a config file: setting the key to it changes nothing.
    case value(String)
    /// Unset has its own meaning, said here.
    case unset(String)
    /// Another key's value.
    case inherited(String)
    /// The key must be there.
    case required
    /// A single `[beacon]` may lack it while it is being provisioned (beacond then advertises nothing); each
    /// `[[beacon]]` needs it.
    case provisioning

    public var reference: String {
        switch self {
        case .value(let v): "`\(v)`"
        case .unset(let text): text
        case .inherited(let key): "`\(key)`"
        case .required: "required"
        case .provisioning: "none: beacond runs, and this beacon goes on the air once it is set"
        }
    }
}

/// One key of the config.
public struct ConfigKey: Sendable, Hashable {
    public let table: ConfigTable
    public let name: String
    /// The beacon formats the row applies to (`[beacon]` keys only; empty for the other tables).
    public let formats: [BeaconFormat]
    public let type: ConfigValueType
    public let defaultValue: ConfigDefault
    /// One line: what it means.
    public let help: String

    init(_ table: ConfigTable, _ name: String, _ formats: [BeaconFormat] = [], _ type: ConfigValueType, _ defaultValue: ConfigDefault,
         _ help: String) {
        self.table = table
        self.name = name
        self.formats = formats
        self.type = type
        self.defaultValue = defaultValue
        self.help = help
    }

    /// "beacon.major".
    public var path: String { "\(table.rawValue).\(name)" }
    /// True for a `[beacon]` key every format takes.
    public var isCommon: Bool { table == .beacon && Set(formats) == Set(BeaconFormat.allCases) }
}

public enum ConfigSchema {
    private static let all = BeaconFormat.allCases
    private static let iBeaconLike: [BeaconFormat] = [.ibeacon, .altbeacon]
    private static let eddystoneIdentity: [BeaconFormat] = [.eddystoneUID, .eddystoneEID]
    /// The formats whose address may be a resolvable one: not an EID beacon (its address follows its EID) nor the
    /// self-report (Home Assistant keys it on a fixed address).
    private static let resolvableFormats = all.filter(\.addressRule.takesPrivateAddress)

    /// Every key, in documentation order.
    public static let keys: [ConfigKey] = [
        ConfigKey(.beacon, "format", all, .format, .value("\"ibeacon\""),
                  "the frame on the air; each format has its keys, and a key of another format is an error that names both"),
        ConfigKey(.beacon, "uuid", iBeaconLike, .uuid, .provisioning, "proximity UUID; one per site, shared by its beacons (`beacond gen-uuid --set FILE` fills every beacon without one)"),
        ConfigKey(.beacon, "major", iBeaconLike, .integer(0...65535), .required, "e.g. the store"),
        ConfigKey(.beacon, "minor", iBeaconLike, .integer(0...65535), .required, "e.g. the shelf"),
        ConfigKey(.beacon, "measured_power", iBeaconLike, .integer(-127...20, unit: "dBm"), .value("-59"),
                  "RSSI a phone sees at 1 m; follow `tx_power` (0 dBm ≈ −59)"),
        ConfigKey(.beacon, "measured_power", eddystoneIdentity, .integer(-100...20, unit: "dBm", note: "at 0 m, for \"{format}\""), .value("-18"),
                  "the power at **0 m**, Eddystone's calibration distance (about 41 dB above the 1 m value)"),
        ConfigKey(.beacon, "company_id", [.altbeacon], .integer(0...65535), .value("0x0118"),
                  "the manufacturer's company identifier (0x0118 is Radius Networks, the specification's example)"),
        ConfigKey(.beacon, "reserved", [.altbeacon], .integer(0...255), .value("0"), "the manufacturer-reserved last byte"),
        ConfigKey(.beacon, "namespace", [.eddystoneUID], .hex(bytes: 10), .required, "the namespace, e.g. the first 10 bytes of a UUID"),
        ConfigKey(.beacon, "instance", [.eddystoneUID], .hex(bytes: 6), .required, "the beacon within the namespace"),
        ConfigKey(.beacon, "identity_key_file", [.eddystoneEID], .keyFile, .required,
                  "the 128-bit identity key (`beacond gen-key FILE`); a relative name is a file in `/etc/beacond/keys`, which the units pass as credentials. Never printed"),
        ConfigKey(.beacon, "rotation_exponent", [.eddystoneEID], .integer(0...15, note: "the EID changes every 2^K seconds"), .value("10"),
                  "K: a new EID every 2^K seconds of the wall clock (10: about 17 minutes)"),
        ConfigKey(.beacon, "bindkey_file", [.bthome], .keyFile, .unset("none: the self-report goes out unencrypted"),
                  "the 128-bit bindkey (`beacond gen-key FILE`) the self-report is encrypted with (AES-CCM), which Home Assistant's BTHome integration asks for; found as `identity_key_file` is. Never printed"),
        ConfigKey(.beacon, "resolving_key_file", resolvableFormats, .keyFile, .unset("none"),
                  "the 128-bit identity resolving key (`beacond gen-key FILE`) of `address = \"resolvable\"`, which the beacon's gateways resolve its addresses with (`beacond irk BEACON` prints it for them); found as `identity_key_file` is. Never printed"),
        ConfigKey(.beacon, "interval_ms", all, .interval, .inherited("[advertising] interval_ms"),
                  "this beacon's own interval (its own advertising set or mgmt instance; time-sliced beacons share the shortest)"),
        ConfigKey(.beacon, "name", all, .text(maxBytes: ConfiguredBeacon.maxNameBytes), .unset("none"),
                  "a local name in a scan response, for gateways that list beacons by name; it makes the advertising scannable (ADV_SCAN_IND)"),
        ConfigKey(.beacon, "address", all, .beaconAddress, .inherited("[advertising] address"),
                  "this beacon's own address: a policy, or one you choose (the top two bits 11; each beacon its own); not for eddystone-eid, and only static ones for bthome"),
        ConfigKey(.advertising, "interval_ms", [], .interval, .value("100"), "rounded to 0.625 ms units; Apple asks for 100 ms"),
        ConfigKey(.advertising, "connectable", [], .boolean, .value("false"), "false: ADV_NONCONN_IND (Apple's spec); true: ADV_IND"),
        ConfigKey(.advertising, "tx_power", [], .integer(-127...20, unit: "dBm"), .unset("controller's choice"),
                  "only controllers with extended advertising can set it"),
        ConfigKey(.advertising, "address", [], .addressPolicy,
                  .unset("`\"static\"` (hci, H4): each beacon its own; the kernel's own (mgmt)"),
                  "whose address the beacons without their own `address` come from"),
        ConfigKey(.advertising, "address_rotation_s", [], .integer(1...3600, unit: "s"), .value("900"),
                  "how often a `rotating` or `resolvable` address changes (the Core's recommended 15 minutes)"),
        ConfigKey(.controller, "device", [], .device, .value("\"hci0\""), "which controller"),
        ConfigKey(.controller, "backend", [], .choice(ControllerBackend.allCases.map(\.rawValue)), .value("\"auto\""),
                  "how to talk to a kernel `hciN`: mgmt beside bluetoothd, or raw HCI commands; auto picks"),
        ConfigKey(.daemon, "log_level", [], .logLevel, .unset("`info`, or `--log-level`"), "lowest priority logged"),
    ]

    /// The key names of a table, each once, in documentation order.
    public static func names(in table: ConfigTable) -> [String] {
        var seen = Set<String>()
        return keys.filter { $0.table == table && seen.insert($0.name).inserted }.map(\.name)
    }

    /// The rows named `name` in `table` (two for a key whose range differs by format).
    public static func rows(_ table: ConfigTable, _ name: String) -> [ConfigKey] {
        keys.filter { $0.table == table && $0.name == name }
    }

    /// The row of a `[beacon]` key for a format; nil when the key does not belong to it.
    public static func row(_ name: String, format: BeaconFormat) -> ConfigKey? {
        keys.first { $0.table == .beacon && $0.name == name && $0.formats.contains(format) }
    }

    /// The README's configuration reference: one markdown row per schema row.
    public static var referenceTable: String {
        var lines = ["| key | formats | type, range | default | meaning |", "|---|---|---|---|---|"]
        for k in keys {
            let formats = k.table != .beacon ? "" : k.isCommon ? "all" : k.formats.map(\.rawValue).joined(separator: ", ")
            lines.append("| `[\(k.table.rawValue)] \(k.name)` | \(formats) | \(k.type.reference) | \(k.defaultValue.reference) | \(k.help) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// What a config file may contain.
    public static let syntax = """
        A beacond config is a strict subset of TOML 1.0: every valid beacond config is valid TOML. `[table]` headers, \
        `key = value`, `#` comments, strings in double quotes (TOML escapes) or single quotes, decimal integers (sign \
        and `_` allowed) and `0x` hex, `true`/`false`, and `[[beacon]]` for several beacons. Every mistake is reported \
        as PATH:LINE:COL with the key it concerns.
        """

    /// The syntax, the formats and every row as JSON, for beacond.conf(5) and the role's tests (`beacond check-config --schema`).
    public static var json: String {
        let rows: [JSONValue] = keys.map { k in
            var m: [(String, JSONValue)] = [
                ("table", .string(k.table.rawValue)), ("key", .string(k.name)),
                ("formats", .array(k.formats.map { .string($0.rawValue) })),
                ("kind", .string(k.type.tomlKind)), ("type", .string(k.type.reference)),
                ("default", .string(k.defaultValue.reference)), ("required", .bool(k.defaultValue == .required)),
                // The value names a key file (`BeaconConfiguration.keyFiles` reads it): the role keeps such a file as a
                // credential, refuses a path for it and prefixes its name for a verifier.
                ("keyFile", .bool(k.type == .keyFile)),
                ("help", .string(k.help)),
            ]
            if case .integer(let r, _, _) = k.type { m += [("min", .number(Double(r.lowerBound))), ("max", .number(Double(r.upperBound)))] }
            if case .value(let v) = k.defaultValue { m.append(("value", .string(v))) }
            return JSONValue(members: m)
        }
        return JSONValue(members: [
            ("syntax", .string(syntax)), ("formats", .array(BeaconFormat.allCases.map { .string($0.rawValue) })),
            ("formatNames", .array(BeaconFormat.allCases.map { .string($0.displayName) })), ("keys", .array(rows)),
        ]).text + "\n"
    }
}

extension BeaconFormat {
    /// The `[beacon]` keys of this format alone (every format also takes the common ones: format, interval_ms, name,
    /// address).
    public var keys: [String] {
        ConfigSchema.keys.filter { $0.table == .beacon && !$0.isCommon && $0.formats.contains(self) }.map(\.name)
    }
}

extension JSONValue {
    /// An object with these members, in this order.
    public init(members: [(String, JSONValue)]) {
        self = .object(Dictionary(members, uniquingKeysWith: { $1 }), order: members.map(\.0))
    }
}
