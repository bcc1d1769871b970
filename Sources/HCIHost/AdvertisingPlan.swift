// What to send to advertise a beacon: controller capabilities, the choice of command family, and the command
// sequences for start, data update and stop. Pure: the daemon runs these steps and decides policy.
import BluetoothHCI

/// Legacy (LE Set Advertising …) or extended (LE Set Extended Advertising …) commands. A controller refuses the
/// other family with Command Disallowed once one has been used since power-on or reset.
public enum CommandFamily: String, Sendable, Hashable, CustomStringConvertible {
    case legacy
    case extended
    public var other: CommandFamily { self == .legacy ? .extended : .legacy }
    public var description: String { rawValue }
}

/// What the probe learned about the controller.
public struct ControllerInfo: Sendable, Hashable {
    public var version: LocalVersionInformation
    public var commands: SupportedCommands
    public var features: LEFeatures

    public init(version: LocalVersionInformation, commands: SupportedCommands, features: LEFeatures) {
        self.version = version
        self.commands = commands
        self.features = features
    }

    /// The commands that ask for this information, in the order they are sent.
    public static let probe: [HCICommand] = [
        .readLocalVersionInformation, .readLocalSupportedCommands, .leReadLocalSupportedFeatures,
    ]

    /// Decodes the return parameters of the three probe commands.
    public init(probeReplies r: [[UInt8]]) throws(ByteReader.Truncated) {
        guard r.count == 3 else { throw ByteReader.Truncated() }
        self.init(version: try LocalVersionInformation(returnParameters: r[0]),
                  commands: try SupportedCommands(returnParameters: r[1]),
                  features: try LEFeatures(returnParameters: r[2]))
    }

    /// Extended where the LE feature bit says so (the rule the Linux kernel itself uses to pick its family, so a
    /// raw client next to the kernel lands on the same side of the mixing rule), legacy otherwise.
    public var preferredFamily: CommandFamily { features.extendedAdvertising ? .extended : .legacy }

    /// True when the Supported Commands bitmap disagrees with the feature bit (worth a log line, not a decision).
    public var bitmapDisagrees: Bool { features.extendedAdvertising != commands.hasExtendedAdvertising }
}

/// One command and the statuses that count as "fine" for it besides Success.
public struct Step: Sendable, Hashable {
    public var command: HCICommand
    public var tolerated: Set<HCIStatus>
    public init(_ command: HCICommand, tolerating tolerated: Set<HCIStatus> = []) {
        self.command = command
        self.tolerated = tolerated
    }
}

/// What to advertise and how: one advertisement (one beacon).
public struct AdvertisingRequest: Sendable, Hashable {
    public var data: AdvertisingData
    public var type: LegacyAdvertisingType
    public var interval: AdvertisingInterval
    /// dBm wanted; nil = controller's choice.
    public var txPower: Int8?
    public var ownAddress: OwnAddress
    /// What a scanner gets when it asks (the beacon's local name); nil: not scannable, nothing to ask for.
    public var scanResponse: AdvertisingData?
    /// It never goes out from the controller's public address (a private address, or a frame whose nonce holds its
    /// own): while the controller refuses beacond's random address it pauses (AddressPlan.neverPublic).
    public var neverPublic: Bool

    public init(data: AdvertisingData, type: LegacyAdvertisingType, interval: AdvertisingInterval, txPower: Int8?,
                ownAddress: OwnAddress = .public, scanResponse: AdvertisingData? = nil, neverPublic: Bool = false) {
        self.neverPublic = neverPublic
        self.data = data
        self.interval = interval
        self.txPower = txPower
        self.ownAddress = ownAddress
        self.scanResponse = scanResponse
        // A scan response makes the advertising scannable (connectable advertising is scannable already).
        self.type = scanResponse != nil && type == .nonConnectableUndirected ? .scannableUndirected : type
    }

    /// True when going from `self` to `other` needs new parameters (disable, reconfigure, enable),
    /// false when only the data differs (updated while advertising stays on).
    public func needsRestart(for other: AdvertisingRequest) -> Bool {
        type != other.type || interval != other.interval || txPower != other.txPower || ownAddress != other.ownAddress
            || scanResponse != other.scanResponse
    }
}

/// Several beacons on extended advertising sets: which set each beacon gets, and the steps from what the sets carry
/// now. A beacon that did not change keeps its set and is not touched; one whose data alone changed gets its data
/// updated while it stays on the air; a set nobody wants any more is disabled and removed.
public struct SetPlan: Sendable, Hashable {
    /// The set of each wanted beacon, in the wanted order.
    public var handles: [UInt8]
    public var steps: [Step]
    /// Sets taken off the air and removed.
    public var removed: [UInt8]

    /// Nil when `wanted` needs more sets than `capacity`. `current`: what each set carries now, nil when unknown
    /// (just opened, or someone else changed the controller): then every wanted set is started in full, and the
    /// `stale` sets (used earlier on this connection) beyond them are removed.
    public static func make(_ wanted: [AdvertisingRequest], current: [UInt8: AdvertisingRequest]?, capacity: Int,
                            stale: Set<UInt8> = [], afterReset: Bool = false) -> SetPlan? {
        // Advertising handles are 0x00…0xEF.
        let capacity = min(capacity, 0xF0)
        guard wanted.count <= capacity else { return nil }
        guard let current else {
            let handles = wanted.indices.map { UInt8($0) }
            var steps: [Step] = []
            for (r, h) in zip(wanted, handles) { steps += AdvertisingPlan.start(r, family: .extended, handle: h, afterReset: afterReset) }
            let removed = stale.filter { Int($0) >= wanted.count }.sorted()
            for h in removed { steps += AdvertisingPlan.stop(family: .extended, handle: h) }
            return SetPlan(handles: handles, steps: steps, removed: removed)
        }
        guard let (handles, removed) = SlotAssignment.assign(wanted, current: current, free: (0..<UInt8(capacity)).map { $0 }) else { return nil }
        var steps: [Step] = []
        for h in removed { steps += AdvertisingPlan.stop(family: .extended, handle: h) }
        for (i, r) in wanted.enumerated() {
            let h = handles[i]
            switch current[h] {
            case let now? where now == r: break
            case let now? where !now.needsRestart(for: r): steps += AdvertisingPlan.updateData(r.data, family: .extended, handle: h)
            default: steps += AdvertisingPlan.start(r, family: .extended, handle: h)
            }
        }
        return SetPlan(handles: handles, steps: steps, removed: removed)
    }
}

/// Which slot (advertising set, mgmt instance) each wanted advertisement goes to, given what the slots carry now:
/// the one rule both backends follow so that a reload touches only what changed.
public enum SlotAssignment {
    /// - An advertisement already on a slot keeps it.
    /// - A changed one takes over a slot whose advertisement left: one with the same parameters first (then only
    ///   its data changes), else any.
    /// - A new one takes the first of `free` (in its order) that carries nothing.
    /// Returns the slot of each wanted advertisement and the slots left over (to be removed), or nil when there are
    /// not enough slots.
    public static func assign<Slot: Hashable & Comparable>(_ wanted: [AdvertisingRequest], current: [Slot: AdvertisingRequest],
                                                           free: [Slot]) -> (slots: [Slot], removed: [Slot])? {
        var slots = [Slot?](repeating: nil, count: wanted.count)
        var taken = Set<Slot>()
        let occupied = current.keys.sorted()
        for (i, r) in wanted.enumerated() {
            if let h = occupied.first(where: { !taken.contains($0) && current[$0] == r }) {
                slots[i] = h
                taken.insert(h)
            }
        }
        for (i, r) in wanted.enumerated() where slots[i] == nil {
            let left = occupied.filter { !taken.contains($0) }
            let h = left.first { current[$0].map { !$0.needsRestart(for: r) } == true } ?? left.first
                ?? free.first { !taken.contains($0) && current[$0] == nil }
            guard let h else { return nil }
            slots[i] = h
            taken.insert(h)
        }
        return (slots.map { $0! }, occupied.filter { !taken.contains($0) })
    }
}

/// Several beacons on one legacy advertiser: beacond changes the data every `slot` (the shortest interval any of them
/// asks for), so each beacon is on the air once every `beacons × slot`.
public struct LegacySlicing: Sendable, Hashable {
    public var beacons: [AdvertisingRequest]
    public init(_ beacons: [AdvertisingRequest]) { self.beacons = beacons }

    /// The one advertiser's parameters: the first beacon's, at the shortest interval.
    public var base: AdvertisingRequest { base(at: 0) }

    /// The advertiser started with beacon `index` on it: that beacon's data and address, at the shortest interval.
    public func base(at index: Int) -> AdvertisingRequest {
        var b = beacons[index]
        b.interval = beacons.map(\.interval).min()!
        // One of them has a name: the advertiser is scannable, and the others answer with an empty scan response.
        if beacons.contains(where: { $0.scanResponse != nil }) {
            if b.type == .nonConnectableUndirected { b.type = .scannableUndirected }
            if b.scanResponse == nil { b.scanResponse = LegacySlicing.noScanResponse }
        }
        return b
    }

    /// The scan response of slot `index` (empty for a beacon without a name when another has one).
    public func scanResponse(_ index: Int) -> AdvertisingData? {
        beacons[index].scanResponse ?? (beacons.contains { $0.scanResponse != nil } ? LegacySlicing.noScanResponse : nil)
    }

    static let noScanResponse = try! AdvertisingData(raw: [])

    /// The beacons go out from different addresses: every slot restarts the one advertiser, since LE Set Random
    /// Address is refused while legacy advertising is enabled (Core Vol 4 Part E §7.8.4).
    public var restartsPerSlot: Bool { Set(beacons.map(\.ownAddress)).count > 1 }

    /// The steps that move the advertiser to slot `index` from what it carries now (`address`, `data`, `response`):
    /// the data and scan response in place when the address stays; otherwise disable, the parameters when the
    /// address type changes, the random address, what differs, and enable.
    public func steps(toSlot index: Int, from address: OwnAddress?, data: AdvertisingData?, response: AdvertisingData?) -> [Step] {
        let b = beacons[index]
        var changes: [Step] = []
        if b.data != data { changes.append(Step(.leSetAdvertisingData(b.data))) }
        if let r = scanResponse(index), r != response { changes.append(Step(.leSetScanResponseData(r))) }
        guard address != b.ownAddress else { return changes }
        var steps = [Step(.leSetAdvertisingEnable(false), tolerating: [.commandDisallowed])]
        if address?.type != b.ownAddress.type {
            steps.append(Step(.leSetAdvertisingParameters(LEAdvertisingParameters(interval: base.interval, type: base.type,
                                                                                  ownAddressType: b.ownAddress.type))))
        }
        if case .random(let bytes) = b.ownAddress { steps.append(Step(.leSetRandomAddress(bytes))) }
        return steps + changes + [Step(.leSetAdvertisingEnable(true))]
    }

    /// How long each beacon holds the air.
    public var slot: AdvertisingInterval { base.interval }

    /// How often each beacon is on the air, for `slot` (after any adjustment for the controller).
    public func effectiveInterval(slot: AdvertisingInterval) -> Duration {
        .microseconds(Int64(slot.units) * 625 * Int64(beacons.count))
    }

    /// The beacon after `index`.
    public func next(after index: Int) -> Int { (index + 1) % beacons.count }
}

public enum AdvertisingPlan {
    /// The interval to use on this controller. Before Core 5.0, non-connectable advertising may not go below 100 ms:
    /// raise it (the caller warns) instead of letting the controller refuse.
    public static func effectiveInterval(_ request: AdvertisingRequest, on info: ControllerInfo) -> (interval: AdvertisingInterval, raised: Bool) {
        if !info.version.isAtLeastCore50 && request.type != .connectableUndirected
            && request.interval < .pre50NonConnectableFloor
        {
            return (.pre50NonConnectableFloor, true)
        }
        return (request.interval, false)
    }

    /// The steps that put `request` on the air from any prior state: disable first, then configure. After that
    /// disable, the parameters command can only be refused with Command Disallowed because the other command
    /// family is in use (the mixing rule) — so that is where a caller tells "wrong family" from "already on".
    /// `familyProbeSteps` says how many leading steps may show a wrong family.
    /// `afterReset`: the controller was just reset, so nothing is advertising and the disable is left out.
    public static func start(_ request: AdvertisingRequest, family: CommandFamily, handle: UInt8, afterReset: Bool = false) -> [Step] {
        let steps = fullStart(request, family: family, handle: handle)
        return afterReset ? Array(steps.dropFirst()) : steps
    }

    private static func fullStart(_ request: AdvertisingRequest, family: CommandFamily, handle: UInt8) -> [Step] {
        switch family {
        case .legacy:
            return [
                // Controllers that follow the pre-5.0 text (and BlueZ's emulator) answer a disable of disabled
                // advertising with Command Disallowed: harmless here.
                Step(.leSetAdvertisingEnable(false), tolerating: [.commandDisallowed]),
                Step(.leSetAdvertisingParameters(LEAdvertisingParameters(interval: request.interval, type: request.type,
                                                                         ownAddressType: request.ownAddress.type))),
            ] + randomAddress(request.ownAddress, family: .legacy, handle: handle) + [
                Step(.leReadAdvertisingPhysicalChannelTxPower),
                Step(.leSetAdvertisingData(request.data)),
            ] + (request.scanResponse.map { [Step(.leSetScanResponseData($0))] } ?? []) + [
                Step(.leSetAdvertisingEnable(true)),
            ]
        case .extended:
            return [
                // Unknown Advertising Identifier just means the set does not exist yet.
                Step(.leSetExtendedAdvertisingEnable(enable: false, sets: [AdvertisingSetEnable(handle: handle)]),
                     tolerating: [.unknownAdvertisingIdentifier]),
                Step(.leSetExtendedAdvertisingParameters(
                    LEExtendedAdvertisingParameters(handle: handle, legacyType: request.type, interval: request.interval,
                                                    txPower: request.txPower, ownAddressType: request.ownAddress.type))),
            ] + randomAddress(request.ownAddress, family: .extended, handle: handle) + [
                Step(.leSetExtendedAdvertisingData(handle: handle, data: request.data)),
            ] + (request.scanResponse.map { [Step(.leSetExtendedScanResponseData(handle: handle, data: $0))] } ?? []) + [
                Step(.leSetExtendedAdvertisingEnable(enable: true, sets: [AdvertisingSetEnable(handle: handle)])),
            ]
        }
    }

    /// The random address goes in after the parameters (so steps 0 and 1 stay the disable and the parameters, where
    /// the command family shows) and before the enable.
    private static func randomAddress(_ a: OwnAddress, family: CommandFamily, handle: UInt8) -> [Step] {
        guard case .random(let address) = a else { return [] }
        switch family {
        case .legacy: return [Step(.leSetRandomAddress(address))]
        case .extended: return [Step(.leSetAdvertisingSetRandomAddress(handle: handle, address: address))]
        }
    }

    /// Steps 0 and 1 of a start sequence (the disable and the parameters) are where the other family shows up.
    public static let familyProbeSteps = 2

    /// New data while advertising stays enabled (allowed for legacy data and for a complete extended data operation).
    public static func updateData(_ data: AdvertisingData, family: CommandFamily, handle: UInt8) -> [Step] {
        switch family {
        case .legacy: [Step(.leSetAdvertisingData(data))]
        case .extended: [Step(.leSetExtendedAdvertisingData(handle: handle, data: data))]
        }
    }

    /// Advertising off and, for extended, the set removed.
    public static func stop(family: CommandFamily, handle: UInt8) -> [Step] {
        switch family {
        case .legacy: [Step(.leSetAdvertisingEnable(false))]
        case .extended: [
            Step(.leSetExtendedAdvertisingEnable(enable: false, sets: [AdvertisingSetEnable(handle: handle)]),
                 tolerating: [.unknownAdvertisingIdentifier]),
            Step(.leRemoveAdvertisingSet(handle: handle), tolerating: [.unknownAdvertisingIdentifier]),
        ]
        }
    }

    /// Every extended set off and removed, in two commands whatever their number: a disable with no set list (Core
    /// Vol 4 Part E §7.8.56: Number_of_Sets 0 disables all sets) and LE Clear Advertising Sets (§7.8.61). Only for a
    /// controller beacond owns: on a kernel device other programs' sets would go too.
    public static func stopAll() -> [Step] {
        [Step(.leSetExtendedAdvertisingEnable(enable: false, sets: [])), Step(.leClearAdvertisingSets)]
    }

    /// The TX power the controller reported in a step's return parameters, if that step reports one.
    public static func reportedTxPower(for command: HCICommand, returnParameters r: [UInt8]) -> Int8? {
        switch command {
        case .leReadAdvertisingPhysicalChannelTxPower, .leSetExtendedAdvertisingParameters:
            r.count >= 2 ? Int8(bitPattern: r[1]) : nil
        default: nil
        }
    }
}
