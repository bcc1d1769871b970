// The raw-HCI advertiser's time slices: several beacons taking turns on a legacy controller's one advertiser, each
// slot long enough for two events after the restart it costs (SliceTiming). Pure, as HCIAdvertiser.
import BluetoothHCI

extension HCIAdvertiser {
    /// While beacons take turns on the one legacy advertiser: how long each slot lasts (the slot timer's period).
    /// While a restart of the advertiser is out (a move to the public address or back, a reload), turns that ran keep
    /// their cadence, the beacon whose turn it was going on from its new address (a slot due meanwhile is owed, as any).
    /// Nil while nothing of beacond's is known to be on the air.
    public var slotDuration: Duration? {
        guard let slicing = slicer.slicing else { return nil }
        if case .legacyStart(_, let adjusted, _, _, _, _)? = pending {
            guard adjusted.count > 1 else { return nil }
            return timing?.slot ?? .microseconds(Int64(LegacySlicing(adjusted).slot.units) * 625)
        }
        guard legacyBase != nil else { return nil }
        return timing?.slot ?? .microseconds(Int64(slicing.slot.units) * 625)
    }

    /// The slot and in-slot interval for `live` (each beacon from its own address) on this controller, with the
    /// restart cost measured so far.
    func sliceTiming(_ live: [AdvertisingRequest]) -> SliceTiming {
        SliceTiming.make(configured: live.map(\.interval).min()!, floor: floor(for: LegacySlicing(live).base.type), switchCost: switchCost)
    }

    func floor(for type: LegacyAdvertisingType) -> AdvertisingInterval {
        SliceTiming.floor(for: type, core50: info.version.isAtLeastCore50, floorForced: intervalFloorForced)
    }

    /// The slot timer fired: the next beacon's steps (empty when nothing needs sending, or another sequence's commands
    /// are still out: then the slot is owed, `owedSlice`). Report them with `sliceFinished`.
    public mutating func nextSlice() -> [Step] {
        guard idle else {
            owed.insert(.slice)
            return []
        }
        owed.remove(.slice)
        guard legacyBase != nil else { return [] }
        var steps = slicer.next()
        if owed.remove(.refresh) != nil {
            if steps.first?.command != .leSetAdvertisingEnable(false) { steps = Self.restart(steps) }
        }
        if !steps.isEmpty { inFlight = .timed }
        return steps
    }

    /// After another sequence's commands came back: the slot that came due while they were out, if one did
    /// (`nextSlice`'s steps; report them with `sliceFinished`). So no beacon loses its turn to a slow controller, an
    /// apply or a move to the public address.
    public mutating func owedSlice() -> [Step] {
        guard owed.contains(.slice), idle else { return [] }
        return nextSlice()
    }

    /// How many restarts are timed before the cost is said.
    public static let restartSamples = LegacySlicer.restartSamples

    /// The result of `nextSlice`'s steps; false when the controller refused them (the caller says so, once).
    /// `took`: from the first command out to the last reply, for the cost of a slot that restarts the advertiser.
    public mutating func sliceFinished(_ ok: Bool, took: Duration? = nil) {
        if timedStepsInFlight { inFlight = nil }
        guard let (commands, median) = slicer.finished(ok, took: took) else { return }
        let before = timing
        switchCost = median
        if let t = before, let base = legacyBase {
            // The measured cost: the slots are as long as two events after it need (never shorter than configured).
            timing = SliceTiming.make(configured: t.configured, floor: floor(for: base.type), switchCost: median)
        }
        let slot = timing.map { " of every \(formatMicroseconds($0.slot)) slot, advertising every \($0.interval) within it" } ?? ""
        notes.append(.info("Time slices on \(device) restart the advertiser from each beacon's own address: \(commands) commands, at most \(formatMicroseconds(median)) off the air\(slot) (median of \(Self.restartSamples))"))
        if let t = timing, median > SliceTiming.costAllowance, t.slot > before?.slot ?? .zero {
            let n = slicer.slicing?.beacons.count ?? 1
            notes.append(.warning("The controller on \(device) takes \(formatMicroseconds(median)) to move its advertiser from one beacon's address to the next: the slots are lengthened to \(formatMicroseconds(t.slot)), so that each holds two advertising events; each beacon is on the air every \(formatMicroseconds(t.slot * n)), not every \(formatMicroseconds((before?.slot ?? .zero) * n))"))
        }
    }
}
