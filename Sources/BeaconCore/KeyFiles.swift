// The key files a config names (an EID beacon's identity key, the self-report's bindkey, a resolvable address's
// resolving key), listed once so the loader reads them all alike: the same directory, the same checks, the same
// messages at the key that names them.
import SystemConditions

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

/// What is wrong with a key file, said without its name: an `identity_key_file` value may be a key pasted where
/// the name belongs (review #43), so no message carries it or a path made from it; the PATH:LINE:COL before the
/// message points at the line that has it.
public enum KeyFileProblem: Error, Sendable, Hashable {
    case missing
    /// Missing from the unit's credentials: a copy made at its start.
    case notACredential
    case notRegularFile
    case permissionDenied
    case cannotOpen(SystemCondition)
    case ownedByOther(owner: UInt32, me: UInt32)
    case credentialReadable(mode: UInt32)
    case readable(mode: UInt32)
    case cannotRead(SystemCondition)
    case hexDigits(Int)
    case rawBytes
    case notAKey(bytes: Int)

    /// Why opening a key file failed, said as a key file's problem. The unit's credentials are a copy made at its
    /// start, read-only: a key added since is not in it (`isCredential`: the file was looked for among them).
    public init(opening c: SystemCondition, isCredential: Bool) {
        switch c.kind {
        case .notFound where isCredential: self = .notACredential
        case .notFound: self = .missing
        case .isDirectory, .invalidArgument: self = .notRegularFile
        case .accessDenied: self = .permissionDenied
        default: self = .cannotOpen(c)
        }
    }

    /// The rest of a sentence whose subject is the file `value` names, a relative one in `directory`.
    /// `kind` names the key ("an Eddystone-EID identity key", "a BTHome bindkey").
    public func sentence(_ value: String, in directory: String, kind: String = "an Eddystone-EID identity key") -> String {
        let relative = !value.hasPrefix("/")
        return (relative ? "the file it names in \(directory)" : "the file it names") + " " + predicate(value, in: directory, kind: kind)
    }

    /// What the file is or lacks: the sentence without its subject (`beacond irk BEACON` puts the BEACON it was given
    /// before it).
    public func predicate(_ value: String, in directory: String, kind: String = "an Eddystone-EID identity key") -> String {
        let relative = !value.hasPrefix("/")
        let file = relative ? "\(directory)/NAME" : "FILE"
        let what: String
        switch self {
        case .missing:
            what = "does not exist: make one with 'beacond gen-key \(file)', \(relative ? "NAME" : "FILE") as on that line (a name is never shown: it may be a key)"
        case .notACredential:
            what = "is not among the keys the unit was started with: make it with 'sudo beacond gen-key /etc/beacond/keys/NAME', NAME as on that line, if it is new, then restart the unit (systemctl restart; a reload does not read new keys)"
        case .notRegularFile: what = "is not a regular file"
        case .permissionDenied: what = "cannot be read by beacond (permission denied)"
        case .cannotOpen(let e): what = "cannot be opened: \(e)"
        case .ownedByOther(let owner, let me):
            what = "is owned by user \(owner), neither root nor the user beacond runs as (\(me)): whoever owns a key can change it; chown root it"
        case .credentialReadable(let mode): what = "can be read by others (mode \(String(mode, radix: 8))): a credential must be private to the unit"
        case .readable(let mode): what = "can be read by its group or by others (mode \(String(mode, radix: 8))): a key must be private to its owner; chmod 600 it"
        case .cannotRead(let e): what = "cannot be read: \(e)"
        case .hexDigits(let n): what = "holds \(n) hex digits; \(kind) is 128 bits: 32 hex digits"
        case .rawBytes: what = "holds 16 raw bytes; write the key as 32 hex digits (as 'beacond gen-key' does)"
        case .notAKey(let n): what = "is not \(kind == "an Eddystone-EID identity key" ? "an identity key" : kind): expected 32 hex digits (as 'beacond gen-key' writes), found \(n) bytes of something else"
        }
        return what
    }
}


/// What `beacond gen-key FILE` says when it cannot write FILE: an existing file is never replaced (a beacon's EIDs
/// and every resolver's copy depend on its key).
public enum KeyFileWriting {
    public static func refusal(_ path: String, _ c: SystemCondition) -> String {
        c.kind == .exists
            ? "\(path) exists: gen-key never replaces a key (the beacon's EIDs and every resolver's copy depend on it); remove it first if you mean to"
            : "cannot write \(path): \(c)"
    }
}
