// A random walk through the lifecycle with every kind of event: the backend's answers and losses, reloads that
// move the device, telemetry, address-rotation and clock ticks (synchronized, not, unknown), clock steps between
// ticks, and stops. After every event: each phase keeps a way out, every RELOADING=1 gets its READY=1, and each
// periodic timer is armed exactly while the config wants it.
import AESCipher
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import TestSupport
import Testing

private func keyed(_ text: String) -> BeaconConfiguration {
    var c = try! BeaconConfiguration.parse(Array(text.utf8))
    for k in c.beacons.indices {
        if case .eddystoneEID(var e) = c.beacons[k].beacon {
            e.key = IdentityKey([UInt8](repeating: 7, count: 16))
            c.beacons[k].beacon = .eddystoneEID(e)
        }
        if case .bthome(var b) = c.beacons[k].beacon, b.encrypted {
            b.bindkey = BindKey(hex: "0123456789abcdeffedcba9876543210")
            c.beacons[k].beacon = .bthome(b)
        }
    }
    return c
}

private let devices = ["tcp:127.0.0.1:9", "hci0", "hci1"]

/// Configs with every periodic job: telemetry beside its UID, a rotating address, an EID beacon; and a plain one.
private func walkConfig(_ n: UInt64, device: String) -> BeaconConfiguration {
    let ib = "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = \(n % 7)\n"
    let uid = "[[beacon]]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1b2c3d4e5f6\"\n"
    let tlm = "[[beacon]]\nformat = \"eddystone-tlm\"\n"
    let eid = "[[beacon]]\nformat = \"eddystone-eid\"\nidentity_key_file = \"k.key\"\nrotation_exponent = \(n % 3 + 2)\n"
    let controller = "[controller]\ndevice = \"\(device)\"\n"
    let selfReport = "[[beacon]]\nformat = \"bthome\"\nbindkey_file = \"home.key\"\n"
    switch n % 5 {
    case 0: return keyed(uid + tlm + controller)
    case 1: return keyed(ib + "address = \"rotating\"\n" + ib.replacingOccurrences(of: "minor = ", with: "minor = 1") + controller)
    case 2: return keyed(ib + eid + controller)
    case 3: return keyed(ib + selfReport + eid + controller)
    default: return keyed(ib + uid + tlm + eid + "[advertising]\naddress = \"rotating\"\n" + controller)
    }
}

private extension String {
    func replacingOccurrences(of a: String, with b: String) -> String { split(separator: a, omittingEmptySubsequences: false).joined(separator: b) }
}

private struct Walker {
    var lc: Lifecycle
    var timerArmed = false
    var backendOpen = false
    var periodic: Set<Lifecycle.PeriodicTimer> = []
    var loads = 0
    var reloadsOwed = 0
    var exited = false
    /// Supplies the self-report asked for and not answered yet.
    var suppliesOwed = 0

    mutating func send(_ e: Lifecycle.Event) {
        switch e {
        case .configLoaded, .configRefused: loads = max(0, loads - 1)
        case .selfReportSupplied: suppliesOwed = max(0, suppliesOwed - 1)
        // A tick spends its timer.
        case .telemetry: periodic.remove(.telemetry)
        case .addressPeriod: periodic.remove(.addressRotation)
        case .clock: periodic.remove(.eidRotation)
        default: break
        }
        for a in lc.handle(e) {
            switch a {
            case .armTimer: timerArmed = true
            case .cancelTimer: timerArmed = false
            case .open: backendOpen = true
            case .closeBackend: backendOpen = false
            case .notify(let n) where n.contains("READY=1"): reloadsOwed = 0
            case .notifyReloading: reloadsOwed += 1
            case .exit: exited = true
            case .loadConfig: loads += 1
            case .supplySelfReport: suppliesOwed += 1
            case .apply(let schedule, _):
                // An encrypted self-report never goes out in plaintext, held or not (issue #52).
                if lc.config.beacons.contains(where: { $0.beacon.bthome?.encrypted == true }) {
                    for b in schedule.beacons where b.data.bytes.count > 8 && b.data.bytes[4...6] == [0x16, 0xD2, 0xFC] {
                        #expect(b.data.bytes[7] & 1 == 1, "a plaintext self-report after \(e)")
                    }
                }
            case .armPeriodic(let t, _):
                #expect(!periodic.contains(t), "\(t) armed twice after \(e)")
                periodic.insert(t)
            case .cancelPeriodic(let t):
                #expect(periodic.contains(t), "\(t) cancelled while not armed after \(e)")
                periodic.remove(t)
            default: break
            }
        }
        check(after: e)
    }

    func check(after e: Lifecycle.Event) {
        if exited { return }
        switch lc.phase {
        case .opening, .applying, .reapplyWait, .waiting, .powerCycling, .stopping:
            #expect(timerArmed, "phase \(lc.phase) has no deadline after \(e)")
        case .advertising:
            #expect(backendOpen, "advertising without a backend after \(e)")
        default: break
        }
        if loads == 0, [.advertising, .waiting, .unprovisioned].contains(lc.phase) {
            #expect(reloadsOwed == 0, "RELOADING=1 without READY=1 in \(lc.phase) after \(e)")
        }
        var wanted: Set<Lifecycle.PeriodicTimer> = []
        if lc.hasTelemetry { wanted.insert(.telemetry) }
        if lc.rotatesAddress { wanted.insert(.addressRotation) }
        if lc.hasEID { wanted.insert(.eidRotation) }
        #expect(periodic == wanted, "periodic timers \(periodic), wanted \(wanted), after \(e)")
    }
}


@Suite("lifecycle random walk with every event")
struct RandomWalkTests {
    @Test("telemetry, address and clock ticks, clock steps and device changes keep every invariant")
    func walk() {
        var rng = SplitMix(seed: 34)
        let onAir = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["extended"])
        // A legacy controller refusing the random address: the first beacon on the air, the others paused.
        let paused = OnAir(interval: AdvertisingInterval(units: 160)!, details: ["legacy"],
                           beacons: [BeaconOnAir(every: .milliseconds(100), details: []), BeaconOnAir(every: .zero, details: [], paused: "another program scans")],
                           addresses: [.public, nil], addressesHeldBack: "another program scans")
        let address = BluetoothAddress(parsing: "C6:12:34:56:78:9A")!
        let seal: CCMSeal = { key, nonce, plaintext in try AESCCM.seal(plaintext, key: key, nonce: nonce) }
        let refused = BackendFailure(message: "refused")
        let unanswered = BackendFailure(message: "no answer", unanswered: true)
        var sawEach: Set<String> = []
        for walk in 0..<150 {
            var w = Walker(lc: Lifecycle(config: walkConfig(UInt64(walk), device: devices[walk % 3]), configPath: "/c", seed: UInt64(walk),
                                         cipher: { k, b in try AES128.encrypt(b, key: k) }, seal: seal))
            var wall: UInt64 = 1_700_000_000
            w.send(.clock(sinceEpoch: .seconds(wall), synchronized: true))
            w.send(.start)
            for _ in 0..<80 {
                if w.exited { break }
                var choices: [Lifecycle.Event] = [.hangup, .device(.up), .device(.down), .device(.unregistered)]
                if w.lc.isWaitingForBackend {
                    switch w.lc.phase {
                    case .opening: choices += [.opened(), .opened(ControllerTraits(advertisingSets: rng.next() % 2 == 0)), .openFailed(refused), .openFailed(unanswered)]
                    case .applying: choices += [.applied(onAir), .applyFailed(refused), .applyFailed(unanswered)]
                    case .powerCycling: choices += [.powerCycled(nil), .powerCycled(refused)]
                    default: choices += [.stopped, .powerCycled(nil)]
                    }
                }
                if w.backendOpen { choices += [.lost(refused), .onAirChanged(onAir), .onAirChanged(paused)] }
                // The state directory's answers: counters kept (the clock at, behind or far behind them), damaged, full.
                if w.suppliesOwed > 0 {
                    let floor = UInt32(truncatingIfNeeded: wall)
                    choices += [.selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: floor, limit: floor + 8), clock: floor)),
                                .selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: floor + 5, limit: floor + 13), clock: floor)),
                                .selfReportSupplied(SelfReportSupply(address: address, counters: CounterReservation(floor: floor, limit: floor + 8), clock: 5)),
                                .selfReportSupplied(SelfReportSupply(address: address, failure: "bthome-counters:2: not an address followed by a counter")),
                                .selfReportSupplied(SelfReportSupply(address: address, failure: "Cannot keep the BTHome counters: No space left on device"))]
                }
                if w.periodic.contains(.telemetry) { choices.append(.telemetry(Telemetry())) }
                if w.periodic.contains(.addressRotation) { choices.append(.addressPeriod) }
                // A boundary tick, or a step of the clock (either way, at any time), with every answer about its sync.
                wall = rng.next() % 5 == 0 ? wall &- rng.next() % 5000 : wall + rng.next() % 300
                let sync: Bool? = [true, false, nil][Int(rng.next() % 3)]
                choices.append(.clock(sinceEpoch: .seconds(wall), synchronized: sync))
                if rng.next() % 50 == 0 { choices.append(.terminate(signal: "SIGTERM")) }
                if w.timerArmed && rng.next() % 3 == 0 {
                    w.timerArmed = false
                    w.send(.timerFired)
                } else {
                    let e = choices[Int(rng.next() % UInt64(choices.count))]
                    sawEach.insert("\(e)".prefix { $0 != "(" }.description)
                    w.send(e)
                }
                // The executor answers a load at once: a good file (maybe on another device, maybe other jobs) or a broken one.
                while w.loads > 0 {
                    w.send(rng.next() % 4 == 0 ? .configRefused(ConfigError(path: "x", diagnostics: []))
                                               : .configLoaded(walkConfig(rng.next(), device: devices[Int(rng.next() % 3)])))
                }
            }
        }
        #expect(sawEach.isSuperset(of: ["telemetry", "addressPeriod", "clock", "hangup", "applied", "lost", "selfReportSupplied", "onAirChanged"]), "\(sawEach)")
    }
}
