// What each format does with its address, one row per format: which address settings it takes (Configuration and
// the schema), the setting it goes out with (AddressPlan), whether a private address hides anything (check-config's
// warning), and whether it may ever go out from the controller's public address (the schedule). Written once here.

/// A format's address, as data.
public struct FormatAddressRule: Sendable, Hashable {
    public enum Address: Sendable, Hashable {
        /// Its own `address`, else [advertising]'s.
        case configured
        /// A new non-resolvable private address with every EID: `address` cannot be set, or it would link the EIDs.
        case newWithEachEID
        /// A fixed one: static by default, or a chosen random static address; never rotating or resolvable (Home
        /// Assistant keys a BTHome device on its address, and an encrypted frame's nonce holds it).
        case fixed
        /// Its Eddystone-UID beacon's (Eddystone receivers pair telemetry with the UID frame by address), unless it
        /// has an `address` of its own.
        case itsUIDs
    }

    public let address: Address
    /// The frame tells anyone who it is (a uuid, major and minor; a namespace and instance; a fixed BTHome device):
    /// a rotating or resolvable address gives it a new address, not a new identity.
    public let identityOnAir: Bool
    /// Its name for that identity, in a sentence.
    public let identityWords: String?

    /// Whether `address` may be set per beacon.
    public var takesAddressKey: Bool { address != .newWithEachEID }
    /// Whether `address = "resolvable"` (or `"rotating"`) is a setting it may take.
    public var takesPrivateAddress: Bool { address == .configured || address == .itsUIDs }
}

extension BeaconFormat {
    /// This format's row.
    public var addressRule: FormatAddressRule {
        switch self {
        case .ibeacon: FormatAddressRule(address: .configured, identityOnAir: true, identityWords: "its uuid, major and minor")
        case .altbeacon: FormatAddressRule(address: .configured, identityOnAir: true, identityWords: "its uuid, major and minor")
        case .eddystoneUID: FormatAddressRule(address: .configured, identityOnAir: true, identityWords: "its namespace and instance")
        case .eddystoneTLM: FormatAddressRule(address: .itsUIDs, identityOnAir: false, identityWords: nil)
        case .eddystoneEID: FormatAddressRule(address: .newWithEachEID, identityOnAir: false, identityWords: nil)
        case .bthome: FormatAddressRule(address: .fixed, identityOnAir: true, identityWords: "its fixed address")
        }
    }
}
