// The daemon's lifecycle driven by hand: start, reload good and bad, reloads during a failing bring-up, stops during
// an apply, losses, device events, fatal errors — and a random walk that checks the invariants after every event.
import BeaconCore
import BluetoothHCI
@testable import DaemonCore
import HCIHost
import Mgmt
import TestSupport
import Testing

private func config(device: String = "tcp:127.0.0.1:9", minor: Int = 1, backend: String = "auto", uuid: Bool = true) -> BeaconConfiguration {
    let text = """
        [beacon]
        \(uuid ? "uuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"" : "# no uuid yet")
        major = 1
        minor = \(minor)

        [controller]
        device = "\(device)"
        backend = "\(backend)"
        """
    return try! BeaconConfiguration.parse(Array(text.utf8))
}

private let onAir = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended"])
private let refused = BackendFailure(message: "Failed to probe the controller on tcp:127.0.0.1:9: Read Local Version Information (0x1001) → no answer from the controller (timeout)")
private let unanswered = BackendFailure(message: "Failed to probe the controller on hci0: Read Local Version Information (0x1001) → no answer from the controller (timeout)",
                                        unanswered: true)

/// Executes the lifecycle's actions the way Daemon does, against bookkeeping instead of real things, and checks
/// the invariants after every event.
private struct World {
    var lc: Lifecycle
    var timerArmed = false
    var timer: Duration?
    var backendOpen = false
    var backendKind: BackendKind?
    var notified: [[String]] = []
    var actions: [Lifecycle.Action] = []
    var exited: ExitCode?
    var loads = 0
    /// Every RELOADING=1 still waiting for its READY=1.
    var reloadsOwed = 0

    init(_ c: BeaconConfiguration = config()) {
        lc = Lifecycle(config: c, configPath: "/etc/beacond/beacond.conf", seed: 42)
    }

    @discardableResult
    mutating func send(_ e: Lifecycle.Event, sourceLocation: Testing.SourceLocation = #_sourceLocation) -> [Lifecycle.Action] {
        switch e {
        case .configLoaded, .configRefused: loads = max(0, loads - 1)
        default: break
        }
        let out = lc.handle(e)
        actions += out
        for a in out {
            switch a {
            case .armTimer(let d): timerArmed = true; timer = d
            case .cancelTimer: timerArmed = false; timer = nil
            case .open(let k, _): backendOpen = true; backendKind = k
            case .closeBackend: backendOpen = false; backendKind = nil
            case .notify(let n):
                notified.append(n)
                if n.contains("READY=1") { reloadsOwed = 0 }  // one READY=1 ends the reload, however many SIGHUPs came
            case .notifyReloading:
                notified.append(["RELOADING=1"])
                reloadsOwed += 1
            case .exit(let c): exited = c
            case .loadConfig: loads += 1
            default: break
            }
        }
        checkInvariants(after: e, sourceLocation: sourceLocation)
        return out
    }

    /// The one-shot timer fires (it must be armed).
    @discardableResult
    mutating func fire(sourceLocation: Testing.SourceLocation = #_sourceLocation) -> [Lifecycle.Action] {
        #expect(timerArmed, "fired a timer that is not armed", sourceLocation: sourceLocation)
        timerArmed = false
        return send(.timerFired, sourceLocation: sourceLocation)
    }

    func checkInvariants(after e: Lifecycle.Event, sourceLocation: Testing.SourceLocation) {
        switch lc.phase {
        case .exited:
            #expect(exited != nil, sourceLocation: sourceLocation)
            #expect(!backendOpen, "exited with a backend open", sourceLocation: sourceLocation)
        case .idle:
            break
        case .unprovisioned:
            // Nothing on the air and nothing to wait for but a reload or a stop.
            #expect(!backendOpen && !timerArmed, "unprovisioned with a backend or a timer after \(e)", sourceLocation: sourceLocation)
        case .advertising:
            // Nothing armed: the open backend's fd is what moves it on.
            #expect(backendOpen, "advertising without a backend after \(e)", sourceLocation: sourceLocation)
        case .opening, .applying, .reapplyWait, .waiting, .powerCycling, .stopping:
            #expect(timerArmed, "phase \(lc.phase) has no deadline after \(e)", sourceLocation: sourceLocation)
        }
        switch lc.phase {
        case .advertising where loads == 0, .waiting where loads == 0, .unprovisioned where loads == 0:
            // A settled phase, with no config answer outstanding (the executor loads the file at once): no reload
            // may still be owed its READY=1.
            #expect(reloadsOwed == 0, "RELOADING=1 without READY=1 in \(lc.phase) after \(e)", sourceLocation: sourceLocation)
        default: break
        }
    }

    var lastStatus: String? { notified.last(where: { $0.contains { $0.hasPrefix("STATUS=") } })?.first { $0.hasPrefix("STATUS=") } }
    func didNotify(_ s: String) -> Bool { notified.contains { $0.contains(s) } }
}

private func advertising(_ c: BeaconConfiguration = config()) -> World {
    var w = World(c)
    w.send(.start)
    w.send(.opened())
    w.send(.applied(onAir))
    return w
}

@Suite("lifecycle")
struct LifecycleTests {
    @Test("start: probe, apply, READY=1 only once the controller confirmed advertising")
    func start() {
        var w = World()
        let a = w.send(.start)
        #expect(a.contains(.open(.hci, mayBringUp: true)))
        #expect(w.lc.phase == .opening && w.timer == Lifecycle.operationDeadline)
        #expect(w.notified == [["STATUS=Probing the controller on tcp:127.0.0.1:9"]])
        #expect(w.send(.opened()).contains { if case .apply(_, dataOnlyAllowed: false) = $0 { true } else { false } })
        w.send(.applied(onAir))
        #expect(w.lc.phase == .advertising && !w.timerArmed)
        #expect(w.notified.last == ["READY=1", "STATUS=Advertising E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 1 every 100 ms on tcp:127.0.0.1:9 (extended)"])
    }

    @Test("bug: through mgmt on a controller without sets, STATUS names the kernel's 100–150 ms, not the configured interval",
          arguments: [(KernelInterval.legacyNonConnectable, "every 100–150 ms (the kernel's choice)", "sends non-connectable advertising at 100–150 ms"),
                      (.addAdvertisingDefault, "every about 1.28 s (kernel default)", "its default interval (about 1.28 s)")])
    func kernelChosenInterval(kernel: KernelInterval, status: String, warning: String) {
        var w = World()
        w.send(.start)
        w.send(.opened())
        let a = w.send(.applied(OnAir(interval: kernel.typical, details: ["mgmt instance 5"], kernelInterval: kernel)))
        #expect(w.notified.last?.last == "STATUS=Advertising E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 1 \(status) on tcp:127.0.0.1:9 (mgmt instance 5)")
        #expect(a.contains { if case .log(.warning, let m, _) = $0 { m.contains("100 ms is not used") && m.contains(warning) } else { false } })
    }

    @Test("bug (#45): the kernel-chosen interval's warning names the beacons' own interval_ms, not [advertising]'s")
    func kernelChosenIntervalNamesTheBeaconsOwn() throws {
        let c = try BeaconConfiguration.parse(Array("""
            [[beacon]]
            uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
            major = 1
            minor = 1
            interval_ms = 250

            [[beacon]]
            uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
            major = 1
            minor = 2
            interval_ms = 400

            [controller]
            device = "tcp:127.0.0.1:9"
            """.utf8))
        var w = World(c)
        w.send(.start)
        w.send(.opened())
        let kernel = KernelInterval.legacyNonConnectable
        let a = w.send(.applied(OnAir(interval: kernel.typical, details: ["mgmt"], kernelInterval: kernel)))
        let warnings = a.compactMap { if case .log(.warning, let m, _) = $0 { m } else { nil } }
        #expect(warnings.contains { $0.hasPrefix("The configured intervals 250 ms and 400 ms are not used") }, "\(warnings)")
        #expect(!warnings.contains { $0.contains("100 ms") }, "\(warnings)")
    }

    @Test("reload with a good file: RELOADING=1, a data-only apply, READY=1 with the new STATUS")
    func reloadGood() {
        var w = advertising()
        w.send(.hangup)
        #expect(w.notified.last == ["RELOADING=1"] && w.loads == 1)
        let a = w.send(.configLoaded(config(minor: 2)))
        #expect(a.contains { if case .apply(_, dataOnlyAllowed: true) = $0 { true } else { false } })
        #expect(w.notified.last == ["RELOADING=1"])  // nothing before the controller confirmed
        w.send(.applied(onAir))
        #expect(w.notified.last == ["READY=1", "STATUS=Advertising E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 2 every 100 ms on tcp:127.0.0.1:9 (extended)"])
    }

    @Test("reload with a broken file: nothing is applied, READY=1 with STATUS saying what was kept")
    func reloadBroken() {
        var w = advertising()
        w.send(.hangup)
        let error = ConfigError(path: "/etc/beacond/beacond.conf", diagnostics: [ConfigDiagnostic("boom", at: nil)])
        let a = w.send(.configRefused(error))
        #expect(!a.contains { if case .apply = $0 { true } else { false } })
        #expect(w.notified.last?.first == "READY=1")
        #expect(w.lastStatus?.contains("; kept previous configuration: ") == true)
        #expect(w.lc.phase == .advertising)
    }

    @Test("bug: a SIGHUP during a bring-up that fails is answered with READY=1, and STATUS goes on updating")
    func reloadDuringFailingBringUp() {
        var w = World()
        w.send(.start)
        w.send(.openFailed(refused))  // first READY=1 (settled into retrying)
        #expect(w.notified.last?.first == "READY=1")
        w.fire()                      // the retry: opening again
        #expect(w.lc.phase == .opening)
        w.send(.hangup)
        w.send(.configLoaded(config(minor: 2)))
        #expect(w.reloadsOwed == 1)
        w.send(.openFailed(refused))  // the bring-up fails while the reload waits for it
        #expect(w.reloadsOwed == 0)
        #expect(w.notified.last?.first == "READY=1")
        #expect(w.lastStatus?.contains("retrying in") == true)
        let n = w.notified.count
        w.fire()
        w.send(.openFailed(refused))
        #expect(w.notified.count > n, "STATUS stopped updating after the reload")
    }

    @Test("reload during an apply: the new config is applied after it, then READY=1")
    func reloadDuringApply() {
        var w = World()
        w.send(.start)
        w.send(.opened())
        w.send(.hangup)
        w.send(.configLoaded(config(minor: 3)))
        let a = w.send(.applied(onAir))
        #expect(a.contains { if case .apply(let r, true) = $0 { r.beacons.first?.data == config(minor: 3).beacon?.advertisingData } else { false } })
        #expect(w.reloadsOwed == 1)
        w.send(.applied(onAir))
        #expect(w.reloadsOwed == 0 && w.lastStatus?.contains("minor 3") == true)
    }

    @Test("reload while waiting for the controller: READY=1 at once, the next attempt uses the new file")
    func reloadWhileWaiting() {
        var w = World()
        w.send(.start)
        w.send(.openFailed(refused))
        w.send(.hangup)
        w.send(.configLoaded(config(minor: 4)))
        #expect(w.reloadsOwed == 0)
        w.fire()
        w.send(.opened())
        #expect(w.actions.last.map { if case .armTimer = $0 { true } else { false } } == true)
        #expect(w.actions.contains { if case .apply(let r, _) = $0 { r.beacons.first?.data == config(minor: 4).beacon?.advertisingData } else { false } })
    }

    @Test("bug: a stop during an apply waits for the apply's answer, then stops: no enable after the disable")
    func stopDuringApply() {
        var w = World()
        w.send(.start)
        w.send(.opened())  // applying: data sent, enable not yet
        let a = w.send(.terminate(signal: "SIGTERM"))
        #expect(w.notified.last == ["STOPPING=1", "STATUS=Stopping: disabling advertising"])
        #expect(!a.contains(.stopAdvertising), "a disable now would be overtaken by the apply's enable")
        #expect(w.timer == Lifecycle.stopDeadline)
        #expect(w.send(.applied(onAir)) == [.stopAdvertising])
        let b = w.send(.stopped)
        #expect(b == [.closeBackend, .cancelTimer, .exit(.success)])
        #expect(w.lc.phase == .exited(.success))
    }

    @Test("a stop during a probe waits for it; a failed probe still ends in stopAdvertising")
    func stopDuringOpen() {
        var w = World()
        w.send(.start)
        w.send(.terminate(signal: "SIGINT"))
        #expect(w.send(.openFailed(refused)) == [.stopAdvertising])
        w.send(.stopped)
        #expect(w.exited == .success)
    }

    @Test("a stop that the controller does not confirm exits after the deadline")
    func stopDeadline() {
        var w = advertising()
        #expect(w.send(.terminate(signal: "SIGTERM")).contains(.stopAdvertising))
        w.fire()
        #expect(w.exited == .success && !w.backendOpen)
        #expect(w.send(.stopped) == [] && w.send(.hangup) == [])
    }

    @Test("a stop with no backend still asks the executor to remove what the kernel keeps (a mgmt instance)")
    func stopWithoutBackend() {
        var w = World(config(device: "hci0"))
        w.send(.start)
        w.send(.openFailed(BackendFailure(message: "Waiting for hci0 to be powered on", level: .notice)))
        #expect(!w.backendOpen)
        #expect(w.send(.terminate(signal: "SIGTERM")).contains(.stopAdvertising))
        w.send(.stopped)
        #expect(w.exited == .success)
    }

    @Test("loss: close, retry with backoff, STATUS says when")
    func loss() {
        var w = advertising()
        let a = w.send(.lost(BackendFailure(message: "Lost the controller (tcp:127.0.0.1:9: connection closed)", level: .warning)))
        #expect(a.first == .closeBackend)
        #expect(w.lc.phase == .waiting)
        #expect(w.lastStatus?.hasPrefix("STATUS=Lost the controller (tcp:127.0.0.1:9: connection closed), retrying in ") == true)
        w.fire()
        #expect(w.lc.phase == .opening && w.backendOpen)
    }

    @Test("bug: a hung controller (no credits) is a loss like any other: reopened, said in STATUS")
    func hung() {
        var w = World()
        w.send(.start)
        w.send(.openFailed(BackendFailure(message: "Failed to probe the controller on tcp:127.0.0.1:9: Read Local Version Information (0x1001) → not sent: the controller gave no command credit back within 4 s and is treated as hung")))
        #expect(w.lastStatus?.contains("treated as hung, retrying in") == true)
        w.fire()
        #expect(w.lc.phase == .opening)
    }

    @Test("bug: a connection that stopped connectable advertising puts it back")
    func reapplyAfterConnection() {
        var w = advertising()
        w.send(.reapply(reason: "Connectable advertising on tcp:127.0.0.1:9 stopped: a central connected", delay: .zero, fields: [], at: .microseconds(1)))
        #expect(w.lc.phase == .reapplyWait && w.timer == .zero)
        #expect(w.fire().contains { if case .apply(_, dataOnlyAllowed: false) = $0 { true } else { false } })
        w.send(.applied(onAir))
        #expect(w.lc.phase == .advertising)
    }

    @Test("more than five re-applies a minute back off")
    func reapplyStorm() {
        var w = advertising()
        for i in 0..<6 {
            w.send(.reapply(reason: "Another program sent LE Set Advertising Enable (0x200A) to hci0", delay: .milliseconds(100), fields: [], at: .seconds(i)))
            if i < 5 { #expect(w.timer == .milliseconds(100)) }
            w.fire()
            w.send(.applied(onAir))
        }
        #expect(w.actions.contains { if case .log(.warning, let m, _) = $0 { m.contains(", again; re-applying the beacon in") } else { false } })
    }

    @Test("an operation that never answers is cut off by the operation deadline")
    func operationDeadline() {
        var w = World()
        w.send(.start)
        w.fire()
        #expect(w.lc.phase == .waiting && !w.backendOpen)
        #expect(w.lastStatus?.contains("did not open the controller within 45 s") == true)
    }

    @Test("fatal failures exit with their code and say so")
    func fatal() {
        var w = World()
        w.send(.start)
        w.send(.openFailed(BackendFailure(message: "Cannot use hci0: this kernel or network namespace has no Bluetooth (AF_BLUETOOTH)", fatal: .unavailable)))
        #expect(w.exited == .unavailable)
        #expect(w.didNotify("EXIT_STATUS=69"))
    }

    @Test("backend auto: mgmt refused for lack of CAP_NET_ADMIN falls back to raw HCI once")
    func mgmtRefused() {
        var w = World(config(device: "hci0"))
        #expect(w.send(.start).contains(.open(.mgmt, mayBringUp: true)))
        let a = w.send(.openFailed(BackendFailure(message: "Failed to read the controller information of hci0: Read Controller Information (0x0004) → Permission Denied (0x14)", fatal: .noPermission)))
        #expect(a.contains(.open(.hci, mayBringUp: true)))
        #expect(w.exited == nil)
    }

    @Test("bug: backend auto, an hci0 whose kernel setup failed (mgmt: Invalid Index) is tried through raw HCI, which brings it up")
    func mgmtInvalidIndexOfAnExistingDevice() {
        var w = World(config(device: "hci0"))
        #expect(w.send(.start).contains(.open(.mgmt, mayBringUp: true)))
        let a = w.send(.openFailed(BackendFailure(message: "hci0 exists, but the kernel's management interface calls it an invalid index", level: .warning,
                                                  rawHCIMayWork: true)))
        #expect(a.contains(.open(.hci, mayBringUp: true)))
        #expect(a.contains { if case .log(_, let m, _) = $0 { m.contains("invalid index") && m.contains("falls back to raw HCI") } else { false } })
        // Explicit backend = "mgmt": no fallback, a retry with backoff that says what it sees.
        var m = World(config(device: "hci0", backend: "mgmt"))
        m.send(.start)
        let b = m.send(.openFailed(BackendFailure(message: "hci0 exists, but the kernel's management interface calls it an invalid index", level: .warning,
                                                  rawHCIMayWork: true)))
        #expect(!b.contains { if case .open = $0 { true } else { false } })
        #expect(m.lastStatus?.contains("invalid index, retrying in") == true)
    }

    @Test("kernel device events: down closes and waits without bringing it up; up opens at once")
    func deviceEvents() {
        var w = advertising(config(device: "hci0", backend: "hci"))
        w.send(.device(.down))
        #expect(!w.backendOpen && w.lc.phase == .waiting)
        #expect(w.lastStatus?.hasPrefix("STATUS=hci0 was taken down; waiting for it to come up, retrying in") == true)
        w.fire()
        #expect(w.actions.last(where: { if case .open = $0 { true } else { false } }) == .open(.hci, mayBringUp: false))
        w.send(.openFailed(BackendFailure(message: "Waiting for hci0 to come up", level: .notice)))
        let a = w.send(.device(.up))
        #expect(a.contains(.cancelTimer) && a.contains(.open(.hci, mayBringUp: true)))
        w.send(.opened())
        w.send(.applied(onAir))
        w.send(.device(.unregistered))
        #expect(w.lastStatus?.hasPrefix("STATUS=hci0 was removed; waiting for it to appear") == true)
    }

    @Test("a reload that changes the controller stops on the old one first, then opens the new one")
    func controllerChange() {
        var w = advertising()
        w.send(.hangup)
        #expect(w.send(.configLoaded(config(device: "tcp:127.0.0.1:10"))).contains(.stopAdvertising))
        let a = w.send(.stopped)
        #expect(a.contains(.closeBackend) && a.contains(.open(.hci, mayBringUp: true)))
        #expect(w.lc.device == .tcp(host: "127.0.0.1", port: 10))
        // The reload ends when the beacon is on the air on the new controller (what `beacond reload` waits for).
        #expect(w.reloadsOwed == 1)
        w.send(.opened())
        w.send(.applied(onAir))
        #expect(w.reloadsOwed == 0)
    }

    @Test("bug: a SIGHUP during the stop of a controller change was dropped; it is loaded, and the new controller gets that edit")
    func hangupDuringStop() {
        var w = advertising()
        w.send(.hangup)
        w.send(.configLoaded(config(device: "tcp:127.0.0.1:10")))
        #expect(w.lc.phase == .stopping)
        let a = w.send(.hangup)
        #expect(a.contains(.notifyReloading) && a.contains(.loadConfig), "\(a)")
        w.send(.configLoaded(config(device: "tcp:127.0.0.1:10", minor: 3)))
        #expect(w.lc.phase == .stopping, "the stop on the old controller goes on")
        let b = w.send(.stopped)
        #expect(b.contains(.open(.hci, mayBringUp: true)))
        w.send(.opened())
        let applied = w.actions.last { if case .apply = $0 { true } else { false } }
        if case .apply(let s, _)? = applied {
            #expect(s.beacons.first?.data == config(minor: 3).beacons.first?.beacon.advertisingData, "the second edit is what goes on the air")
        } else { Issue.record("no apply after the new controller opened") }
        w.send(.applied(onAir))
        #expect(w.reloadsOwed == 0 && w.lc.phase == .advertising)
    }

    @Test("a SIGHUP during the stop for exiting is not loaded, but said so in the journal")
    func hangupDuringExit() {
        var w = advertising()
        w.send(.terminate(signal: "SIGTERM"))
        let a = w.send(.hangup)
        #expect(!a.contains(.loadConfig) && !a.contains(.notifyReloading))
        #expect(a.contains { if case .log(_, let m, _) = $0 { m.contains("SIGHUP") } else { false } }, "\(a)")
    }

    @Test("bug: a reload that changes the controller while the old one is open but not advertising stops there first")
    func controllerChangeWhileReapplying() {
        var w = advertising()
        w.send(.reapply(reason: "Another program sent Reset", delay: .milliseconds(500), fields: [], at: .microseconds(1)))
        #expect(w.lc.phase == .reapplyWait)
        w.send(.hangup)
        let a = w.send(.configLoaded(config(device: "tcp:127.0.0.1:10")))
        #expect(a.contains(.stopAdvertising) && !a.contains(.closeBackend), "what beacond put on the old controller must come off there: \(a)")
        let b = w.send(.stopped)
        #expect(b.contains(.closeBackend) && b.contains(.open(.hci, mayBringUp: true)))
    }

    @Test("a config without a uuid (a fresh install): READY=1 with a STATUS that says what to do, the controller untouched")
    func unprovisionedStart() {
        var w = World(config(uuid: false))
        let a = w.send(.start)
        #expect(w.lc.phase == .unprovisioned)
        #expect(!a.contains { if case .open = $0 { true } else { false } })
        #expect(w.didNotify("READY=1"))
        #expect(w.lastStatus?.hasPrefix("STATUS=Not advertising: [beacon] in /etc/beacond/beacond.conf:1 has no uuid yet; set one with 'beacond gen-uuid --set /etc/beacond/beacond.conf'") == true, "\(w.lastStatus ?? "")")
        // Kernel events and a reload with the file still unprovisioned change nothing.
        w.send(.device(.up))
        w.send(.hangup)
        w.send(.configLoaded(config(uuid: false)))
        #expect(w.lc.phase == .unprovisioned && w.reloadsOwed == 0)
        // The uuid is set and the unit reloaded: now beacond opens the controller and advertises.
        w.send(.hangup)
        let opened = w.send(.configLoaded(config()))
        #expect(opened.contains(.open(.hci, mayBringUp: true)))
        w.send(.opened())
        w.send(.applied(onAir))
        #expect(w.lc.phase == .advertising && w.reloadsOwed == 0)
        #expect(w.lastStatus?.hasPrefix("STATUS=Advertising E2C56DB5") == true)
    }

    @Test("a reload that removes the uuid takes the beacon off the air, then waits unprovisioned")
    func unprovisionByReload() {
        var w = advertising()
        w.send(.hangup)
        #expect(w.send(.configLoaded(config(uuid: false))).contains(.stopAdvertising))
        #expect(w.lc.phase == .stopping)
        w.send(.stopped)
        #expect(w.lc.phase == .unprovisioned && !w.backendOpen && w.reloadsOwed == 0)
        #expect(w.lastStatus?.hasPrefix("STATUS=Not advertising") == true)
        // SIGTERM there: what the kernel may still keep for beacond is removed, then exit 0.
        #expect(w.send(.terminate(signal: "SIGTERM")).contains(.stopAdvertising))
        w.send(.stopped)
        #expect(w.exited == .success)
    }

    @Test("what is on the air changed by itself (the public address while another program scans): STATUS says so, nothing else happens")
    func onAirChangedByItself() {
        var w = advertising(config(device: "hci0", backend: "hci"))
        let a = w.send(.onAirChanged(OnAir(interval: AdvertisingInterval(units: 160)!, details: ["legacy", "public address while another program scans on hci0"])))
        #expect(w.lastStatus?.contains("public address while another program scans on hci0") == true)
        #expect(!a.contains { if case .apply = $0 { true } else if case .open = $0 { true } else { false } })
        #expect(w.lc.phase == .advertising)
        // Not advertising (an apply in flight): the apply's own answer says what is on the air.
        var v = World(config(device: "hci0", backend: "hci"))
        v.send(.start)
        v.send(.opened())
        #expect(v.send(.onAirChanged(onAir)).isEmpty && v.lc.phase == .applying)
    }

    @Test("random walks: every phase keeps a way out, and every RELOADING=1 gets its READY=1")
    func randomWalk() {
        var rng = SplitMix(seed: 2024)
        for walk in 0..<200 {
            var w = World(walk % 2 == 0 ? config() : config(device: "hci0"))
            w.send(.start)
            for _ in 0..<60 {
                if case .exited = w.lc.phase { break }
                let waiting = w.lc.isWaitingForBackend
                var choices: [Lifecycle.Event] = [.hangup, .device(.up), .device(.down), .device(.unregistered)]
                if waiting {
                    switch w.lc.phase {
                    case .opening: choices += [.opened(), .opened(ControllerTraits(advertisingSets: rng.next() % 2 == 0)), .openFailed(refused), .openFailed(unanswered)]
                    case .applying: choices += [.applied(onAir), .applyFailed(refused), .applyFailed(unanswered)]
                    case .powerCycling: choices += [.powerCycled(nil), .powerCycled(refused)]
                    default: choices += [.stopped, .powerCycled(nil)]
                    }
                }
                if w.backendOpen { choices += [.lost(refused), .lost(unanswered), .onAirChanged(onAir), .reapply(reason: "r", delay: .zero, fields: [], at: .microseconds(rng.next() % 1_000_000_000))] }
                if rng.next() % 40 == 0 { choices.append(.terminate(signal: "SIGTERM")) }
                if w.timerArmed && rng.next() % 3 == 0 {
                    w.fire()
                } else {
                    let e = choices[Int(rng.next() % UInt64(choices.count))]
                    w.send(e)
                }
                // The executor answers a config load at once, with a good or a broken file.
                while w.loads > 0 {
                    w.send(rng.next() % 3 == 0 ? .configRefused(ConfigError(path: "x", diagnostics: []))
                                               : .configLoaded(config(device: walk % 2 == 0 ? "tcp:127.0.0.1:9" : "hci0", minor: Int(rng.next() % 5),
                                                                      uuid: rng.next() % 6 != 0)))
                }
            }
        }
    }
}
