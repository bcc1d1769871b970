// The mgmt backend's decisions, as values with tests: how a controller is opened through the kernel's management
// interface (its information, a power-on when allowed, its advertising features), what a kernel event means to
// beacond, what a refused command tells the user, how an instance is removed from a powered-off adapter, and what is
// on the air. MgmtBackend only carries commands, answers and timers.
import BeaconCore
import BluetoothHCI
import HCIHost
import Mgmt

/// Opening a controller through mgmt: each answer in, the next command (or the end) out.
public struct MgmtOpening: Sendable {
    public enum Next: Sendable, Hashable {
        case send(MgmtCommand)
        /// mgmt calls the device an invalid index: whether the kernel has it decides what that means.
        case askWhetherTheDeviceExists
        /// Powered on by beacond (say so), then the next step.
        case poweredOn(then: MgmtCommand)
        case opened(MgmtControllerInformation, MgmtAdvertisingFeatures)
        case failed(BackendFailure)
    }

    public let device: String
    public let mayPowerOn: Bool
    public private(set) var information: MgmtControllerInformation?

    public init(device: String, mayPowerOn: Bool) {
        self.device = device
        self.mayPowerOn = mayPowerOn
    }

    public var first: Next { .send(.readControllerInformation) }

    /// The answer to `command`.
    public mutating func answered(_ command: MgmtCommand, _ result: Result<[UInt8], MgmtFailure>) -> Next {
        switch (command, result) {
        case (.readControllerInformation, .failure(let f)) where f.status == .invalidIndex:
            return .askWhetherTheDeviceExists
        case (.readControllerInformation, .failure(let f)):
            return .failed(MgmtDecisions.failure("read the controller information of \(device)", .readControllerInformation, f.status, device: device))
        case (.readControllerInformation, .success(let params)):
            guard let info = try? MgmtControllerInformation(returnParameters: params) else {
                return .failed(BackendFailure(message: "The kernel sent a malformed controller information reply for \(device)"))
            }
            information = info
            guard info.supportsLE else { return .failed(BackendFailure(message: "\(device) has no Bluetooth Low Energy: it cannot advertise an iBeacon")) }
            if info.isPowered { return .send(.readAdvertisingFeatures) }
            guard mayPowerOn else { return .failed(BackendFailure(message: "Waiting for \(device) to be powered on", level: .notice)) }
            return .send(.setPowered(true))
        case (.setPowered, .success):
            return .poweredOn(then: .readAdvertisingFeatures)
        case (.setPowered, .failure(let f)):
            return .failed(MgmtDecisions.failure("power on \(device)", .setPowered, f.status, device: device))
        case (.readAdvertisingFeatures, .failure(let f)):
            return .failed(MgmtDecisions.failure("read the advertising features of \(device)", .readAdvertisingFeatures, f.status, device: device))
        case (.readAdvertisingFeatures, .success(let params)):
            guard let features = try? MgmtAdvertisingFeatures(returnParameters: params), let information else {
                return .failed(BackendFailure(message: "The kernel sent a malformed advertising features reply for \(device)"))
            }
            return .opened(information, features)
        default:
            return .failed(BackendFailure(message: "Opening \(device) got an answer to \(command), which it did not send"))
        }
    }

    /// Whether the kernel has the device mgmt called an invalid index.
    public func deviceExists(_ exists: Bool) -> Next {
        guard exists else { return .failed(BackendFailure(message: "Waiting for \(device) to appear", level: .notice)) }
        // It is there, but the kernel's setup of it failed when it was registered (dmesg: "Opcode 0x0c03 failed:
        // -110", the Pi's "command tx timeout"): mgmt leaves such a device out until it is registered again. Raw HCI
        // can bring it up (HCIDEVUP runs the kernel's setup again).
        return .failed(BackendFailure(
            message: "\(device) exists, but the kernel's management interface calls it an invalid index: the kernel's setup of it failed when it was registered (dmesg says why); mgmt offers it again after a re-plug or a driver reload",
            level: .warning, fields: ["HCI_DEVICE=\(device)", "MGMT_STATUS=\(hex8(MgmtStatus.invalidIndex.rawValue))"],
            rawHCIMayWork: true))
    }
}

public enum MgmtDecisions {
    /// A command the kernel refused or did not answer, as the user reads it.
    public static func failure(_ what: String, _ opcode: MgmtOpcode, _ status: MgmtStatus?, device: String) -> BackendFailure {
        let fields = ["HCI_DEVICE=\(device)", "MGMT_OPCODE=\(hex16(opcode.rawValue))"] + (status.map { ["MGMT_STATUS=\(hex8($0.rawValue))"] } ?? [])
        switch status {
        case nil:
            return BackendFailure(message: "Failed to \(what): \(opcode) → no answer from the kernel (timeout)", fields: fields)
        case .permissionDenied?:
            return BackendFailure(message: "Failed to \(what): \(opcode) → \(status!); the management interface needs CAP_NET_ADMIN",
                                  fields: fields, fatal: .noPermission)
        case .notPowered?, .rejected?:
            return BackendFailure(message: "Failed to \(what): \(opcode) → \(status!) (\(device) is not powered)", level: .warning, fields: fields)
        case let s?:
            return BackendFailure(message: "Failed to \(what): \(opcode) → \(s)", fields: fields)
        }
    }

    /// What a kernel event on controller `index` means to beacond.
    public enum EventMeaning: Sendable, Hashable {
        /// Put the beacons back: the reason.
        case reapply(String)
        /// The controller is gone or off.
        case lost(String, LogLevel)
        case nothing
    }

    /// `advertiser` learns of other programs' instances and of removals of beacond's.
    public static func meaning(of e: MgmtEvent, index: UInt16, device: String, advertiser: inout MgmtAdvertiser?) -> EventMeaning {
        guard e.index == index else { return .nothing }
        switch e.kind {
        case .advertisingAdded, .advertisingRemoved:
            return advertiser?.event(e.kind).map { .reapply($0) } ?? .nothing
        case .indexRemoved:
            return .lost("\(device) was removed", .warning)
        case .newSettings(let settings) where settings & MgmtSettings.powered == 0:
            return .lost("\(device) was powered off; waiting for it to be powered on", .warning)
        default:
            return .nothing
        }
    }

    /// `status --check`'s words for a refused Read Advertising Features (the kernel answers it to privileged callers).
    public static func featuresRefused(_ status: MgmtStatus?) -> String {
        "Read Advertising Features: \(status.map { "\($0)" } ?? "no answer")"
            + (status == .permissionDenied ? " (the kernel answers it to root, or with CAP_NET_ADMIN)" : "")
    }

    /// A note of the advertiser's, as a log line: level, message, journal fields.
    public static func logLine(_ note: MgmtAdvertiser.Note, device: String) -> (LogLevel, String, [String]) {
        switch note {
        case .warning(let m, let op): (.warning, m, ["HCI_DEVICE=\(device)"] + (op.map { ["MGMT_OPCODE=\(hex16($0.rawValue))"] } ?? []))
        case .notice(let m): (.notice, m, ["HCI_DEVICE=\(device)"])
        }
    }

    /// The other programs' instances an opened controller holds, to say at debug level (nil: none).
    public static func foreignInstances(_ a: MgmtAdvertiser, device: String) -> String? {
        guard !a.foreign.isEmpty else { return nil }
        let n = a.foreign.count
        return "\(device): advertising instance\(n == 1 ? "" : "s") \(a.foreign.sorted().map(String.init).joined(separator: ", ")) belong\(n == 1 ? "s" : "") to another program"
    }

    /// Why beacond puts its instances back when AirWatch finds the controller silent: what the controller was told,
    /// and for how long.
    public static func silenceReason(device: String, off: Duration, instances: [UInt8]) -> String {
        let list = instances.map(String.init).joined(separator: ", ")
        return "The controller on \(device) was told to stop advertising \(formatDuration(off)) ago and not to start again, while the kernel still holds beacond's instance\(instances.count == 1 ? "" : "s") \(list) (a pause the kernel did not end, or another program's disable)"
    }

    /// Removing an instance: after Remove Advertising's answer.
    public enum Removal: Sendable, Hashable {
        /// Gone (or never there), with what to log.
        case gone(String?)
        /// The kernel refuses Remove Advertising on a powered-off adapter: power it on for a moment, remove the
        /// instance, power it off again (it ends as it was found; the beacon is on the air for a few milliseconds).
        case whilePoweredOff([MgmtStep])
        case kept(String)
    }

    public static func removal(_ instance: UInt8, _ result: Result<[UInt8], MgmtFailure>, device: String) -> Removal {
        switch result {
        case .success: return .gone("Advertising instance \(instance) removed on \(device)")
        case .failure(let f) where f.status == .invalidParameters: return .gone(nil)  // the kernel has no such instance (any more)
        case .failure(let f) where f.status == .notPowered: return .whilePoweredOff(MgmtAdvertisingPlan.removeWhilePoweredOff(instance: instance))
        case .failure(let f):
            return .kept("Failed to remove advertising instance \(instance) on \(device): \(MgmtOpcode.removeAdvertising) → \(f.status.map(\.description) ?? "no answer")")
        }
    }

    /// After the powered-off removal: whether the instance is gone, and what to say (info when gone, else a warning).
    public static func removalWhilePoweredOff(_ instance: UInt8, _ result: Result<[[UInt8]], MgmtStepFailure>, device: String) -> (gone: Bool, message: String) {
        switch result {
        case .success:
            return (true, "\(device) was powered off: powered it on for a moment to remove advertising instance \(instance), and off again")
        case .failure(let f):
            return (false, "Advertising instance \(instance) stays in the kernel for \(device), which is powered off: \(f.step.command.opcode) → \(f.failure.status.map(\.description) ?? "no answer"); the kernel advertises it again at the next power-on until beacond runs again")
        }
    }
}

extension OnAir {
    /// What the kernel has on the air for beacond's instances, as `advertiser` applied them. Without advertising sets
    /// of its own the controller has one advertiser: the kernel gives each instance its turn (2 s by default), and
    /// picks the interval of non-connectable advertising itself. The kernel picks each instance's address.
    public init(mgmt a: MgmtAdvertiser, information: MgmtControllerInformation?) {
        let (wanted, slots, using, flags, features, txPowers) = (a.applied ?? [], a.beaconInstances, a.commands, a.flags, a.features, a.txPowers)
        let n = wanted.count
        let model = KernelAdvertising(commands: using, advertisingSets: features.supportedFlags.contains(.hardwareOffload),
                                      connectable: flags.contains(.connectable))
        let (rotated, kernel) = (model.rotates, model.interval)
        func tx(_ i: UInt8) -> String? {
            guard using == .extended, let selected = txPowers[i], selected != 0x7F, flags.contains(.txPowerValid) || selected != 0 else { return nil }
            return "TX \(selected) dBm"
        }
        let kernelNote = kernel == .addAdvertisingDefault ? ["kernel default interval"] : []
        let controller = ControllerSummary(backend: .mgmt, family: using == .legacy ? .legacy : .extended,
                                           bluetoothVersion: information.map { LocalVersionInformation.coreVersionName(hciVersion: $0.bluetoothVersion) },
                                           manufacturer: information?.manufacturer, instances: Int(features.maxInstances), timeSliced: rotated && n > 1)
        let addresses = [OwnAddress?](repeating: nil, count: n)
        if n == 1 {
            self.init(interval: kernel?.typical ?? wanted[0].interval,
                      details: ["mgmt instance \(slots[0])"] + kernelNote + (tx(slots[0]).map { [$0] } ?? []), kernelInterval: kernel,
                      controller: controller, addresses: addresses)
            return
        }
        var details = ["mgmt", "\(n) instances"]
        if rotated { details.append("the kernel rotates them, \(formatDuration(KernelAdvertising.turn)) each") }
        details += kernelNote
        let beacons = zip(wanted, slots).map { r, i in
            // Rotated, a beacon has one n-th of the time: on average an advertising event every n intervals.
            let every = model.every(r.interval, instances: n)
            var d = ["instance \(i)"]
            if let t = tx(i) { d.append(t) }
            if rotated {
                d.append("on the air \(formatDuration(KernelAdvertising.turn)) of every \(formatDuration(model.cycle(n))), every \(kernel?.description ?? r.interval.description) then")
            }
            return BeaconOnAir(every: every, details: d)
        }
        self.init(interval: kernel?.typical ?? wanted[0].interval, details: details, kernelInterval: kernel, beacons: beacons,
                  controller: controller, addresses: addresses)
    }
}
