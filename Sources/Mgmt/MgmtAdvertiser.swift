// Every decision of advertising through the kernel's management interface on one open adapter, as a value: which
// instances are beacond's (its own, remembered across a crash, and never another program's), what each carries,
// the fall back from the extended commands to Add Advertising, and what an instance removed by someone else means.
// Requests in, steps out; replies and events in, outcomes out. Pure: MgmtBackend carries the steps to the kernel.
import BluetoothHCI
import HCIHost

public struct MgmtAdvertiser: Sendable {
    public let device: String
    public let features: MgmtAdvertisingFeatures
    /// Extended until the kernel shows it cannot (older than 5.10, or a kernel that refuses the extended data).
    public private(set) var commands = MgmtAdvertisingPlan.Commands.extended
    /// Every instance beacond added and has not seen removed (this run's, an earlier backend's, a killed run's):
    /// the caller keeps it in the state directory.
    public private(set) var ours: Set<UInt8>
    /// Other programs' instances: never taken over, never removed (Read Advertising Features' list, and Advertising
    /// Added events; the list of some kernels, 6.1 among them, leaves out instances numbered above the count).
    public private(set) var foreign: Set<UInt8>
    /// The beacons last confirmed on the air, and the instance of each.
    public private(set) var applied: [AdvertisingRequest]?
    public private(set) var beaconInstances: [UInt8] = []
    /// What each of beacond's instances carries now (as sent), nil when unknown.
    private var instances: [UInt8: AdvertisingRequest]?
    /// The TX power the kernel selected for each instance (Add Extended Advertising Parameters' reply).
    public private(set) var txPowers: [UInt8: Int8] = [:]
    /// The flags of the last plan (connectable, TX power valid, …).
    public private(set) var flags: MgmtAdvertisingFlags = []
    /// The instances last reported as taken beside another program's (said again only when they change).
    private var slotsNoted: [UInt8] = []
    private var pending: (plan: MgmtInstancePlan, wanted: [AdvertisingRequest], current: [UInt8: AdvertisingRequest]?)?

    public init(device: String, features: MgmtAdvertisingFeatures, ours: Set<UInt8>) {
        self.device = device
        self.features = features
        self.ours = ours
        foreign = Set(features.instances).subtracting(ours)
    }

    public enum Outcome: Sendable, Equatable {
        case send([MgmtStep])
        case done
        /// Not enough instances: the sentence to say.
        case shortage(String)
        /// A step failed: what beacond tried, and the command and status.
        case failed(what: String, MgmtOpcode, MgmtStatus?)
    }

    public enum Note: Sendable, Hashable {
        case warning(String, MgmtOpcode?)
        case notice(String)
    }

    private var notes: [Note] = []

    public mutating func takeNotes() -> [Note] {
        defer { notes = [] }
        return notes
    }

    /// Puts `wanted` on the air: with `dataOnlyAllowed` beacons already there as wanted are not touched.
    public mutating func apply(_ wanted: [AdvertisingRequest], dataOnlyAllowed: Bool) -> Outcome {
        let current = dataOnlyAllowed ? instances : nil
        let plan: MgmtInstancePlan
        switch MgmtInstancePlan.make(wanted, current: current, maxInstances: features.maxInstances, ours: ours, foreign: foreign,
                                     commands: commands, canSetTxPower: features.supportedFlags.contains(.canSetTxPower)) {
        case .success(let p): plan = p
        case .failure(let s):
            let n = s.wanted
            let theirs = s.foreign.isEmpty ? ""
                : ", and another program holds \(s.foreign.count == 1 ? "instance" : "instances") \(s.foreign.map(String.init).joined(separator: ", "))"
            return .shortage(s.maxInstances == 0 ? "\(device) has no advertising instances"
                : "The config has \(n) beacon\(n == 1 ? "" : "s"), but the kernel has \(s.maxInstances) advertising instance\(s.maxInstances == 1 ? "" : "s") for \(device) (Read Advertising Features)\(theirs); remove beacons")
        }
        if plan.txPowerIgnored, current == nil, let want = wanted[0].txPower {
            notes.append(.warning("tx_power = \(want) is ignored: the kernel cannot set the TX power on \(device)", nil))
        }
        if !plan.skipped.isEmpty, plan.slots != slotsNoted {
            slotsNoted = plan.slots
            let k = plan.skipped.count
            notes.append(.notice("Advertising instance\(k == 1 ? "" : "s") \(plan.skipped.map(String.init).joined(separator: ", ")) on \(device) \(k == 1 ? "belongs" : "belong") to another program: beacond uses \(plan.slots.map(String.init).joined(separator: ", ")) and leaves \(k == 1 ? "it" : "them") alone"))
        }
        if current == nil {
            applied = nil
            instances = nil
        }
        // Recorded before the first command: a run killed halfway still names every instance it may have added.
        ours.formUnion(plan.slots)
        flags = plan.flags
        pending = (plan, wanted, current)
        return .send(plan.steps)
    }

    /// The result of the steps `apply` asked for.
    public mutating func finished(_ result: Result<[[UInt8]], MgmtStepFailure>) -> Outcome {
        guard let (plan, wanted, current) = pending else { return .done }
        pending = nil
        switch result {
        case .success(let replies):
            var now = current ?? [:]
            for h in plan.removed { now[h] = nil; txPowers[h] = nil }
            ours.subtract(plan.removed)
            for (r, h) in zip(wanted, plan.slots) { now[h] = r }
            instances = now
            applied = wanted
            beaconInstances = plan.slots
            for (i, instance) in plan.parameterSteps where commands == .extended && i < replies.count {
                let ret = replies[i]
                if ret.count >= 2 { txPowers[instance] = Int8(bitPattern: ret[1]) }
            }
            return .done
        case .failure(let f):
            applied = nil
            instances = nil
            if commands == .extended, let why = MgmtAdvertisingPlan.fallbackReason(after: f) {
                commands = .legacy
                notes.append(.warning("\(why): advertising through Add Advertising, at the kernel's default interval of \(KernelInterval.addAdvertisingDefault.spoken) instead of \(wanted[0].interval); use backend = \"hci\" when the interval matters",
                                      f.step.command.opcode))
                return apply(wanted, dataOnlyAllowed: false)
            }
            let instance: UInt8
            switch f.step.command {
            case .addExtendedAdvertisingParameters(let i, _, _, _, _, _, _), .addExtendedAdvertisingData(let i, _, _), .addAdvertising(let i, _, _, _, _, _),
                 .removeAdvertising(let i):
                instance = i
            default: instance = plan.slots[0]
            }
            let what = current != nil ? "update the advertising data of instance \(instance) on \(device)"
                : f.step.command.opcode == .addExtendedAdvertisingParameters
                ? "set the advertising parameters of instance \(instance) on \(device)"
                : commands == .extended ? "set the advertising data of instance \(instance) on \(device)"
                                        : "add advertising instance \(instance) on \(device)"
            return .failed(what: what, f.step.command.opcode, f.failure.status)
        }
    }

    /// What an event about this adapter's instances means: nil, or why beacond must apply again.
    public mutating func event(_ kind: MgmtEvent.Kind) -> String? {
        switch kind {
        case .advertisingAdded(let instance):
            // Another program's (the kernel does not tell the socket that added an instance).
            if !ours.contains(instance) { foreign.insert(instance) }
            return nil
        case .advertisingRemoved(let removed):
            foreign.remove(removed)
            ours.remove(removed)
            guard beaconInstances.contains(removed), applied != nil else { return nil }
            // bluetoothd removes every instance when it starts; so may btmgmt or a power-off of timed instances.
            applied = nil
            instances = nil
            return "Advertising instance \(removed) on \(device) was removed by another program (bluetoothd removes every instance when it starts)"
        default:
            return nil
        }
    }

    /// What reaches the controller shows beacond's advertising off although the kernel holds its instances
    /// (AirWatch): nothing is taken as on the air, and the next apply adds every instance again.
    public mutating func airLost() {
        applied = nil
        instances = nil
    }

    /// What a stop removes: every instance of beacond's, on the air or not (the kernel keeps an instance through a
    /// power cycle and would put it back while beacond is stopped). Report with `removed(_:)`.
    public mutating func stopping() -> [UInt8] {
        applied = nil
        instances = nil
        return ours.sorted(by: >)
    }

    /// These instances are gone from the kernel.
    public mutating func removed(_ gone: Set<UInt8>) {
        ours.subtract(gone)
    }
}
