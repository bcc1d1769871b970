// Which address each beacon advertises from, decided once: the config's settings per beacon (its own, else
// [advertising]'s; an Eddystone-EID beacon's changes with every EID; an Eddystone-TLM beacon goes out from its
// Eddystone-UID beacon's address), which of them the kernel's management interface can give, and the words that tell
// the user. Configuration, the lifecycle, the backends, check-config, payload, the state file and scan --expect ask
// it; the system parts (kept static addresses, random bytes) stay with the executor.
import BluetoothHCI

/// A beacon's kind of address, as the state file's `address_kind` and payload's `address_setting` name it (the raw
/// values are those words; text is made from them only where it is written).
public enum AddressKind: String, Sendable, Hashable, CaseIterable {
    case `static`, chosen, `public`, rotating, resolvable, eid
    /// Through mgmt: the kernel's own address.
    case kernel

    /// The kind a policy gives where beacond sets the address.
    public init(_ policy: AddressPolicy) {
        switch policy {
        case .public: self = .public
        case .static: self = .static
        case .rotating: self = .rotating
        case .resolvable: self = .resolvable
        }
    }
}

public struct AddressPlan: Sendable, Hashable {
    /// One per beacon, in file order: its setting and what its kept static address is filed under.
    public let wanted: [BeaconAddressWanted]
    /// For an Eddystone-TLM beacon without an address of its own: the Eddystone-UID beacon whose address it shares.
    public let sharesWith: [Int?]
    /// Which beacons are Eddystone-EID beacons (a new private address with every EID).
    public let isEID: [Bool]
    /// Which beacons never go out from the controller's public address: a private address (rotating, resolvable, an
    /// EID's), or an encrypted self-report, whose nonce holds its own address. While a controller refuses beacond's
    /// random address (another program scans on it) they pause; the others take the public address meanwhile.
    public let neverPublic: [Bool]
    /// For a beacon with a rotating or resolvable address whose frame still tells who it is: what tells it
    /// ("its uuid, major and minor"); nil otherwise.
    public let identityOnAir: [String?]
    public let connectable: Bool
    public let device: DeviceSpec
    public let backend: ControllerBackend
    /// How often rotating and resolvable addresses change (`address_rotation_s`).
    public let rotation: Duration
    /// Each beacon's `resolving_key_file` (the one its address is made with: a TLM's is its UID beacon's).
    public let resolvingKeyFiles: [String?]

    /// The rule of the kernel's management interface, said once.
    public static let kernelRule = "the kernel advertises a non-connectable beacon from a non-resolvable address it picks and rotates itself"

    /// Whether the kernel's management interface gives a beacon this address: it picks and rotates a private address
    /// of its own for non-connectable advertising, so it cannot give a static, chosen, or (non-connectable) public one.
    public static func kernelCanGive(_ setting: BeaconAddressSetting?, connectable: Bool) -> Bool {
        switch setting {
        case nil, .policy(.rotating)?: true
        case .policy(.public)?: connectable
        case .policy(.static)?, .policy(.resolvable)?, .chosen?: false
        }
    }

    /// check-config's warning for beacon `k`: a private address that hides nothing, because its frame names it.
    public func identityWarning(_ k: Int) -> String? {
        guard let words = identityOnAir[k], case .policy(let p)? = wanted[k].setting else { return nil }
        return "address = \"\(p.rawValue)\" gives this beacon a new address every \(formatDuration(rotation)), not a new identity: "
            + "\(words) tell anyone who it is, whatever the address; only an Eddystone-EID beacon hides that too"
    }

    /// The kept static address follows the beacon's identity, so reordering the file or adding and removing other
    /// beacons moves nothing; a second beacon with the same identity is filed as "#2". An Eddystone-TLM beacon
    /// without an `address` of its own goes out from the Eddystone-UID beacon's address (the first before it, else
    /// the first in the file): Eddystone receivers pair telemetry with the UID frame by the address the two come from.
    public init(_ config: BeaconConfiguration) {
        var wanted: [BeaconAddressWanted] = []
        var seen: [String: Int] = [:]
        for b in config.beacons {
            let base = b.beacon.identityKey ?? b.beacon.format.rawValue
            let n = (seen[base] ?? 0) + 1
            seen[base] = n
            // An EID beacon's address is a fresh private one with every EID (the lifecycle gives the period); the
            // self-report's is fixed whatever [advertising] says (Home Assistant keys a BTHome device on it).
            let setting: BeaconAddressSetting? = switch b.beacon.format.addressRule.address {
            case .newWithEachEID: .policy(.rotating)
            case .fixed: b.address ?? .policy(.static)
            case .configured, .itsUIDs: b.address ?? config.advertising.address.map { .policy($0) }
            }
            wanted.append(BeaconAddressWanted(setting, key: n == 1 ? base : "\(base) #\(n)",
                                              resolvingKey: setting == .policy(.resolvable) ? b.resolvingKey : nil))
        }
        var keyFiles = config.beacons.map(\.resolvingKeyFile)
        var shares = [Int?](repeating: nil, count: config.beacons.count)
        if let firstUID = config.beacons.firstIndex(where: { $0.beacon.format == .eddystoneUID }) {
            var uid = firstUID
            for (k, b) in config.beacons.enumerated() {
                if b.beacon.format == .eddystoneUID { uid = k }
                if b.beacon.format.addressRule.address == .itsUIDs, b.address == nil {
                    shares[k] = k > firstUID ? uid : firstUID
                    wanted[k] = wanted[shares[k]!]
                    keyFiles[k] = keyFiles[shares[k]!]
                }
            }
        }
        self.wanted = wanted
        sharesWith = shares
        isEID = config.beacons.map { $0.beacon.format.addressRule.address == .newWithEachEID }
        neverPublic = zip(config.beacons, wanted).map { b, w in
            w.setting == .policy(.rotating) || w.setting == .policy(.resolvable) || b.beacon.format.addressRule.address == .newWithEachEID
                || b.beacon.bthome?.encrypted == true
        }
        identityOnAir = zip(config.beacons, wanted).map { b, w in
            guard w.setting == .policy(.rotating) || w.setting == .policy(.resolvable), b.beacon.format.addressRule.identityOnAir || b.name != nil else { return nil }
            let words = b.beacon.format.addressRule.identityWords.map { $0 + (b.name != nil ? " and the name in its scan response" : "") }
                ?? "the name in its scan response"
            return words
        }
        connectable = config.advertising.connectable
        device = config.controller.device
        backend = config.controller.backend
        rotation = config.advertising.addressRotation
        resolvingKeyFiles = keyFiles
    }

    /// Some beacon's address changes every `rotation` (rotating or resolvable) where beacond drives the controller.
    public var rotates: Bool { wanted.contains { $0.setting == .policy(.rotating) || $0.setting == .policy(.resolvable) } }

    /// Why beacond's own commands are needed for these addresses (backend auto then uses raw HCI); nil when the
    /// kernel's management interface can give every one.
    public var ownCommandsNeeded: String? {
        if isEID.contains(true) { return "an Eddystone-EID beacon's address must change with each EID, which needs them" }
        guard let s = wanted.lazy.compactMap(\.setting).first(where: { !Self.kernelCanGive($0, connectable: connectable) }) else { return nil }
        return "address = \"\(s)\" needs them; the management interface would advertise from the kernel's own address"
    }

    /// True when beacond itself tells the controller the addresses (raw HCI or H4), false when the kernel does (mgmt),
    /// as the config asks; the lifecycle may still fall back to raw HCI when mgmt cannot serve.
    public var beacondChooses: Bool {
        guard case .kernel = device else { return true }
        switch backend {
        case .hci: return true
        case .mgmt: return false
        case .auto: return ownCommandsNeeded != nil
        }
    }

    /// Beacon `k`'s kind of address, as the state file names it: eid, chosen, public, static, rotating, resolvable,
    /// or kernel (through mgmt, the kernel's own).
    public func kind(_ k: Int, throughKernel: Bool) -> AddressKind {
        if isEID[k] { return .eid }
        switch wanted[k].setting {
        case .chosen?: return .chosen
        case .policy(let p)?: return throughKernel && p != .public ? .kernel : AddressKind(p)
        case nil: return throughKernel ? .kernel : .static
        }
    }

    /// Beacon `k`'s setting, as a kind (payload's address_setting): eid, chosen, public, static, rotating,
    /// resolvable, or kernel when it has none and the kernel gives it (`throughKernel`; by default as the config
    /// alone decides).
    public func settingKind(_ k: Int, throughKernel: Bool? = nil) -> AddressKind {
        if isEID[k] { return .eid }
        switch wanted[k].setting {
        case .chosen?: return .chosen
        case .policy(let p)?: return AddressKind(p)
        case nil: return throughKernel ?? !beacondChooses ? .kernel : .static
        }
    }

    /// What a kept static address is known as where it is described without being made.
    public enum Kept: Sendable, Hashable {
        case known(BluetoothAddress, file: String)
        case notYet(file: String)
        case unreadable(String, file: String)
    }

    /// The kernel's own address in a few words, where a sentence says it beside another case.
    public static let kernelBrief = "the kernel's own, rotating (mgmt; address = \"static\" keeps it fixed there too)"

    /// The sentence for beacon `k` (check-config, payload), before anything is on the air.
    public func sentence(_ k: Int, throughKernel: Bool, kept: Kept?) -> String {
        if isEID[k] { return "a new non-resolvable private address with every EID" }
        switch wanted[k].setting {
        case .chosen(let a)?: return "\(a) (chosen)"
        case .policy(.public)?: return "public (the controller's own address)"
        case .policy(.rotating)?: return "rotating (a new private address every \(formatDuration(rotation)))"
        case .policy(.resolvable)?:
            return "resolvable (a new resolvable private address every \(formatDuration(rotation)), made with the key in \(resolvingKeyFiles[k] ?? "?"))"
        case nil where throughKernel:
            return "the kernel's own (through mgmt a non-connectable beacon gets a private address the kernel rotates; address = \"static\" gives it a fixed one)"
        case nil, .policy(.static)?:
            switch kept {
            case .known(let a, let file)?: return "\(a) (static, kept in \(file))"
            case .unreadable(let why, let file)?: return "static (kept in \(file); not readable here: \(why))"
            case .notYet(let file)?: return "static, made at first start (kept in \(file))"
            case nil: return "static"
            }
        }
    }

    /// An address on the air, with the setting it came from: "static address C6:…", "chosen address C6:…",
    /// "rotating address 3A:…", "public address" (STATUS and the log).
    public static func describe(_ a: OwnAddress, _ setting: BeaconAddressSetting?) -> String {
        switch (a, setting) {
        case (.public, _): "public address"
        case (.random, .chosen?): "chosen address \(a)"
        case (.random, .policy(let p)?): "\(p.rawValue) address \(a)"
        case (.random, nil): "static address \(a)"
        }
    }
}

extension BeaconConfiguration {
    /// Where each beacon advertises from (`AddressPlan`).
    public var addressPlan: AddressPlan { AddressPlan(self) }
}
