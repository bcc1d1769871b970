// `beacond status --check`'s judgement: what run would do with a config, given what the kernel and the controller
// said, and each problem that stops it (with what to do). The backend comes from the lifecycle itself.
import BeaconCore
import BluetoothHCI
import DaemonCore
import Testing

private func parse(_ text: String) -> BeaconConfiguration { try! BeaconConfiguration.parse(Array(text.utf8)) }

private let one = "[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 2\n"
private func beacons(_ n: Int) -> String {
    (1...n).map { "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = \($0)\n" }.joined()
}

private func facts(up: Bool = true, soft: Bool = false, hard: Bool = false, sets: Bool?, instances: Int = 5, hci: AdapterFacts.HCI? = nil) -> AdapterFacts {
    var f = AdapterFacts()
    f.controllers = [AdapterFacts.Controller(name: "hci0", up: up, softBlocked: soft, hardBlocked: hard)]
    f.bluetoothdRunning = true
    f.mgmt = AdapterFacts.Mgmt(powered: true, lowEnergy: true, bluetoothVersion: "5.0", manufacturer: 2, instances: instances, maxDataLength: 31,
                               advertisingSets: sets)
    f.hci = hci
    return f
}

@Suite("adapter check")
struct AdapterPlanTests {
    @Test("the Pi default: legacy-only controller beside bluetoothd, backend auto: raw HCI, each beacon at its interval")
    func piDefault() {
        let p = AdapterPlan(config: parse(one), device: .kernel(index: 0),
                            facts: facts(sets: false, hci: AdapterFacts.HCI(bluetoothVersion: "5.0", manufacturer: 305, extendedAdvertising: false)),
                            addresses: ["static"])
        #expect(p.ok)
        #expect(p.backend == .hci)
        #expect(p.backendWhy.contains("has no advertising sets"))
        #expect(p.family == .legacy)
        #expect(p.notes.contains { $0.hasPrefix("bluetoothd is running") })
    }

    @Test("#52: which scan bluetoothd offers Home Assistant, said as a note; nothing when it could not be asked")
    func scanning() {
        var f = facts(sets: false, hci: AdapterFacts.HCI(bluetoothVersion: "5.0", manufacturer: 305, extendedAdvertising: false))
        f.passiveScanning = false
        let active = AdapterPlan(config: parse(one), device: .kernel(index: 0), facts: f, addresses: ["static"])
        #expect(active.ok && active.notes.contains { $0.contains("offers no passive scanning on hci0") && $0.contains("Experimental = true") && $0.contains("scans there actively") })
        f.passiveScanning = true
        let passive = AdapterPlan(config: parse(one), device: .kernel(index: 0), facts: f, addresses: ["static"])
        #expect(passive.notes.contains { $0.contains("offers passive scanning on hci0") && $0.contains("private one pause") })
        f.passiveScanning = nil
        let unknown = AdapterPlan(config: parse(one), device: .kernel(index: 0), facts: f, addresses: ["static"])
        #expect(!unknown.notes.contains { $0.contains("passive scanning") })
    }

    @Test("a controller with sets beside bluetoothd: the kernel's instances, each beacon on a set")
    func extendedMgmt() {
        let p = AdapterPlan(config: parse(beacons(3)), device: .kernel(index: 0), facts: facts(sets: true), addresses: ["a", "b", "c"])
        #expect(p.ok)
        #expect(p.backend == .mgmt && p.family == .extended)
        #expect(p.sharing?.hasPrefix("each beacon on its own advertising set") == true)
    }

    @Test("rfkill: a soft block says 'rfkill unblock bluetooth', a hard one that rfkill cannot lift it")
    func rfkill() {
        let soft = AdapterPlan(config: parse(one), device: .kernel(index: 0), facts: facts(up: false, soft: true, sets: false), addresses: ["static"])
        #expect(!soft.ok)
        #expect(soft.problems.contains { $0.contains("soft-blocked") && $0.contains("rfkill unblock bluetooth") })
        let hard = AdapterPlan(config: parse(one), device: .kernel(index: 0), facts: facts(hard: true, sets: false), addresses: ["static"])
        #expect(hard.problems.contains { $0.contains("hard-blocked") })
    }

    @Test("no controller, or another one than the config names: each said with what to do")
    func absent() {
        var f = AdapterFacts()
        let none = AdapterPlan(config: parse(one), device: .kernel(index: 0), facts: f, addresses: [])
        #expect(none.problems.first?.contains("no Bluetooth controller") == true)
        f.controllers = [AdapterFacts.Controller(name: "hci1", up: true)]
        let other = AdapterPlan(config: parse(one), device: .kernel(index: 0), facts: f, addresses: [])
        #expect(other.problems.first == "hci0 does not exist; the controllers here are hci1: set [controller] device")
    }

    @Test("more beacons than the controller has sets, or the kernel instances: a problem naming both numbers")
    func capacity() {
        let hci = AdapterFacts.HCI(bluetoothVersion: "5.0", manufacturer: 2, extendedAdvertising: true, sets: 2)
        let p = AdapterPlan(config: parse(beacons(3) + "[controller]\ndevice = \"hci0\"\nbackend = \"hci\"\n"), device: .kernel(index: 0),
                            facts: facts(sets: true, hci: hci), addresses: ["a", "b", "c"])
        #expect(p.problems == ["the config has 3 beacons, but the controller on hci0 has 2 advertising sets: remove beacons or use a controller with more sets"])
        let m = AdapterPlan(config: parse(beacons(3) + "[controller]\ndevice = \"hci0\"\nbackend = \"mgmt\"\n"), device: .kernel(index: 0),
                            facts: facts(sets: true, instances: 2), addresses: ["a", "b", "c"])
        #expect(m.problems.first?.hasPrefix("the config has 3 beacons, but the kernel offers 2 advertising instances") == true)
    }

    @Test("an H4 controller: raw HCI, beacond owns it; a legacy one time-slices several beacons")
    func h4() {
        var f = AdapterFacts()
        f.hci = AdapterFacts.HCI(bluetoothVersion: "4.2", manufacturer: 2, extendedAdvertising: false)
        let p = AdapterPlan(config: parse(beacons(2)), device: .unix(path: "/run/x"), facts: f, addresses: ["a", "b"])
        #expect(p.ok && p.backend == .hci && p.family == .legacy)
        #expect(p.sharing == "time slices of the controller's one advertiser (2 beacons take turns)")
    }

    @Test("as a normal user the kernel does not say whether there are advertising sets: the plan says it cannot tell, not a guess")
    func unprivileged() {
        var f = facts(sets: nil)
        f.mgmtFeaturesError = "Read Advertising Features: Permission Denied (0x14)"
        let p = AdapterPlan(config: parse(one), device: .kernel(index: 0), facts: f, addresses: ["static"])
        #expect(p.family == nil && p.sharing == nil)
        #expect(p.notes.contains { $0.contains("told to root only") })
    }
}
