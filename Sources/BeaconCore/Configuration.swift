// The beacond config schema: tables, keys, types, ranges and defaults, validated with every mistake reported.
import BluetoothHCI

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
    public static let validNames = allCases.map(\.description).joined(separator: ", ")
    /// The levels worth choosing (the ones above err are for emergencies beacond never logs).
    public static let common = allCases.filter { $0 >= .err }
    /// "err, warning, notice, info or debug".
    public static let commonNames = proseList(common.map(\.description), "or")
}

/// Whose address the advertising comes from (`[advertising] address`).
public enum AddressPolicy: String, Sendable, Hashable, CaseIterable {
    /// The controller's own public address.
    case `public`
    /// A random static address of each beacon's own, made at its first start and kept in the state directory.
    case `static`
    /// A new non-resolvable private address every `address_rotation_s`.
    case rotating
    /// A new resolvable private address every `address_rotation_s`, made from the beacon's `resolving_key_file`:
    /// a stranger sees a new device each time, a gateway holding the key the same beacon.
    case resolvable

    /// How often a rotating address changes by default: the Core's recommended private address timeout,
    /// T_GAP(private_addr_int).
    public static let rotationPeriod = Duration.seconds(15 * 60)
}

/// Where one beacon's advertising comes from: a policy, or an address the config names.
public enum BeaconAddressSetting: Sendable, Hashable, CustomStringConvertible {
    case policy(AddressPolicy)
    /// A random static address the user chose.
    case chosen(BluetoothAddress)

    public var description: String {
        switch self {
        case .policy(let p): p.rawValue
        case .chosen(let a): a.description
        }
    }
}

/// One beacon's address as the config decides it.
public struct BeaconAddressWanted: Sendable, Hashable {
    /// Nil: the default (`static` where beacond drives the controller, the kernel's choice through mgmt).
    public var setting: BeaconAddressSetting?
    /// What its kept static address is filed under in the state directory (its identity).
    public var key: String
    /// A rotating address's own period (an EID beacon's: its EID's), instead of the common rotation's.
    public var period: UInt64?
    /// A resolvable address's key (`resolving_key_file`, once the loader has read it).
    public var resolvingKey: IdentityKey?
    /// Its kept static address when the lifecycle has it already (the encrypted self-report's, supplied with its
    /// counters: the address its frames' nonce holds): the executor uses it as it is, by no second route.
    public var known: BluetoothAddress?

    public init(_ setting: BeaconAddressSetting?, key: String, period: UInt64? = nil, resolvingKey: IdentityKey? = nil) {
        self.setting = setting
        self.key = key
        self.period = period
        self.resolvingKey = resolvingKey
    }
}

public struct AdvertisingSettings: Sendable, Hashable {
    public var interval: AdvertisingInterval = .appleRecommended
    public var connectable = false
    /// Requested TX power in dBm; nil = the controller's choice.
    public var txPower: Int8?
    /// Nil when the config does not say: `static` where beacond drives the controller (hci, H4), the kernel's choice
    /// through mgmt.
    public var address: AddressPolicy?
    /// Where `address` was set (for messages).
    public var addressLocation: SourceLocation?
    /// How often a rotating or resolvable address changes (`address_rotation_s`).
    public var addressRotation = AddressPolicy.rotationPeriod

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

/// One beacon of the config, with what it sets for itself.
public struct ConfiguredBeacon: Sendable, Hashable {
    public var beacon: Beacon
    /// Its own `interval_ms`; nil = `[advertising] interval_ms`.
    public var interval: AdvertisingInterval?
    /// `name`: the local name a scanner gets in the scan response; nil: no scan response.
    public var name: String?
    /// Its own `address`; nil = `[advertising] address`.
    public var address: BeaconAddressSetting?
    /// Where its table starts.
    public var location: SourceLocation
    /// Where its `address` was set (for messages).
    public var addressLocation: SourceLocation?
    /// How messages name it: "[beacon]", "[[beacon]] #2".
    public var label = "[beacon]"
    /// `resolving_key_file`: the key its resolvable addresses are made from, where it was set, and the key once the
    /// loader has read it.
    public var resolvingKeyFile: String?
    public var resolvingKeyFileLocation: SourceLocation?
    public var resolvingKey: IdentityKey?

    public init(_ beacon: Beacon, interval: AdvertisingInterval? = nil, name: String? = nil, address: BeaconAddressSetting? = nil,
                location: SourceLocation = SourceLocation(line: 1, column: 1), addressLocation: SourceLocation? = nil) {
        self.beacon = beacon
        self.interval = interval
        self.name = name
        self.address = address
        self.location = location
        self.addressLocation = addressLocation
    }

    /// The scan response for `name`: one Complete Local Name structure.
    public var scanResponse: AdvertisingData? {
        name.map { try! AdvertisingData([ADStructure(type: 0x09, data: Array($0.utf8))]) }
    }

    /// The most a name can take: a scan response is 31 bytes, 2 of them the structure's length and type.
    public static let maxNameBytes = 29
}

/// A beacon table that has no `uuid` yet (a fresh install, or a beacon just added): not a mistake, and not on the
/// air until `beacond gen-uuid --set` or the user gives it one.
public struct UnprovisionedBeacon: Sendable, Hashable {
    /// How messages name it: "[beacon]", "[[beacon]] #2".
    public var label: String
    /// Where its table starts.
    public var location: SourceLocation

    public init(label: String = "[beacon]", location: SourceLocation) {
        self.label = label
        self.location = location
    }
}

/// A validated beacond configuration.
public struct BeaconConfiguration: Sendable, Hashable {
    /// The beacons that go on the air, in file order: one for `[beacon]`, one per `[[beacon]]` that has its
    /// identity. A table without its `uuid` yet (the file as a fresh install ships it) is in `unprovisioned`
    /// instead, in `[beacon]` and `[[beacon]]` alike: beacond runs and advertises the others (or nothing) rather
    /// than putting a made-up identity on the air.
    public var beacons: [ConfiguredBeacon]
    /// The beacon tables that lack their uuid, in file order (empty when every beacon has one).
    public var unprovisioned: [UnprovisionedBeacon]
    public var advertising: AdvertisingSettings
    public var controller: ControllerSettings
    public var daemon: DaemonSettings

    /// The first beacon (the only one of a `[beacon]` config).
    public var beacon: Beacon? { beacons.first?.beacon }

    public init(beacons: [ConfiguredBeacon], unprovisioned: [UnprovisionedBeacon] = [], advertising: AdvertisingSettings = .init(),
                controller: ControllerSettings = .init(), daemon: DaemonSettings = .init()) {
        self.beacons = beacons
        self.unprovisioned = beacons.isEmpty && unprovisioned.isEmpty ? [UnprovisionedBeacon(location: SourceLocation(line: 1, column: 1))] : unprovisioned
        self.advertising = advertising
        self.controller = controller
        self.daemon = daemon
    }

    public init(beacon: Beacon?, unprovisioned: SourceLocation? = nil, advertising: AdvertisingSettings = .init(), controller: ControllerSettings = .init(),
                daemon: DaemonSettings = .init()) {
        self.init(beacons: beacon.map { [ConfiguredBeacon($0)] } ?? [], unprovisioned: unprovisioned.map { [UnprovisionedBeacon(location: $0)] } ?? [],
                  advertising: advertising, controller: controller, daemon: daemon)
    }

    /// What to do about the beacons without a uuid, said the same way by STATUS, the journal, check-config and
    /// payload: "[beacon] in PATH:4 has no uuid yet; set one with …" (nil when every beacon has one).
    public func uuidNeeded(path: String) -> String? {
        guard let first = unprovisioned.first else { return nil }
        let fix = "set \(unprovisioned.count == 1 ? "one" : "one for all of them") with 'beacond gen-uuid --set \(path)'"
        if unprovisioned.count == 1 {
            return "\(first.label) in \(path):\(first.location.line) has no uuid yet; \(fix)"
        }
        let lines = proseList(unprovisioned.map { "\($0.location.line)" })
        return "\(unprovisioned.count) beacons in \(path) (lines \(lines)) have no uuid yet; \(fix)"
    }

    /// The interval a beacon asks for: its own, else `[advertising]`'s.
    public func interval(of b: ConfiguredBeacon) -> AdvertisingInterval { b.interval ?? advertising.interval }

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
