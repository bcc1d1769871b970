// Backend auto on a controller without advertising sets (every Raspberry Pi's radio) beside bluetoothd: the kernel
// would override the interval and rotate the beacons, so auto takes raw HCI commands — said once, kept across
// losses, learned again for a device registered anew. Issue #31.
import BeaconCore
import BluetoothHCI
@testable import DaemonCore
import HCIHost
import Mgmt
import Testing

private func piConfig(beacons: Int = 1, backend: String = "auto", connectable: Bool = false) -> BeaconConfiguration {
    var text = """
        [advertising]
        interval_ms = 100
        connectable = \(connectable)

        [controller]
        device = "hci0"
        backend = "\(backend)"

        """
    if beacons == 1 {
        text += "[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\n"
    } else {
        for k in 1...beacons { text += "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = \(k)\n\n" }
    }
    return try! BeaconConfiguration.parse(Array(text.utf8))
}

private let legacyOnly = ControllerTraits(advertisingSets: false)
private let withSets = ControllerTraits(advertisingSets: true)
private let onAir = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["legacy"])

private func opens(_ a: [Lifecycle.Action]) -> [BackendKind] { a.compactMap { if case .open(let k, _) = $0 { k } else { nil } } }
private func applies(_ a: [Lifecycle.Action]) -> Bool { a.contains { if case .apply = $0 { true } else { false } } }
private func logs(_ a: [Lifecycle.Action], _ level: LogLevel? = nil) -> [String] {
    a.compactMap { if case .log(let l, let m, _) = $0, level == nil || l == level { m } else { nil } }
}

@Suite("backend auto on a legacy-only controller")
struct LegacyControllerTests {
    @Test("one beacon: mgmt learns there are no advertising sets, auto takes raw HCI before anything goes on the air, and says why once")
    func oneBeacon() {
        var lc = Lifecycle(config: piConfig(), configPath: "/etc/beacond/beacond.conf", seed: 1)
        #expect(opens(lc.handle(.start)) == [.mgmt])
        let a = lc.handle(.opened(legacyOnly))
        #expect(!applies(a), "nothing may go on the air through mgmt")
        #expect(a.contains(.stopAdvertising), "what an earlier run left in the kernel comes off through mgmt first")
        let why = logs(a, .notice).joined()
        #expect(why.contains("no advertising sets") && why.contains("100–150 ms") && why.contains("raw HCI"), "\(logs(a))")
        let b = lc.handle(.stopped)
        #expect(b.contains(.closeBackend))
        #expect(opens(b) == [.hci])
        #expect(applies(lc.handle(.opened())))
        #expect(lc.backend == .hci)
        lc.handle(.applied(onAir))
        #expect(lc.phase == .advertising)
    }

    @Test("three beacons: the kernel would rotate them 2 s each; auto takes raw HCI")
    func threeBeacons() {
        var lc = Lifecycle(config: piConfig(beacons: 3), configPath: "/etc/beacond/beacond.conf", seed: 1)
        lc.handle(.start)
        let a = lc.handle(.opened(legacyOnly))
        #expect(opens(lc.handle(.stopped)) == [.hci])
        let why = logs(a, .notice).joined()
        #expect(why.contains("2 s turn") && why.contains("3 beacons"), "\(why)")
    }

    @Test("a controller with advertising sets stays on mgmt; so does a single connectable beacon, whose interval the kernel keeps")
    func staysOnMgmt() {
        var lc = Lifecycle(config: piConfig(beacons: 3), configPath: "/etc/beacond/beacond.conf", seed: 1)
        lc.handle(.start)
        let a = lc.handle(.opened(withSets))
        #expect(applies(a) && opens(a).isEmpty && lc.backend == .mgmt)
        var c = Lifecycle(config: piConfig(connectable: true), configPath: "/etc/beacond/beacond.conf", seed: 1)
        c.handle(.start)
        #expect(applies(c.handle(.opened(legacyOnly))) && c.backend == .mgmt)
    }

    @Test("backend = \"mgmt\" is obeyed on a legacy-only controller")
    func explicitMgmt() {
        var lc = Lifecycle(config: piConfig(beacons: 3, backend: "mgmt"), configPath: "/etc/beacond/beacond.conf", seed: 1)
        lc.handle(.start)
        #expect(applies(lc.handle(.opened(legacyOnly))) && lc.backend == .mgmt)
    }

    @Test("the choice lasts through a loss without asking mgmt again; a device registered anew (a re-plug, maybe another adapter) is asked again")
    func sticky() {
        var lc = Lifecycle(config: piConfig(), configPath: "/etc/beacond/beacond.conf", seed: 1)
        lc.handle(.start)
        lc.handle(.opened(legacyOnly))
        lc.handle(.stopped)
        lc.handle(.opened())
        lc.handle(.applied(onAir))
        lc.handle(.lost(BackendFailure(message: "Lost the controller")))
        let again = lc.handle(.timerFired)
        #expect(opens(again) == [.hci])
        #expect(logs(again).allSatisfy { !$0.contains("no advertising sets") }, "said once")
        lc.handle(.openFailed(BackendFailure(message: "Waiting for hci0 to appear", level: .notice)))
        #expect(opens(lc.handle(.device(.registered))) == [.mgmt])
    }

    @Test("the kernel falls back to Add Advertising (its default 1.28 s; the 6.18 refusal of Add Extended Advertising Data): auto takes its beacons off and uses raw HCI")
    func kernelDefaultInterval() {
        var lc = Lifecycle(config: piConfig(), configPath: "/etc/beacond/beacond.conf", seed: 1)
        lc.handle(.start)
        lc.handle(.opened(withSets))
        let a = lc.handle(.applied(OnAir(interval: KernelInterval.addAdvertisingDefault.typical, details: ["mgmt instance 1"],
                                         kernelInterval: .addAdvertisingDefault)))
        #expect(a.contains(.stopAdvertising), "the mgmt instance comes off first")
        #expect(lc.phase == .stopping)
        #expect(logs(a, .notice).joined().contains("raw HCI"), "\(logs(a))")
        let b = lc.handle(.stopped)
        #expect(opens(b) == [.hci])
        #expect(applies(lc.handle(.opened())))
        lc.handle(.applied(onAir))
        #expect(lc.phase == .advertising && lc.backend == .hci)
    }
}
