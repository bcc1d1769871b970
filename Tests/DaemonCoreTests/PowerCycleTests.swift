// A kernel controller that answers nothing again and again (a Pi's "command tx timeout" lock-up): reopening cannot
// cure it, a power cycle through the kernel may. The 2nd, 4th, 8th … such failure in a row power-cycles the device;
// the count starts again once the beacons are on the air. Issue #31.
import BeaconCore
import BluetoothHCI
@testable import DaemonCore
import HCIHost
import Testing

private func config(device: String) -> BeaconConfiguration {
    let text = """
        [controller]
        device = "\(device)"
        backend = "hci"

        [beacon]
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        major = 1
        minor = 1
        """
    return try! BeaconConfiguration.parse(Array(text.utf8))
}

private let silent = BackendFailure(message: "Failed to probe the controller on hci0: Read Local Version Information (0x1001) → no answer from the controller (timeout)",
                                    unanswered: true)
private let refusedOne = BackendFailure(message: "Failed to enable advertising on hci0: LE Set Advertising Enable (0x200A) → Command Disallowed (0x0C)")
private let onAir = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["legacy"])

/// A lifecycle on hci0 whose controller answered nothing twice: power cycling.
private func powerCycling() -> Lifecycle {
    var lc = Lifecycle(config: config(device: "hci0"), configPath: "/etc/beacond/beacond.conf", seed: 7)
    _ = lc.handle(.start)
    _ = lc.handle(.openFailed(silent))
    _ = lc.handle(.timerFired)
    _ = lc.handle(.openFailed(silent))
    return lc
}

private func cycles(_ a: [Lifecycle.Action]) -> Bool { a.contains(.powerCycle) }
private func opens(_ a: [Lifecycle.Action]) -> Bool { a.contains { if case .open = $0 { true } else { false } } }
private func logs(_ a: [Lifecycle.Action]) -> String {
    a.compactMap { if case .log(_, let m, _) = $0 { m } else { nil } }.joined(separator: "\n")
}

@Suite("power cycling a kernel controller that answers nothing")
struct PowerCycleTests {
    @Test("the 2nd unanswered failure in a row power-cycles hci0, then the 4th, the 8th; an answered failure does not count, and the beacons on the air start the count again")
    func escalation() {
        var lc = Lifecycle(config: config(device: "hci0"), configPath: "/etc/beacond/beacond.conf", seed: 7)
        _ = lc.handle(.start)
        let first = lc.handle(.openFailed(silent))
        #expect(!cycles(first) && lc.phase == .waiting)
        _ = lc.handle(.timerFired)
        _ = lc.handle(.openFailed(refusedOne))  // the controller answered: not counted
        #expect(lc.phase == .waiting)
        _ = lc.handle(.timerFired)
        let second = lc.handle(.openFailed(silent))
        #expect(cycles(second) && lc.phase == .powerCycling && lc.isWaitingForBackend)
        #expect(second.contains { if case .armTimer = $0 { true } else { false } }, "the power cycle has a deadline")
        #expect(logs(second).contains("answered nothing 2 times in a row: taking hci0 down and up again"), "\(logs(second))")
        #expect(second.contains { if case .notify(let n) = $0 { n.contains("STATUS=Power cycling hci0: the controller answered nothing 2 times in a row") } else { false } })
        // Down and up: the kernel's "up" opens it at once (or the 1 s timer, without device events).
        let back = lc.handle(.powerCycled(nil))
        #expect(!opens(back) && lc.phase == .waiting && back.contains(.armTimer(.seconds(1))))
        #expect(!opens(lc.handle(.device(.down))))
        #expect(opens(lc.handle(.device(.up))) && lc.phase == .opening)
        // The 3rd: a retry; the 4th: a power cycle again.
        #expect(!cycles(lc.handle(.openFailed(silent))))
        _ = lc.handle(.timerFired)
        #expect(cycles(lc.handle(.openFailed(silent))))
        _ = lc.handle(.powerCycled(nil))
        #expect(opens(lc.handle(.timerFired)))
        for _ in 5...7 {
            #expect(!cycles(lc.handle(.openFailed(silent))))
            _ = lc.handle(.timerFired)
        }
        #expect(cycles(lc.handle(.openFailed(silent))))
        _ = lc.handle(.powerCycled(nil))
        _ = lc.handle(.timerFired)
        // On the air: the count starts again, so the next lock-up is power-cycled at its 2nd failure.
        _ = lc.handle(.opened())
        _ = lc.handle(.applied(onAir))
        #expect(lc.phase == .advertising)
        #expect(!cycles(lc.handle(.lost(silent))))
        _ = lc.handle(.timerFired)
        #expect(cycles(lc.handle(.openFailed(silent))))
    }

    @Test("a power cycle that fails, or that the kernel does not answer in time, is said and retried with backoff")
    func failedPowerCycle() {
        var lc = powerCycling()
        #expect(lc.phase == .powerCycling)
        let a = lc.handle(.powerCycled(BackendFailure(message: "hci0: ioctl(HCIDEVDOWN) failed: Operation not permitted (needs CAP_NET_ADMIN)")))
        #expect(lc.phase == .waiting && logs(a).contains("Failed to power cycle hci0: hci0: ioctl(HCIDEVDOWN)"), "\(logs(a))")
        _ = lc.handle(.timerFired)
        _ = lc.handle(.openFailed(silent))
        _ = lc.handle(.timerFired)
        #expect(cycles(lc.handle(.openFailed(silent))))
        let late = lc.handle(.timerFired)  // the operation deadline
        #expect(lc.phase == .waiting && logs(late).contains("Failed to power cycle hci0: the kernel did not answer within 45 s"), "\(logs(late))")
        // Its answer after the deadline changes nothing.
        #expect(lc.handle(.powerCycled(nil)).isEmpty && lc.phase == .waiting)
    }

    @Test("SIGTERM during a power cycle waits for it (the adapter is not left powered off), then stops and exits")
    func terminateDuringPowerCycle() {
        var lc = powerCycling()
        #expect(lc.phase == .powerCycling)
        let t = lc.handle(.terminate(signal: "SIGTERM"))
        #expect(!t.contains(.stopAdvertising) && lc.phase == .stopping)
        #expect(lc.handle(.powerCycled(nil)).contains(.stopAdvertising))
        _ = lc.handle(.stopped)
        #expect(lc.phase == .exited(.success))
    }

    @Test("a controller beacond owns (H4) is reopened and reset, never power-cycled")
    func ownedController() {
        var lc = Lifecycle(config: config(device: "tcp:127.0.0.1:9"), configPath: "/etc/beacond/beacond.conf", seed: 7)
        _ = lc.handle(.start)
        for _ in 0..<8 {
            #expect(!cycles(lc.handle(.openFailed(silent))))
            _ = lc.handle(.timerFired)
        }
    }
}
