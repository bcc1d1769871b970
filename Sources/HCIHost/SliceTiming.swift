// How long each beacon holds a legacy controller's one advertiser when every slot restarts it (the beacons go out from
// different addresses), and the advertising interval within a slot. The Core spec does not promise an immediate first
// event after LE Set Advertising Enable: RootCanal starts it one interval later, and a real controller may too, so a
// slot only as long as the interval holds no event (issue #54). The advertiser therefore advertises faster within a
// slot (never below the floor the controller allows for the PDU), and each slot is long enough to hold two of those
// intervals, each with its advDelay, after the restart's commands; when the measured restart cost makes the configured
// slot too short, the slot is lengthened (and said). Pure: HCIAdvertiser asks at each start and once the cost is known.
import BluetoothHCI

public struct SliceTiming: Sendable, Hashable {
    /// How long each beacon holds the advertiser: the slot timer's period.
    public let slot: Duration
    /// The advertising interval within a slot.
    public let interval: AdvertisingInterval
    /// The configured slot (the beacons' shortest interval) was too short for two events after the restart.
    public let lengthened: Bool
    /// The slot the config asks for.
    public let configured: AdvertisingInterval

    /// Each advertising event may come up to 10 ms late (advDelay, Core Vol 6 Part B §4.4.2.2.1).
    public static let advDelay = Duration.milliseconds(10)
    /// What a restart may cost inside the configured slot before it is lengthened: the in-slot interval leaves this
    /// much room (a USB or UART controller answers a restart's four or five commands in a few milliseconds).
    public static let costAllowance = Duration.milliseconds(10)

    public init(slot: Duration, interval: AdvertisingInterval, lengthened: Bool, configured: AdvertisingInterval) {
        (self.slot, self.interval, self.lengthened, self.configured) = (slot, interval, lengthened, configured)
    }

    /// `configured`: the slot the config asks for (the beacons' shortest interval); `floor`: the shortest interval the
    /// controller allows for the PDU (20 ms from Core 5.0, 100 ms before for scannable and non-connectable PDUs);
    /// `switchCost`: a restart's measured time off the air (nil before it is measured: the allowance). The interval
    /// is the longest that puts two events after the restart into the slot (fewer packets beside the Pi's Wi-Fi than
    /// the shortest would), between the floor and the configured interval.
    public static func make(configured: AdvertisingInterval, floor: AdvertisingInterval, switchCost: Duration?) -> SliceTiming {
        let c = Duration.microseconds(Int64(configured.microseconds))
        let fit = (c - costAllowance) / 2 - advDelay
        let fitUnits = max(0, fit.components.seconds * 1_600 + fit.components.attoseconds / 625_000_000_000_000)
        let units = min(configured.units, max(floor.units, UInt16(clamping: fitUnits)))
        let interval = AdvertisingInterval(units: units) ?? floor
        let needed = (Duration.microseconds(Int64(interval.microseconds)) + advDelay) * 2 + (switchCost ?? costAllowance)
        return SliceTiming(slot: max(c, needed), interval: interval, lengthened: needed > c, configured: configured)
    }

    /// The advertising events a slot holds after a restart costing `switchCost` (nil: the allowance), each interval
    /// taken with half the advDelay it may add on average: at least one. Eddystone-TLM counts them.
    public func events(switchCost: Duration?) -> Int {
        max(1, Int((slot - (switchCost ?? Self.costAllowance)) / (.microseconds(Int64(interval.microseconds)) + Self.advDelay / 2)))
    }

    /// The shortest interval a controller allows for `type`: 20 ms for connectable advertising, and from Core 5.0
    /// for all; 100 ms before 5.0 for scannable and non-connectable PDUs, or where a refusal taught the floor.
    public static func floor(for type: LegacyAdvertisingType, core50: Bool, floorForced: Bool) -> AdvertisingInterval {
        type == .connectableUndirected || (core50 && !floorForced) ? AdvertisingInterval(units: AdvertisingInterval.minimumUnits)! : .pre50NonConnectableFloor
    }
}
