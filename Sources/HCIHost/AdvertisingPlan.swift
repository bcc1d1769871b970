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

/// What to advertise and how.
public struct AdvertisingRequest: Sendable, Hashable {
    public var data: AdvertisingData
    public var type: LegacyAdvertisingType
    public var interval: AdvertisingInterval
    /// dBm wanted; nil = controller's choice.
    public var txPower: Int8?

    public init(data: AdvertisingData, type: LegacyAdvertisingType, interval: AdvertisingInterval, txPower: Int8?) {
        self.data = data
        self.type = type
        self.interval = interval
        self.txPower = txPower
    }

    /// True when going from `self` to `other` needs new parameters (disable, reconfigure, enable),
    /// false when only the data differs (updated while advertising stays on).
    public func needsRestart(for other: AdvertisingRequest) -> Bool {
        type != other.type || interval != other.interval || txPower != other.txPower
    }
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
                Step(.leSetAdvertisingParameters(LEAdvertisingParameters(interval: request.interval, type: request.type))),
                Step(.leReadAdvertisingPhysicalChannelTxPower),
                Step(.leSetAdvertisingData(request.data)),
                Step(.leSetAdvertisingEnable(true)),
            ]
        case .extended:
            return [
                // Unknown Advertising Identifier just means the set does not exist yet.
                Step(.leSetExtendedAdvertisingEnable(enable: false, sets: [AdvertisingSetEnable(handle: handle)]),
                     tolerating: [.unknownAdvertisingIdentifier]),
                Step(.leSetExtendedAdvertisingParameters(
                    LEExtendedAdvertisingParameters(handle: handle, legacyType: request.type, interval: request.interval,
                                                    txPower: request.txPower))),
                Step(.leSetExtendedAdvertisingData(handle: handle, data: request.data)),
                Step(.leSetExtendedAdvertisingEnable(enable: true, sets: [AdvertisingSetEnable(handle: handle)])),
            ]
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

    /// The TX power the controller reported in a step's return parameters, if that step reports one.
    public static func reportedTxPower(for command: HCICommand, returnParameters r: [UInt8]) -> Int8? {
        switch command {
        case .leReadAdvertisingPhysicalChannelTxPower, .leSetExtendedAdvertisingParameters:
            r.count >= 2 ? Int8(bitPattern: r[1]) : nil
        default: nil
        }
    }
}
