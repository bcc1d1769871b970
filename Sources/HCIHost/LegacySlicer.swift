// The one legacy advertiser and its time slices, as a value: what it carries now (data, scan response, address), the
// beacons taking turns and whose turn it is, the slot whose steps are out, and what restarting the advertiser per slot
// costs (timed on the first slots, said once). HCIAdvertiser owns one; LegacySlicing says each slot's steps.
import BluetoothHCI

public struct LegacySlicer: Sendable {
    /// Several beacons taking turns; nil with one beacon (or none on the air).
    public private(set) var slicing: LegacySlicing?
    /// Whose turn it is.
    public private(set) var index = 0
    /// What the advertiser carries now.
    public private(set) var data: AdvertisingData?
    public private(set) var response: AdvertisingData?
    public private(set) var address: OwnAddress?
    private var pending: (slot: Slot, commands: Int, restart: Bool)?
    /// The slot whose time it is, its steps failed (a refusal, an enable withheld): a restart puts its beacon on.
    private var missed: Slot?
    private var restartTimes: [Duration] = []
    private var costSaid = false
    /// How many restarts are timed before the cost is said (the median of these).
    public static let restartSamples = 9

    public init() {}

    /// What one slot puts on the advertiser.
    public struct Slot: Sendable {
        var index: Int
        var data: AdvertisingData
        var response: AdvertisingData?
        var address: OwnAddress
        init(_ s: LegacySlicing, _ i: Int) {
            (index, data, response, address) = (i, s.beacons[i].data, s.scanResponse(i), s.beacons[i].ownAddress)
        }
    }

    /// The advertiser was started with `s.base(at: turn)` on it: turns from that beacon on.
    public mutating func started(_ s: LegacySlicing, at turn: Int = 0) {
        let b = s.base(at: turn)
        (data, response, address, index, missed) = (b.data, b.scanResponse, b.ownAddress, turn, nil)
        take(s)
    }

    /// The beacon of `s` a restart of the advertiser puts on (a move to the public address or back, a reload): the one
    /// whose turn it is now, found by its data, so that the restart costs no beacon its turn. When it is not among them
    /// (paused while another program scans), the first after it in `order` (every beacon's data in config order) that
    /// is; else the same turn, or the first.
    public func turn(in s: LegacySlicing, order: [AdvertisingData] = []) -> Int {
        let (data, index) = missed.map { ($0.data, $0.index) } ?? (data, index)
        func position(_ d: AdvertisingData) -> Int? { s.beacons.firstIndex { $0.data == d } }
        if let data {
            if let i = position(data) { return i }
            if let w = order.firstIndex(of: data) {
                for d in order[(w + 1)...] + order[...w] { if let i = position(d) { return i } }
            }
        }
        return index < s.beacons.count ? index : 0
    }

    /// New beacons on a running advertiser whose parameters stay: the steps that put the current slot's beacon's new
    /// data on it (empty when nothing differs), and the slot to carry once they are answered.
    public mutating func update(to s: LegacySlicing) -> (steps: [Step], slot: Slot) {
        if index >= s.beacons.count { index = 0 }
        take(s)
        return (steps(s, index), Slot(s, index))
    }

    private mutating func take(_ s: LegacySlicing) { slicing = s.beacons.count > 1 ? s : nil }

    /// The advertiser is started again from scratch: no turns until it is.
    public mutating func stop() { slicing = nil }

    /// Nothing is known of the advertiser any more: the next apply starts it in full. The turns are kept for it
    /// (`turn(in:)`).
    public mutating func forget() { address = nil }

    /// The advertiser carries `slot` now.
    public mutating func carrying(_ slot: Slot) {
        index = slot.index
        (data, response, address, missed) = (slot.data, slot.response, slot.address, nil)
    }

    /// What slot `i` needs sent: its data and its scan response, each only when it differs from what is there, and a
    /// restart from its address when that differs.
    private func steps(_ s: LegacySlicing, _ i: Int) -> [Step] {
        s.steps(toSlot: i, from: address, data: data, response: response)
    }

    /// The slot timer fired: the next beacon's steps (empty when nothing needs sending). Report them with `finished`.
    public mutating func next() -> [Step] {
        guard let s = slicing else { return [] }
        let i = s.next(after: index)
        let out = steps(s, i)
        if out.isEmpty {
            (index, missed) = (i, nil)
            return []
        }
        pending = (Slot(s, i), out.count, s.beacons[i].ownAddress != address)
        return out
    }

    /// The result of `next`'s steps. `took`: from the first command out to the last reply. Returns, once, the cost
    /// of a slot that restarts the advertiser: its commands and the median time off the air of the first slots.
    public mutating func finished(_ ok: Bool, took: Duration?) -> (commands: Int, median: Duration)? {
        guard ok, let p = pending else {
            missed = pending?.slot
            pending = nil
            return nil
        }
        pending = nil
        carrying(p.slot)
        guard p.restart, !costSaid, let took else { return nil }
        restartTimes.append(took)
        guard restartTimes.count == Self.restartSamples else { return nil }
        costSaid = true
        return (p.commands, restartTimes.sorted()[Self.restartSamples / 2])
    }
}
