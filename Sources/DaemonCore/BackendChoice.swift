// Which backend the lifecycle opens on its device, and what it remembers for backend `auto`: whether the management
// interface refused beacond (and whether for lack of a privilege, which lasts), and why the kernel would not put the
// beacons on the air as configured (then raw HCI until the device registers anew).
import BeaconCore
import BluetoothHCI
import HCIHost
import Mgmt

struct BackendChoice: Sendable {
    /// The backend in use (nil when none is open).
    var open: BackendKind?
    /// Backend `auto` fell back to raw HCI because the management interface refused beacond.
    private var mgmtRefused = false
    /// Refused for lack of CAP_NET_ADMIN (that lasts); otherwise a device registered again gets mgmt again.
    private var mgmtRefusedForPermission = false
    /// Backend `auto` left the management interface because the kernel would not put the beacons on the air as
    /// configured on this controller (why, for the backend note); a device registered again is asked again.
    private var mgmtShortfall: String?
    private var lastNote = ""

    /// The backend to open for `config` on `device`, and the note saying why when it is not the one said last.
    mutating func choose(_ config: BeaconConfiguration, device: DeviceSpec) -> (kind: BackendKind, note: Lifecycle.Action?) {
        let kind: BackendKind
        let why: String
        let ownCommandsNeeded = config.addressPlan.ownCommandsNeeded
        switch device {
        case .kernel:
            switch config.controller.backend {
            case .mgmt: (kind, why) = (.mgmt, "backend mgmt")
            case .hci: (kind, why) = (.hci, "backend hci")
            case .auto where mgmtRefused: (kind, why) = (.hci, "backend auto: the management interface cannot serve it")
            case .auto where mgmtShortfall != nil: (kind, why) = (.hci, "backend auto: \(mgmtShortfall!)")
            case .auto where ownCommandsNeeded != nil:
                (kind, why) = (.hci, "backend auto: \(ownCommandsNeeded!)")
            case .auto: (kind, why) = (.mgmt, "backend auto: cooperates with bluetoothd")
            }
        default:
            (kind, why) = (.hci, "H4 device: beacond owns the controller")
        }
        let note = kind == .mgmt ? "Using the kernel's management interface for \(device) (\(why))"
                                 : "Using raw HCI commands on \(device) (\(why))"
        guard note != lastNote else { return (kind, nil) }
        lastNote = note
        return (kind, .log(.info, note, ["HCI_DEVICE=\(device)"]))
    }

    /// Why, under backend `auto`, the kernel would not put this config's beacons on the air as configured on a
    /// controller with these traits; nil when it would (or the backend is not mgmt by auto's choice): Mgmt's
    /// KernelAdvertising for a controller without advertising sets.
    func kernelShortfall(_ traits: ControllerTraits, _ config: BeaconConfiguration, device: DeviceSpec) -> String? {
        guard open == .mgmt, config.controller.backend == .auto, traits.advertisingSets == false else { return nil }
        let n = config.beacons.count, kernel = KernelAdvertising(advertisingSets: false, connectable: config.advertising.connectable)
        guard !kernel.asConfigured(instances: n) else { return nil }
        let what = n > 1 ? "give each of the \(n) beacons a \(formatDuration(KernelAdvertising.turn)) turn in every \(formatDuration(kernel.cycle(n)))"
                         : "send the beacon every \(kernel.interval?.spoken ?? "") whatever interval_ms asks"
        return "\(device) has no advertising sets (legacy advertising only), where the kernel's management interface would \(what)"
    }

    /// Why backend `auto` leaves mgmt after this confirmed apply: the kernel took Add Advertising (an old kernel, or
    /// one that refuses the extended commands on this controller), its default instead of the interval. Nil to stay.
    func kernelDefault(_ result: OnAir, _ config: BeaconConfiguration) -> String? {
        guard open == .mgmt, config.controller.backend == .auto, result.kernelInterval == .addAdvertisingDefault else { return nil }
        return "the kernel's management interface advertises here only at its default interval of \(KernelInterval.addAdvertisingDefault.spoken)"
    }

    /// Backend `auto` leaves mgmt for raw HCI beside bluetoothd (until the device registers anew): what to say, once.
    mutating func leaveMgmt(_ why: String, device: DeviceSpec) -> Lifecycle.Action {
        mgmtShortfall = why
        return .log(.notice, "\(why); backend auto uses raw HCI commands beside bluetoothd instead: each beacon at its interval (several in time slices), each from its own address. Set backend = \"mgmt\" to leave advertising to the kernel", ["HCI_DEVICE=\(device)"])
    }

    /// Backend `auto` takes raw HCI after this failure of mgmt (said with the failure); false when the failure is
    /// the backend's to report.
    mutating func fallsBack(after f: BackendFailure, _ config: BeaconConfiguration) -> Bool {
        guard f.rawHCIMayWork, open == .mgmt, config.controller.backend == .auto, !mgmtRefused else { return false }
        mgmtRefused = true
        mgmtRefusedForPermission = f.fatal == .noPermission
        return true
    }

    /// The kernel registered the device anew (a re-plug, a driver reload): its setup ran again, mgmt may serve it now
    /// unless it lacked a privilege.
    mutating func registered() {
        if !mgmtRefusedForPermission { mgmtRefused = false }
        mgmtShortfall = nil
    }

    /// A reload changed the controller settings: backend `auto` asks mgmt again.
    mutating func settingsChanged() {
        mgmtRefused = false
        mgmtShortfall = nil
    }
}
