// The values the lifecycle keeps apart from its phases, each on its own: which backend and why (BackendChoice), what
// systemd was told and the reload record (SystemdRecord), the wording of the beacons (LifecycleWording), the retry
// rules (Retries), the periodic timers (PeriodicArming) and the clock's notes (AirContent).
import BeaconCore
import BluetoothHCI
@testable import DaemonCore
import HCIHost
import Mgmt
import Testing

private func conf(_ body: String, device: String = "hci0", backend: String = "auto") -> BeaconConfiguration {
    try! BeaconConfiguration.parse(Array("[controller]\ndevice = \"\(device)\"\nbackend = \"\(backend)\"\n\n\(body)".utf8))
}
private let ibeacon = "[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\n"
private let twoBeacons = (1...2).map { "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = \($0)\nmeasured_power = -100\n\n" }.joined()
private let hci0 = DeviceSpec.kernel(index: 0)
private let onAir = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended"])

private func message(_ a: Lifecycle.Action?) -> String? { if case .log(_, let m, _) = a { m } else { nil } }

@Suite("BackendChoice: which backend, and what backend auto remembers")
struct BackendChoiceTests {
    @Test("each setting's backend and its note, said once until it changes")
    func choices() {
        var c = BackendChoice()
        let (kind, note) = c.choose(conf(ibeacon), device: hci0)
        #expect(kind == .mgmt && message(note) == "Using the kernel's management interface for hci0 (backend auto: cooperates with bluetoothd)")
        let same = c.choose(conf(ibeacon), device: hci0)
        #expect(same.note == nil)
        let hci = c.choose(conf(ibeacon, backend: "hci"), device: hci0)
        #expect(message(hci.note) == "Using raw HCI commands on hci0 (backend hci)")
        let h4 = c.choose(conf(ibeacon, device: "tcp:127.0.0.1:9"), device: .tcp(host: "127.0.0.1", port: 9))
        #expect(h4.kind == .hci && message(h4.note) == "Using raw HCI commands on tcp:127.0.0.1:9 (H4 device: beacond owns the controller)")
    }

    @Test("mgmt refused: raw HCI until the device registers anew, unless for lack of a privilege; a settings change forgets both")
    func refusals() {
        var c = BackendChoice()
        c.open = .mgmt
        let timeout = c.fallsBack(after: BackendFailure(message: "timeout"), conf(ibeacon))
        let permission = c.fallsBack(after: BackendFailure(message: "no CAP_NET_ADMIN", fatal: .noPermission, rawHCIMayWork: true), conf(ibeacon))
        let again = c.fallsBack(after: BackendFailure(message: "again", rawHCIMayWork: true), conf(ibeacon))
        #expect(!timeout && permission && !again)
        let fallen = c.choose(conf(ibeacon), device: hci0)
        #expect(message(fallen.note) == "Using raw HCI commands on hci0 (backend auto: the management interface cannot serve it)")
        c.registered()
        let replugged = c.choose(conf(ibeacon), device: hci0)
        #expect(replugged.kind == .hci, "a privilege does not come with a re-plug")
        c.settingsChanged()
        let changed = c.choose(conf(ibeacon), device: hci0)
        #expect(changed.kind == .mgmt)
        let invalid = c.fallsBack(after: BackendFailure(message: "invalid index", rawHCIMayWork: true), conf(ibeacon))
        c.registered()
        let registered = c.choose(conf(ibeacon), device: hci0)
        #expect(invalid && registered.kind == .mgmt)
        let explicit = c.fallsBack(after: BackendFailure(message: "refused", rawHCIMayWork: true), conf(ibeacon, backend: "mgmt"))
        #expect(!explicit, "only auto falls back")
    }

    @Test("the kernel's shortfall on a controller without sets: several beacons, not for one connectable beacon or with sets")
    func shortfall() {
        var c = BackendChoice()
        c.open = .mgmt
        let legacy = ControllerTraits(advertisingSets: false)
        let why = c.kernelShortfall(legacy, conf(twoBeacons), device: hci0)
        #expect(why?.hasPrefix("hci0 has no advertising sets (legacy advertising only), where the kernel's management interface would give each of the 2 beacons a ") == true)
        #expect(c.kernelShortfall(ControllerTraits(advertisingSets: true), conf(twoBeacons), device: hci0) == nil)
        #expect(c.kernelShortfall(legacy, conf(twoBeacons, backend: "mgmt"), device: hci0) == nil)
        #expect(c.kernelShortfall(legacy, conf("[advertising]\nconnectable = true\n\n" + ibeacon), device: hci0) == nil)
        let leave = c.leaveMgmt(why!, device: hci0)
        #expect(message(leave)?.hasSuffix("; backend auto uses raw HCI commands beside bluetoothd instead: each beacon at its interval (several in time slices), each from its own address. Set backend = \"mgmt\" to leave advertising to the kernel") == true)
        let raw = c.choose(conf(twoBeacons), device: hci0)
        #expect(message(raw.note) == "Using raw HCI commands on hci0 (backend auto: \(why!))")
        c.registered()
        let anew = c.choose(conf(twoBeacons), device: hci0)
        #expect(anew.kind == .mgmt, "a device registered anew is asked again")
    }

    @Test("the kernel's Add Advertising default under auto is a reason to leave mgmt")
    func kernelDefault() {
        var c = BackendChoice()
        c.open = .mgmt
        var result = onAir
        #expect(c.kernelDefault(result, conf(ibeacon)) == nil)
        result.kernelInterval = .addAdvertisingDefault
        #expect(c.kernelDefault(result, conf(ibeacon))?.hasPrefix("the kernel's management interface advertises here only at its default interval of ") == true)
        #expect(c.kernelDefault(result, conf(ibeacon, backend: "mgmt")) == nil)
        c.open = .hci
        #expect(c.kernelDefault(result, conf(ibeacon)) == nil)
    }
}

@Suite("SystemdRecord: what systemd was told, and the reloads")
struct SystemdRecordTests {
    @Test("READY=1 goes with the first ready STATUS, later only changes go out")
    func status() {
        var r = SystemdRecord()
        let told = [r.status("Probing the controller on hci0"), r.status("Probing the controller on hci0"), r.status("Advertising", ready: true),
                    r.status("Advertising", ready: true), r.status("Waiting", ready: true)]
        #expect(told == [.notify(["STATUS=Probing the controller on hci0"]), nil, .notify(["READY=1", "STATUS=Advertising"]), nil, .notify(["STATUS=Waiting"])])
        let settled = r.settled()
        #expect(r.lastStatus == "Waiting" && settled == nil, "no reload under way: nothing to settle")
    }

    @Test("a reload: RELOADING=1, STATUS held back, then READY=1 with the STATUS of the settled state")
    func reload() {
        var r = SystemdRecord()
        _ = r.status("Advertising", ready: true)
        let begun = r.reloadBegun()
        #expect(begun == .notifyReloading && r.reloading && r.reloadCount == 1 && r.reloadResult == .inProgress)
        let held = r.status("Advertising again")
        let settled = r.settled()
        #expect(held == nil && settled == .notify(["READY=1", "STATUS=Advertising again"]))
        let twice = r.settled()
        #expect(!r.reloading && r.reloadResult == .applied && twice == nil)
    }

    @Test("a refused file: READY=1 with a note, the plain STATUS kept, each refusal counted")
    func refused() {
        var r = SystemdRecord()
        _ = r.status("Advertising", ready: true)
        let error = ConfigError(path: "/etc/beacond/beacond.conf", diagnostics: [ConfigDiagnostic("bad", at: nil)])
        for n in 1...2 {
            _ = r.reloadBegun()
            let told = r.refused(error)
            #expect(told == .notify(["READY=1", "STATUS=Advertising; kept previous configuration: \(error.summary)"]))
            #expect(r.reloadResult == .refused && r.refusalCount == n && r.reloadCount == n && r.lastRefusal == error)
        }
        #expect(r.lastStatus == "Advertising")
    }
}

@Suite("LifecycleWording: the beacons' sentences")
struct LifecycleWordingTests {
    @Test("the start summary and the advertising STATUS, one beacon and several")
    func summaries() {
        #expect(LifecycleWording.beaconsSummary(conf(ibeacon)) == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 1")
        #expect(LifecycleWording.beaconsSummary(conf(twoBeacons)).hasPrefix("2 beacons: 1. E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 1; 2. "))
        #expect(LifecycleWording.advertisingStatus(conf(ibeacon), device: hci0, configPath: "/c", onAir: onAir, clockSynchronized: true)
                == "Advertising E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 1 every 100 ms on hci0 (extended)")
        let two = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended"],
                        beacons: [BeaconOnAir(every: .milliseconds(100), details: [], address: .random(BluetoothAddress(parsing: "C6:12:34:56:78:9A")!)),
                                  BeaconOnAir(every: .milliseconds(200), details: [])])
        #expect(LifecycleWording.advertisingSummary(conf(twoBeacons), device: hci0, onAir: two)
                == "Advertising 2 beacons on hci0: iBeacon every 100 ms from C6:12:34:56:78:9A, iBeacon every 200 ms (extended)")
    }

    @Test("EID beacons' STATUS says an unsynchronized or unknown clock; other beacons' does not")
    func clockNotes() {
        let eid = conf("[beacon]\nformat = \"eddystone-eid\"\nidentity_key_file = \"k.key\"\n", device: "tcp:127.0.0.1:9", backend: "hci")
        let device = DeviceSpec.tcp(host: "127.0.0.1", port: 9)
        let off = LifecycleWording.advertisingStatus(eid, device: device, configPath: "/c", onAir: onAir, clockSynchronized: false)
        let unknown = LifecycleWording.advertisingStatus(eid, device: device, configPath: "/c", onAir: onAir, clockSynchronized: nil)
        #expect(off.hasSuffix("; the system clock is not synchronized: the EIDs will not resolve"))
        #expect(unknown.hasSuffix("; whether the system clock is synchronized is unknown (adjtimex refused): the EIDs resolve only if it is"))
        #expect(!LifecycleWording.advertisingStatus(conf(ibeacon), device: hci0, configPath: "/c", onAir: onAir, clockSynchronized: false).contains("clock"))
    }

    @Test("a confirmed apply: the STATUS line, one line per beacon, the TX power; a measured-power warning once")
    func confirmed() {
        var w = LifecycleWording()
        let result = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended"],
                           beacons: [BeaconOnAir(every: .milliseconds(100), details: ["set 0"], txPower: 0), BeaconOnAir(every: .milliseconds(100), details: [], txPower: 0)])
        let lines = w.confirmed("Advertising 2 beacons", dataOnly: true, result, conf(twoBeacons), device: hci0).compactMap(message)
        #expect(lines[0] == "Advertising 2 beacons (data updated)")
        #expect(lines[1] == "Beacon 1 of 2: E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 1 every 100 ms on hci0 (set 0)")
        #expect(lines[2] == "Beacon 2 of 2: E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 2 every 100 ms on hci0")
        #expect(lines.filter { $0.contains("'s measured_power of -100 dBm at 1 m is 59 dB weaker") }.count == 2)
        #expect(lines.last == "TX power on hci0 as the controller reports it: beacon 1: TX 0 dBm, measured_power -100 dBm at 1 m; beacon 2: TX 0 dBm, measured_power -100 dBm at 1 m")
        let again = w.confirmed("Advertising 2 beacons", dataOnly: false, result, conf(twoBeacons), device: hci0).compactMap(message)
        #expect(again.count == 4 && !again.contains { $0.contains("measured_power of") })
    }
}

@Suite("Retries and PeriodicArming")
struct RetriesTests {
    @Test("the controller's silences power-cycle it the 2nd, 4th, 8th time; on the air they start over")
    func silences() {
        var r = Retries(seed: 1)
        var cycles: [Bool] = []
        for _ in 1...9 { cycles.append(r.unansweredAgain()) }
        #expect(cycles == [false, true, false, true, false, false, false, true, false])
        r.onAir()
        #expect(r.unanswered == 0)
        let first = r.unansweredAgain(), second = r.unansweredAgain()
        #expect(!first && second)
    }

    @Test("another program's takings: the usual delay five times a minute, then the backoff's")
    func takings() {
        var r = Retries(seed: 1)
        var waits: [Duration?] = []
        for k in 0..<6 { waits.append(r.reapplied(at: .seconds(k))) }
        #expect(waits.prefix(5).allSatisfy { $0 == nil } && waits[5] != nil)
        let later = r.reapplied(at: .seconds(200))
        #expect(later == nil, "a minute later the count starts over")
    }

    @Test("each periodic timer armed exactly while wanted; a tick spends it")
    func periodic() {
        var p = PeriodicArming()
        let armed = p.sync([(.telemetry, true, .seconds(10)), (.eidRotation, false, .seconds(1))])
        let still = p.sync([(.telemetry, true, .seconds(10))])
        p.spent(.telemetry)
        let again = p.sync([(.telemetry, true, .seconds(10))])
        let cancelled = p.sync([(.telemetry, false, .seconds(10))])
        #expect(armed == [.armPeriodic(.telemetry, .seconds(10))] && still.isEmpty)
        #expect(again == [.armPeriodic(.telemetry, .seconds(10))] && cancelled == [.cancelPeriodic(.telemetry)])
    }
}

@Suite("AirContent: the clock's notes")
struct AirContentTests {
    @Test("an unknown synchronization said once, an unsynchronized clock warned once until synchronized again")
    func clock() {
        var c = AirContent(cipher: nil, seal: nil)
        let unknown = c.tell(clock: .seconds(1000), synchronized: nil, hasEID: true).compactMap(message)
        #expect(unknown.count == 1 && unknown[0].hasPrefix("Cannot tell whether the system clock is synchronized"))
        let unknownAgain = c.tell(clock: .seconds(1001), synchronized: nil, hasEID: true)
        #expect(c.clockSynchronized == nil && unknownAgain.isEmpty)
        let off = c.tell(clock: .seconds(1002), synchronized: false, hasEID: true)
        #expect(off.count == 1 && c.clockSynchronized == false)
        let offAgain = c.tell(clock: .seconds(1003), synchronized: false, hasEID: true)
        let on = c.tell(clock: .seconds(1004), synchronized: true, hasEID: true).compactMap(message)
        #expect(offAgain.isEmpty && on == ["The system clock is synchronized now"] && c.clockSynchronized == true)
        let noEID = c.tell(clock: .seconds(1005), synchronized: false, hasEID: false)
        #expect(noEID.isEmpty, "without EID beacons: nothing to say")
    }
}
