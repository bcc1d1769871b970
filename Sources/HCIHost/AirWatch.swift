// What actually reaches a kernel controller, against what the kernel's management interface claims. Through mgmt,
// beacond hands the kernel its instances and the kernel sends the HCI commands; "mgmt says advertising" is a claim:
// the kernel pauses advertising and may not resume it (bluetooth-next PR #792), and another program can switch it off
// behind the kernel's back (`hcitool cmd 0x08 0x000a 00`), which leaves the instances registered and off the air.
// The raw channel shows every command sent to the device, the kernel's own among them (as btmon sees them): this
// value follows the advertising enable commands among them and says when beacond's advertising has been off too long.
// Pure: commands and times in, a verdict out; MgmtBackend feeds it and puts the instances back.
import BluetoothHCI

public struct AirWatch: Sendable {
    /// How long beacond's advertising may be off before it is put back: far longer than the kernel's own pauses
    /// (a rotation, an address change, a data update: milliseconds), far shorter than a phone's region exit (30 s).
    public static let grace = Duration.seconds(3)
    /// The longest wait between two put-backs that brought nothing back (the kernel holding advertising paused, for
    /// example while it scans with privacy): the wait doubles from `grace` up to this.
    public static let longestWait = Duration.seconds(60)

    /// The controller has advertising sets (the kernel uses one per instance, its handle the instance number) or
    /// one legacy advertiser (which the kernel's instances take turns on).
    public let sets: Bool
    /// beacond's instances: on a controller with sets, the handles to follow.
    public private(set) var ours: Set<UInt8>
    /// Since when beacond's advertising has been off (by the last enable command seen), nil while on.
    public private(set) var offSince: Duration?
    /// Extended: which of beacond's sets were last disabled.
    private var setsOff: Set<UInt8> = []
    /// Put-backs in a row that brought no enable.
    private var fruitless = 0
    /// When the last put-back went out.
    private var lastPutBack: Duration?

    public init(sets: Bool, ours: Set<UInt8>) {
        (self.sets, self.ours) = (sets, ours)
    }

    /// A command sent to the controller (by anyone: the kernel, bluetoothd through it, another program), at `now`.
    public mutating func command(_ opcode: Opcode, _ p: [UInt8], at now: Duration) {
        switch opcode {
        case .leSetAdvertisingEnable where !sets:
            guard let enable = p.first else { return }
            enable == 0 ? off(at: now) : on()
        case .leSetExtendedAdvertisingEnable where sets:
            guard p.count >= 2 else { return }
            let n = Int(p[1])
            var handles = Set<UInt8>()
            for k in 0..<n {
                let at = 2 + k * 4
                if at < p.count { handles.insert(p[at]) }
            }
            if p[0] == 0 {
                // Count 0 disables every set.
                setsOff.formUnion(n == 0 ? ours : handles.intersection(ours))
            } else {
                setsOff.subtract(handles)
            }
            setsOff.isEmpty ? on() : off(at: now)
        case .reset:
            // Everything is off until the kernel sets the controller up again and enables what it has.
            setsOff = ours
            off(at: now)
        default:
            break
        }
    }

    private mutating func off(at now: Duration) {
        if offSince == nil { offSince = now }
    }

    private mutating func on() {
        setsOff = []
        offSince = nil
        fruitless = 0
    }

    /// How long to wait, from `offSince` or the last put-back, before the next: `grace`, doubled for each put-back in
    /// a row that brought nothing back.
    public var wait: Duration {
        var d = Self.grace
        for _ in 0..<min(fruitless, 8) where d < Self.longestWait { d = min(d * 2, Self.longestWait) }
        return d
    }

    /// When the watch should be asked again (`due`), nil while the advertising is on.
    public var nextCheck: Duration? {
        guard let offSince else { return nil }
        return max(offSince, lastPutBack ?? offSince) + wait
    }

    /// True when beacond's advertising has been off for `wait` at `now`: the caller puts the instances back, and
    /// the watch counts it (the next wait doubles until an enable is seen).
    public mutating func due(at now: Duration) -> Bool {
        guard let next = nextCheck, now >= next else { return false }
        fruitless += 1
        lastPutBack = now
        return true
    }

    /// beacond's instances are now these (an apply, a reload): sets no longer beacond's are no longer followed. What
    /// was seen stays: a put-back the kernel does not enable leaves the advertising off, and the watch waits on.
    public mutating func applied(ours: Set<UInt8>) {
        self.ours = ours
        guard sets else { return }
        setsOff.formIntersection(ours)
        if setsOff.isEmpty { offSince = nil }
    }
}
