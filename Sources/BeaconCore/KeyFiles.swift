// The key files a config names (an EID beacon's identity key, the self-report's bindkey, a resolvable address's
// resolving key), listed once so the loader reads them all alike: the same directory, the same checks, the same
// messages at the key that names them.

/// One key file of the config: whose it is, the key naming it, and where.
public struct KeyFileReference: Sendable, Hashable {
    /// The beacon's index in `BeaconConfiguration.beacons`.
    public var beacon: Int
    /// The config key that names the file: "identity_key_file", "bindkey_file", "resolving_key_file".
    public var key: String
    public var file: String
    public var location: SourceLocation?
    /// What the key is, in messages: "an Eddystone-EID identity key".
    public var kind: String

    public init(beacon: Int, key: String, file: String, location: SourceLocation?, kind: String) {
        (self.beacon, self.key, self.file, self.location, self.kind) = (beacon, key, file, location, kind)
    }
}

extension BeaconConfiguration {
    /// Every key file the config names, in file order.
    public var keyFiles: [KeyFileReference] {
        var out: [KeyFileReference] = []
        for (k, b) in beacons.enumerated() {
            if let e = b.beacon.eid {
                out.append(KeyFileReference(beacon: k, key: "identity_key_file", file: e.keyFile, location: e.keyFileLocation,
                                            kind: "an Eddystone-EID identity key"))
            }
            if let h = b.beacon.bthome, let file = h.bindkeyFile {
                out.append(KeyFileReference(beacon: k, key: "bindkey_file", file: file, location: h.bindkeyFileLocation, kind: "a BTHome bindkey"))
            }
            if let file = b.resolvingKeyFile {
                out.append(KeyFileReference(beacon: k, key: "resolving_key_file", file: file, location: b.resolvingKeyFileLocation,
                                            kind: "a resolving key"))
            }
        }
        return out
    }

    /// Puts the key read from `ref`'s file in its place.
    public mutating func setKey(_ key: IdentityKey, for ref: KeyFileReference) {
        switch ref.key {
        case "identity_key_file":
            guard case .eddystoneEID(var e) = beacons[ref.beacon].beacon else { return }
            e.key = key
            beacons[ref.beacon].beacon = .eddystoneEID(e)
        case "bindkey_file":
            guard case .bthome(var h) = beacons[ref.beacon].beacon else { return }
            h.bindkey = BindKey(key.bytes)
            beacons[ref.beacon].beacon = .bthome(h)
        default:
            beacons[ref.beacon].resolvingKey = key
        }
    }
}
