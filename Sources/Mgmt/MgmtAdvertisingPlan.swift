// What to send through mgmt to put an advertising instance on the air, and when to fall back from the extended
// commands (Add Extended Advertising Parameters/Data, kernel 5.10+) to the older Add Advertising. Pure.
import BluetoothHCI

public enum MgmtAdvertisingPlan {
    /// The two ways of adding an instance.
    public enum Commands: Sendable, Hashable {
        /// Add Extended Advertising Parameters + Data: the interval and TX power can be set.
        case extended
        /// Add Advertising: the kernel's default interval (KernelInterval.addAdvertisingDefault), no TX power.
        case legacy
    }

    /// An instance as beacond wants it.
    public struct Instance: Sendable, Hashable {
        public var number: UInt8
        public var flags: MgmtAdvertisingFlags
        public var interval: AdvertisingInterval
        public var txPower: Int8
        public var data: [UInt8]
        /// The local name's scan response (empty: none; the kernel makes an instance with one scannable).
        public var scanResponse: [UInt8]
        public init(number: UInt8, flags: MgmtAdvertisingFlags, interval: AdvertisingInterval, txPower: Int8, data: [UInt8], scanResponse: [UInt8] = []) {
            self.number = number
            self.flags = flags
            self.interval = interval
            self.txPower = txPower
            self.data = data
            self.scanResponse = scanResponse
        }
    }

    /// The steps that add (or replace) the instance.
    ///
    /// The kernel skips sending data it believes the controller already has. If another program (a raw HCI client,
    /// hcitool, beacond's own hci backend) changed the controller's data behind the kernel's back, that belief is
    /// wrong and a stale beacon stays on the air. So the data goes in twice: first a copy that differs, then as it
    /// is — the second always differs from the kernel's copy and so always reaches the controller. The first copy
    /// is the data with one padding byte (an empty AD structure, invisible to scanners), or, for a frame that
    /// already fills the 31 legacy bytes (AltBeacon), its first AD structure alone (the Flags): for a moment a
    /// scanner sees an advertisement that names nothing, never a wrong beacon.
    public static func add(_ i: Instance, using commands: Commands) -> [MgmtStep] {
        let decoy = i.data.count < 31 ? i.data + [0] : firstStructure(of: i.data)
        switch commands {
        case .extended:
            return [
                MgmtStep(.addExtendedAdvertisingParameters(instance: i.number, flags: i.flags, duration: 0, timeout: 0,
                                                           minInterval: i.interval, maxInterval: i.interval, txPower: i.txPower)),
                MgmtStep(.addExtendedAdvertisingData(instance: i.number, data: decoy, scanResponse: i.scanResponse), mayFail: true),
                MgmtStep(.addExtendedAdvertisingData(instance: i.number, data: i.data, scanResponse: i.scanResponse)),
            ]
        case .legacy:
            let flags = i.flags.intersection(.connectable)
            return [
                MgmtStep(.addAdvertising(instance: i.number, flags: flags, duration: 0, timeout: 0, data: decoy, scanResponse: i.scanResponse),
                         mayFail: true),
                MgmtStep(.addAdvertising(instance: i.number, flags: flags, duration: 0, timeout: 0, data: i.data, scanResponse: i.scanResponse)),
            ]
        }
    }

    /// The first length-prefixed AD structure of `data` (all of it when it does not parse).
    static func firstStructure(of data: [UInt8]) -> [UInt8] {
        guard let n = data.first, Int(n) + 1 < data.count else { return data }
        return Array(data.prefix(Int(n) + 1))
    }

    /// New data for an instance that is on the air with the extended commands.
    public static func updateData(instance: UInt8, data: [UInt8], scanResponse: [UInt8] = []) -> [MgmtStep] {
        [MgmtStep(.addExtendedAdvertisingData(instance: instance, data: data, scanResponse: scanResponse))]
    }

    /// Why an extended add that failed should be done again with Add Advertising, or nil when it should not.
    /// - Unknown Command on Add Extended Advertising Parameters: a kernel older than 5.10.
    /// - Invalid Parameters on Add Extended Advertising Data: Raspberry Pi kernels 6.12.93 and 6.18.34 refuse it
    ///   while Add Advertising still works (it took all of bluetoothd's advertising down there).
    public static func fallbackReason(after failure: MgmtStepFailure) -> String? {
        switch (failure.step.command.opcode, failure.failure.status) {
        case (.addExtendedAdvertisingParameters, .unknownCommand?):
            return "the kernel has no Add Extended Advertising Parameters (it is older than 5.10)"
        case (.addExtendedAdvertisingData, .invalidParameters?):
            return "the kernel refused Add Extended Advertising Data with Invalid Parameters (0x0D), as Raspberry Pi kernels 6.12.93 and 6.18.34 do"
        default:
            return nil
        }
    }

    /// Taking the instance away from a powered-off adapter, which the kernel refuses (ENETDOWN, Not Powered): power
    /// it on, remove the instance (gone already is fine), power it off again.
    public static func removeWhilePoweredOff(instance: UInt8) -> [MgmtStep] {
        [MgmtStep(.setPowered(true)), MgmtStep(.removeAdvertising(instance: instance), mayFail: true), MgmtStep(.setPowered(false))]
    }
}
