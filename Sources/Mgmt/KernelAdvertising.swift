// What the kernel does with beacond's instances through the management interface, where it decides itself: the
// interval of some instances and the turns several instances take on one advertiser. Stated once, as numbers: STATUS,
// the offline tools and backend auto's choice all ask this value. From Linux's net/bluetooth (hci_core.c,
// hci_request.c/hci_sync.c): le_adv_min/max_interval default to 0x0800 (Add Advertising uses them); a controller
// without advertising sets sends non-connectable advertising, while not discoverable, at DISCOV_LE_FAST_ADV_INT_MIN
// to _MAX (0x00A0–0x00F0); and def_multi_adv_rotation_duration (2 s) is each instance's turn. Pure.
import BluetoothHCI

/// An interval the kernel picks itself, whatever the instance asked for.
public enum KernelInterval: Sendable, Hashable {
    /// Add Advertising (kernels before 5.10, or a kernel that refuses the extended commands): the kernel's default.
    case addAdvertisingDefault
    /// A controller without advertising sets, non-connectable advertising: the kernel's fast range.
    case legacyNonConnectable

    /// The intervals the kernel sends at.
    public var range: ClosedRange<AdvertisingInterval> {
        switch self {
        case .addAdvertisingDefault: AdvertisingInterval(units: 0x0800)!...AdvertisingInterval(units: 0x0800)!
        case .legacyNonConnectable: AdvertisingInterval(units: 0x00A0)!...AdvertisingInterval(units: 0x00F0)!
        }
    }

    /// In words: "about 1.28 s", "100–150 ms".
    public var spoken: String {
        let (low, high) = (range.lowerBound, range.upperBound)
        return low == high ? "about \(Double(low.microseconds) / 1_000_000) s" : "\(low.microseconds / 1000)–\(high.description)"
    }

    /// About what it is on average, for how often a beacon is heard.
    public var typical: AdvertisingInterval {
        AdvertisingInterval(units: (range.lowerBound.units + range.upperBound.units) / 2)!
    }
}

/// What the kernel would do with beacond's instances on one controller.
public struct KernelAdvertising: Sendable, Hashable {
    /// How long the kernel keeps each instance on a controller's single advertiser before the next.
    public static let turn = Duration.seconds(2)

    public var commands: MgmtAdvertisingPlan.Commands
    /// The controller has advertising sets (the kernel offloads each instance to one).
    public var advertisingSets: Bool
    public var connectable: Bool

    public init(commands: MgmtAdvertisingPlan.Commands = .extended, advertisingSets: Bool, connectable: Bool) {
        (self.commands, self.advertisingSets, self.connectable) = (commands, advertisingSets, connectable)
    }

    /// The interval the kernel picks itself; nil when each instance gets its own.
    public var interval: KernelInterval? {
        commands == .legacy ? .addAdvertisingDefault : !advertisingSets && !connectable ? .legacyNonConnectable : nil
    }

    /// The instances take turns on the controller's one advertiser.
    public var rotates: Bool { !advertisingSets }

    /// Every instance's turn once, with `n` instances.
    public func cycle(_ n: Int) -> Duration { Self.turn * n }

    /// How often an instance asking for `asked` is on the air on average, with `n` instances: its interval (or the
    /// kernel's), n times as long while they take turns.
    public func every(_ asked: AdvertisingInterval, instances n: Int) -> Duration {
        .microseconds(Int64((interval?.typical ?? asked).microseconds)) * (rotates ? n : 1)
    }

    /// Whether `n` beacons go out as configured: each its own interval, none waiting for its turn.
    public func asConfigured(instances n: Int) -> Bool { interval == nil && !(rotates && n > 1) }
}
