// `beacond status --check`: what is known about the machine's adapters (gathered by the app), and what `run` would do
// with a config there, each problem with what to do. The choice of backend is the lifecycle's own: the plan runs the
// lifecycle against the facts instead of restating its rules.
import BeaconCore
import BluetoothHCI
import HCIHost
import Mgmt

public struct AdapterFacts: Sendable {
    public struct Controller: Sendable, Hashable {
        public var name: String
        /// nil: unknown (no HCI socket here).
        public var up: Bool?
        public var softBlocked: Bool?
        public var hardBlocked: Bool?
        public init(name: String, up: Bool? = nil, softBlocked: Bool? = nil, hardBlocked: Bool? = nil) {
            self.name = name
            self.up = up
            self.softBlocked = softBlocked
            self.hardBlocked = hardBlocked
        }
    }

    /// What the kernel's management interface said (Read Controller Information, Read Advertising Features).
    public struct Mgmt: Sendable, Hashable {
        public var powered: Bool
        public var lowEnergy: Bool
        public var bluetoothVersion: String
        public var manufacturer: UInt16
        /// nil: Read Advertising Features was not answered (its error is in `mgmtFeaturesError`).
        public var instances: Int?
        public var maxDataLength: Int?
        /// The controller has advertising sets of its own (the kernel's hardware offload flag).
        public var advertisingSets: Bool?
        public init(powered: Bool, lowEnergy: Bool, bluetoothVersion: String, manufacturer: UInt16, instances: Int? = nil,
                    maxDataLength: Int? = nil, advertisingSets: Bool? = nil) {
            self.powered = powered
            self.lowEnergy = lowEnergy
            self.bluetoothVersion = bluetoothVersion
            self.manufacturer = manufacturer
            self.instances = instances
            self.maxDataLength = maxDataLength
            self.advertisingSets = advertisingSets
        }
    }

    /// What the controller itself said over raw HCI.
    public struct HCI: Sendable, Hashable {
        public var bluetoothVersion: String
        public var manufacturer: UInt16
        public var extendedAdvertising: Bool
        /// LE Read Number of Supported Advertising Sets (extended controllers).
        public var sets: Int?
        /// LE Read Transmit Power: the lowest and highest TX power (dBm).
        public var txPowerRange: ClosedRange<Int>?
        public init(bluetoothVersion: String, manufacturer: UInt16, extendedAdvertising: Bool, sets: Int? = nil, txPowerRange: ClosedRange<Int>? = nil) {
            self.bluetoothVersion = bluetoothVersion
            self.manufacturer = manufacturer
            self.extendedAdvertising = extendedAdvertising
            self.sets = sets
            self.txPowerRange = txPowerRange
        }
    }

    public var controllers: [Controller] = []
    /// False: this kernel or network namespace has no Bluetooth (no AF_BLUETOOTH), where `run` exits 69; nil:
    /// could not tell.
    public var kernelHasBluetooth: Bool?
    /// nil: could not tell.
    public var bluetoothdRunning: Bool?
    /// bluetoothd offers org.bluez.AdvertisementMonitorManager1 on the adapter (it runs with `Experimental = true`),
    /// which Home Assistant's passive scanning needs; nil: it could not be asked (`passiveScanningUnknown` says why).
    public var passiveScanning: Bool?
    public var passiveScanningUnknown: String?
    public var mgmt: Mgmt?
    /// Why there is no `mgmt` (or no features in it): the command and the status, or the missing privilege.
    public var mgmtError: String?
    public var mgmtFeaturesError: String?
    public var hci: HCI?
    /// The controller was asked and failed to answer (the command and the status): a problem.
    public var hciError: String?
    /// The controller was not asked (it is down, this user may not, or a running beacond owns it): a note.
    public var hciNotAsked: String?
    /// A beacond already runs on the device (its unit or pid): `status` shows what it has on the air.
    public var runningOnDevice: String?
    /// Why the config's keys could not be read here (a normal user cannot read root's keys): a note.
    public var keysNotRead: String?

    public init() {}
}

public struct AdapterPlan: Sendable {
    /// The backend `run` would use and why ("raw HCI commands (backend auto: …)").
    public var backend: BackendKind?
    public var backendWhy: String = ""
    /// The advertising commands `run` would use; nil when unknown.
    public var family: CommandFamily?
    /// How the beacons share the controller: "each on its own advertising set", "time slices of one advertiser", …
    public var sharing: String?
    public var addresses: [String] = []
    /// What stops `run` from putting every beacon on the air, each with what to do.
    public var problems: [String] = []
    /// Facts worth knowing that stop nothing.
    public var notes: [String] = []

    public var ok: Bool { problems.isEmpty }

    /// What bluetoothd's scanning means for the beacons (issue #52): passive scanning is there only with
    /// `Experimental = true`; without it Home Assistant scans actively. Either scan holds a legacy controller's random
    /// address (Core Vol 4 Part E §7.8.4): beacons with a fixed address take the public one meanwhile, private ones pause.
    public static func scanningNote(_ passive: Bool, device: String) -> String {
        let holds = "while any program scans on a controller without advertising sets, its beacons with a fixed address go out from the public address and those with a private one pause; a second adapter for the scanner avoids both"
        return passive
            ? "bluetoothd offers passive scanning on \(device) (AdvertisementMonitorManager1: Experimental = true): Home Assistant can scan there passively; \(holds)"
            : "bluetoothd offers no passive scanning on \(device) (no AdvertisementMonitorManager1: it runs without Experimental = true): Home Assistant scans there actively, restarting every 10 s; \(holds)"
    }

    /// What `run` would do with `config` on `device`. `addresses`: each beacon's address as the tools describe it.
    public init(config: BeaconConfiguration, device: DeviceSpec, facts f: AdapterFacts, addresses: [String]) {
        let n = config.beacons.count
        if n == 0 { problems.append("the config has no beacon yet: set a uuid with 'beacond gen-uuid --set FILE', then reload") }
        if case .kernel = device {
            let name = device.description
            if f.kernelHasBluetooth == false {
                // What run says when it exits 69, and what to look at.
                problems.append("\(BackendFailure.noBluetooth(name).message): run would exit 69; load the kernel's Bluetooth support ('modprobe bluetooth'), or run beacond outside the container or network namespace it is in")
                return
            }
            guard let c = f.controllers.first(where: { $0.name == name }) else {
                let others = f.controllers.map(\.name)
                problems.append(others.isEmpty
                    ? "there is no Bluetooth controller on this machine: plug in an adapter, or see 'dmesg | grep -i bluetooth' for one whose driver or firmware failed"
                    : "\(name) does not exist; the controllers here are \(others.joined(separator: ", ")): set [controller] device")
                return
            }
            if c.hardBlocked == true {
                problems.append("\(name) is hard-blocked by rfkill (a switch, a key or the firmware): rfkill cannot lift it; turn the radio on there")
            }
            if c.softBlocked == true {
                problems.append("\(name) is soft-blocked by rfkill: run 'rfkill unblock bluetooth' (and check that nothing blocks it again at boot)")
            }
            if c.up == false && c.softBlocked != true && c.hardBlocked != true {
                notes.append("\(name) is down: beacond brings it up (with CAP_NET_ADMIN, which the units give it)")
            }
            if let m = f.mgmt, !m.lowEnergy {
                problems.append("\(name) has no Bluetooth Low Energy: it cannot advertise a beacon; use an adapter with Bluetooth 4.0 or later")
            }
        }
        if case .kernel = device, let passive = f.passiveScanning { notes.append(Self.scanningNote(passive, device: device.description)) }
        if let r = f.runningOnDevice { notes.append("\(r) runs on \(device) already: 'beacond status' shows what it has on the air") }
        if let k = f.keysNotRead { notes.append(k) }
        guard n > 0 else { return }
        // The lifecycle decides the backend: start it, and answer its open with what the kernel said.
        var lc = Lifecycle(config: config, configPath: "", device: device, seed: 1)
        func opened(_ a: [Lifecycle.Action]) -> BackendKind? { a.lazy.compactMap { if case .open(let k, _) = $0 { k } else { nil } }.first }
        func using(_ a: [Lifecycle.Action]) -> String? {
            a.lazy.compactMap { if case .log(_, let m, _) = $0, m.hasPrefix("Using ") { m } else { nil } }.last
        }
        var actions = lc.handle(.start)
        var kind = opened(actions)
        var why = using(actions)
        if kind == .mgmt, let sets = f.mgmt?.advertisingSets {
            actions = lc.handle(.opened(ControllerTraits(advertisingSets: sets)))
            if actions.contains(.stopAdvertising) {
                actions = lc.handle(.stopped)
                kind = opened(actions) ?? kind
                why = using(actions) ?? why
            }
        }
        backend = kind
        backendWhy = why.map { String($0.dropFirst("Using ".count)) } ?? ""
        self.addresses = addresses
        switch kind {
        case .mgmt?:
            if f.mgmt == nil, let e = f.mgmtError { problems.append("the management interface does not answer for \(device): \(e)") }
            if f.bluetoothdRunning == false {
                notes.append("bluetoothd is not running: the management interface works without it")
            }
            guard let m = f.mgmt else { break }
            guard m.advertisingSets != nil else {
                // Read Advertising Features is answered to root (or CAP_NET_ADMIN) only.
                notes.append("whether the controller has advertising sets (and so whether backend auto keeps the management interface or uses raw HCI, and the family) is told to root only: run the check as root")
                break
            }
            let extended = m.advertisingSets == true
            family = extended ? .extended : .legacy
            if let i = m.instances {
                if i < n {
                    problems.append("the config has \(n) beacons, but the kernel offers \(i) advertising instance\(i == 1 ? "" : "s") on \(device): remove beacons, or set backend = \"hci\"")
                }
                sharing = extended ? "each beacon on its own advertising set (kernel instances: \(i))"
                    : n > 1 ? "the kernel gives each beacon a \(formatDuration(KernelAdvertising.turn)) turn (kernel instances: \(i))"
                    : "one kernel instance (of \(i))"
            }
            if let k = KernelAdvertising(advertisingSets: extended, connectable: config.advertising.connectable).interval {
                notes.append("without advertising sets the kernel sends non-connectable advertising every \(k.spoken), whatever interval_ms asks")
            }
            if !m.powered { notes.append("\(device) is powered off: beacond powers it on") }
        case .hci?:
            if let e = f.hciError, f.hci == nil { problems.append("the controller on \(device) did not answer beacond's questions: \(e)") }
            if let e = f.hciNotAsked, f.hci == nil { notes.append("the controller's own answers (family, sets) are not known here: \(e)") }
            if f.bluetoothdRunning == true, case .kernel = device {
                notes.append("bluetoothd is running: raw HCI commands work beside it (beacond keeps to its own advertising)")
            }
            guard let h = f.hci else { break }
            family = h.extendedAdvertising ? .extended : .legacy
            if h.extendedAdvertising {
                guard let sets = h.sets else {
                    sharing = "advertising sets (how many, the controller did not say)"
                    break
                }
                if sets < n {
                    problems.append("the config has \(n) beacons, but the controller on \(device) has \(sets) advertising set\(sets == 1 ? "" : "s"): remove beacons or use a controller with more sets")
                }
                sharing = n == 1 ? "one advertising set (of \(sets))" : "each beacon on its own advertising set (\(n) of \(sets))"
            } else {
                sharing = n == 1 ? "the controller's one advertiser" : "time slices of the controller's one advertiser (\(n) beacons take turns)"
            }
        case nil:
            break
        }
    }
}

extension AdapterPlan {
    /// The backend `run` would take for `config` on `device` when its controller has advertising sets or has none
    /// (every Raspberry Pi): the lifecycle's own choice, for the tools that describe a config before it meets a
    /// controller (check-config, payload). Nil when the config has no beacon.
    public static func backend(for config: BeaconConfiguration, device: DeviceSpec, advertisingSets: Bool) -> BackendKind? {
        var f = AdapterFacts()
        if case .kernel = device { f.controllers = [AdapterFacts.Controller(name: device.description, up: true)] }
        f.mgmt = AdapterFacts.Mgmt(powered: true, lowEnergy: true, bluetoothVersion: "", manufacturer: 0, advertisingSets: advertisingSets)
        return AdapterPlan(config: config, device: device, facts: f, addresses: []).backend
    }
}
