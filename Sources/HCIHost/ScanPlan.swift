// `beacond scan`'s steps on a controller: passive scanning with the command family the probe chose, the event masks
// a reset controller needs, and one switch of family when the controller refuses the first commands (as the
// advertiser switches). Pure.
import BluetoothHCI

public struct ScanPlan: Sendable, Hashable {
    public private(set) var family: CommandFamily
    private var switched = false

    public init(family: CommandFamily) { self.family = family }

    /// After Reset the LE Meta event and the extended report are masked; a kernel device has them on already.
    public static func eventMasks(ownsController: Bool) -> [Step] {
        ownsController ? [Step(.setEventMask(0x2000_1FFF_FFFF_FFFF)), Step(.leSetEventMask(0x1F | 1 << 12))] : []
    }

    /// Scanning off (a stale scan tolerated), passive parameters (10 ms interval and window), scanning on.
    public var startSteps: [Step] {
        switch family {
        case .legacy:
            [Step(.leSetScanEnable(enable: false, filterDuplicates: false), tolerating: [.commandDisallowed]),
             Step(.leSetScanParameters(active: false, interval: 0x0010, window: 0x0010)),
             Step(.leSetScanEnable(enable: true, filterDuplicates: false))]
        case .extended:
            [Step(.leSetExtendedScanEnable(enable: false, filterDuplicates: false), tolerating: [.commandDisallowed]),
             Step(.leSetExtendedScanParameters(active: false, interval: 0x0010, window: 0x0010)),
             Step(.leSetExtendedScanEnable(enable: true, filterDuplicates: false))]
        }
    }

    public var stopSteps: [Step] {
        switch family {
        case .legacy: [Step(.leSetScanEnable(enable: false, filterDuplicates: false))]
        case .extended: [Step(.leSetExtendedScanEnable(enable: false, filterDuplicates: false))]
        }
    }

    /// The start failed: true when it is worth once more with the other family (the controller refused the first
    /// two commands as the other family's users are told to), false to give up.
    public mutating func startFailed(_ failure: StepFailure) -> Bool {
        guard !switched, family.switchReason(after: failure, leadingSteps: 2) != nil else { return false }
        switched = true
        family = family.other
        return true
    }
}
