// Which mgmt advertising instances beacond's beacons go on, what to remove, and the steps: the decisions of an
// apply through mgmt, as a value. Pure; MgmtBackend only carries the steps to the kernel.
import BluetoothHCI
import HCIHost

public struct MgmtInstancePlan: Sendable, Hashable {
    /// The instance of each wanted beacon, in the wanted order.
    public var slots: [UInt8]
    /// beacond's own instances that no beacon wants any more: removed by the first steps.
    public var removed: [UInt8]
    public var steps: [MgmtStep]
    /// The step index of each Add Extended Advertising Parameters, with its instance (its reply has the TX power).
    public var parameterSteps: [Int: UInt8]
    /// Numbers beacond would have taken that another program's instances hold: it took lower ones instead.
    public var skipped: [UInt8]
    /// The flags every instance is added with.
    public var flags: MgmtAdvertisingFlags
    /// A TX power was asked for and the kernel cannot set it.
    public var txPowerIgnored: Bool

    /// Not enough instances for the beacons.
    public struct Shortage: Error, Sendable, Hashable {
        public var wanted: Int
        public var maxInstances: Int
        /// Instances another program holds (they are never taken over).
        public var foreign: [UInt8]
    }

    /// - `current`: what each of beacond's instances carries now, nil when unknown (just opened, or another program
    ///   removed one): then every beacon is added in full.
    /// - `ours`: every instance beacond added and has not removed, on this connection or before (its state directory
    ///   remembers them across a crash). The ones no beacon wants are removed.
    /// - `foreign`: instances another program added (Read Advertising Features' list and Advertising Added events,
    ///   minus `ours`). Never used, never removed.
    public static func make(_ wanted: [AdvertisingRequest], current: [UInt8: AdvertisingRequest]?, maxInstances: UInt8,
                            ours: Set<UInt8>, foreign: Set<UInt8>, commands: MgmtAdvertisingPlan.Commands,
                            canSetTxPower: Bool) -> Result<MgmtInstancePlan, Shortage> {
        let count = wanted.count
        let foreign = foreign.subtracting(ours)
        // The highest numbers, from the top down: bluetoothd hands out the lowest free ones first, so the highest are
        // only wanted when nearly every instance is in use. beacond's own come first (a restart after a crash updates
        // them in place), then the highest that no other program holds.
        let top = stride(from: Int(maxInstances), through: 1, by: -1).map { UInt8($0) }
        let free = ours.filter { $0 >= 1 && $0 <= maxInstances }.sorted(by: >) + top.filter { !ours.contains($0) && !foreign.contains($0) }
        guard count >= 1, count <= free.count,
              let (slots, leftOver) = SlotAssignment.assign(wanted, current: current ?? [:], free: free)
        else {
            return .failure(Shortage(wanted: count, maxInstances: Int(maxInstances), foreign: foreign.sorted()))
        }
        // Every instance of beacond's that no beacon keeps goes, whether or not this connection knows what it
        // carries (after a crash, or a reload while the adapter was off, it does not).
        let removed = Set(leftOver).union(ours).subtracting(slots).sorted(by: >)
        let skipped = top.prefix(count).filter { foreign.contains($0) }
        var flags: MgmtAdvertisingFlags = wanted[0].type == .connectableUndirected ? [.connectable] : []
        flags.insert(.intervalsValid)
        var tx: Int8 = 0
        var txPowerIgnored = false
        if commands == .extended, let want = wanted[0].txPower {
            if canSetTxPower {
                flags.insert(.txPowerValid)
                tx = want
            } else {
                txPowerIgnored = true
            }
        }
        var steps: [MgmtStep] = removed.map { MgmtStep(.removeAdvertising(instance: $0), mayFail: true) }
        var parameterSteps: [Int: UInt8] = [:]
        for (r, instance) in zip(wanted, slots) {
            switch current?[instance] {
            case let now? where now == r: continue
            case let now? where !now.needsRestart(for: r) && commands == .extended:
                steps += MgmtAdvertisingPlan.updateData(instance: instance, data: r.data.bytes, scanResponse: r.scanResponse?.bytes ?? [])
            default:
                let i = MgmtAdvertisingPlan.Instance(number: instance, flags: flags, interval: r.interval, txPower: tx,
                                                     data: r.data.bytes, scanResponse: r.scanResponse?.bytes ?? [])
                parameterSteps[steps.count] = instance
                steps += MgmtAdvertisingPlan.add(i, using: commands)
            }
        }
        return .success(MgmtInstancePlan(slots: slots, removed: removed, steps: steps, parameterSteps: parameterSteps,
                                         skipped: skipped, flags: flags, txPowerIgnored: txPowerIgnored))
    }
}
