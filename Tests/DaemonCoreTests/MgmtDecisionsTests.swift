// The mgmt backend's decisions without a kernel: opening (information, power, features), what events mean, what
// refusals say, removing from a powered-off adapter, and the kernel's interval model in what is on the air.
import BeaconCore
import BluetoothHCI
@testable import DaemonCore
import HCIHost
import Mgmt
import Testing

/// Read Controller Information's reply: address, version 9 (5.0), manufacturer 2, supported settings (LE: bit 9),
/// current settings.
private func information(current: UInt32, le: Bool = true) -> [UInt8] {
    let supported: UInt32 = le ? 0xFFFF : 0x01FF
    func le32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] }
    return [1, 2, 3, 4, 5, 6, 9, 2, 0] + le32(supported) + le32(current) + [0, 0, 0] + [UInt8](repeating: 0, count: 260)
}

/// Read Advertising Features' reply: supported flags, data sizes 31, `max` instances, none listed.
private func features(offload: Bool, max: UInt8 = 5) -> [UInt8] {
    let flags: UInt32 = 1 << 10 | (offload ? 1 << 11 : 0)  // TX power can be set; advertising sets when offloaded
    return [UInt8(flags & 0xFF), UInt8(flags >> 8 & 0xFF), 0, 0, 31, 31, max, 0]
}

private func request(_ ms: Int) -> AdvertisingRequest {
    AdvertisingRequest(data: try! AdvertisingData(raw: [0x02, 0x01, 0x06, 0x03, 0xFF, 0x01, 0x02]), type: .nonConnectableUndirected,
                       interval: AdvertisingInterval(milliseconds: ms)!, txPower: nil)
}

private func applied(_ offload: Bool, _ requests: [AdvertisingRequest]) throws -> MgmtAdvertiser {
    var a = MgmtAdvertiser(device: "hci0", features: try MgmtAdvertisingFeatures(returnParameters: features(offload: offload)), ours: [])
    guard case .send(let steps) = a.apply(requests, dataOnlyAllowed: false) else { throw Failure() }
    _ = a.finished(.success(steps.map { _ in [5, 0xFC] }))
    return a
}

private struct Failure: Error {}

@Suite("mgmt decisions")
struct MgmtDecisionsTests {
    @Test("a powered controller: information, then features, then open")
    func openPowered() throws {
        var o = MgmtOpening(device: "hci0", mayPowerOn: true)
        #expect(o.first == .send(.readControllerInformation))
        #expect(o.answered(.readControllerInformation, .success(information(current: 0x201))) == .send(.readAdvertisingFeatures))
        guard case .opened(let info, let f) = o.answered(.readAdvertisingFeatures, .success(features(offload: true))) else {
            Issue.record("not opened")
            return
        }
        #expect(info.manufacturer == 2 && f.supportedFlags.contains(.hardwareOffload))
    }

    @Test("powered off: powered on when beacond may (and said), else it waits")
    func openPoweredOff() {
        var o = MgmtOpening(device: "hci0", mayPowerOn: true)
        #expect(o.answered(.readControllerInformation, .success(information(current: 0x200))) == .send(.setPowered(true)))
        #expect(o.answered(.setPowered(true), .success([])) == .poweredOn(then: .readAdvertisingFeatures))
        #expect(o.answered(.setPowered(true), .failure(MgmtFailure(status: .rfkilled))) ==
                .failed(BackendFailure(message: "Failed to power on hci0: \(MgmtOpcode.setPowered) → \(MgmtStatus.rfkilled)",
                                       fields: ["HCI_DEVICE=hci0", "MGMT_OPCODE=0x0005", "MGMT_STATUS=0x12"])))
        var waiting = MgmtOpening(device: "hci0", mayPowerOn: false)
        #expect(waiting.answered(.readControllerInformation, .success(information(current: 0x200)))
                == .failed(BackendFailure(message: "Waiting for hci0 to be powered on", level: .notice)))
    }

    @Test("an invalid index: waiting for the device, or raw HCI may bring up one whose setup failed")
    func invalidIndex() {
        var o = MgmtOpening(device: "hci0", mayPowerOn: true)
        #expect(o.answered(.readControllerInformation, .failure(MgmtFailure(status: .invalidIndex))) == .askWhetherTheDeviceExists)
        #expect(o.deviceExists(false) == .failed(BackendFailure(message: "Waiting for hci0 to appear", level: .notice)))
        guard case .failed(let f) = o.deviceExists(true) else { Issue.record("not failed"); return }
        #expect(f.rawHCIMayWork && f.level == .warning && f.message.contains("invalid index"))
    }

    @Test("no LE, malformed replies and refusals end the opening with what the user needs")
    func openFailures() {
        var o = MgmtOpening(device: "hci0", mayPowerOn: true)
        #expect(o.answered(.readControllerInformation, .success(information(current: 0x201, le: false)))
                == .failed(BackendFailure(message: "hci0 has no Bluetooth Low Energy: it cannot advertise an iBeacon")))
        #expect(o.answered(.readControllerInformation, .success([1, 2]))
                == .failed(BackendFailure(message: "The kernel sent a malformed controller information reply for hci0")))
        guard case .failed(let denied) = o.answered(.readControllerInformation, .failure(MgmtFailure(status: .permissionDenied))) else {
            Issue.record("not failed")
            return
        }
        #expect(denied.fatal == .noPermission && denied.rawHCIMayWork && denied.message.hasSuffix("the management interface needs CAP_NET_ADMIN"))
        #expect(MgmtDecisions.failure("add", .addAdvertising, nil, device: "hci0").message == "Failed to add: \(MgmtOpcode.addAdvertising) → no answer from the kernel (timeout)")
        #expect(MgmtDecisions.failure("add", .addAdvertising, .notPowered, device: "hci0").level == .warning)
        #expect(MgmtDecisions.failure("add", .addAdvertising, .busy, device: "hci0").level == .err)
    }

    @Test("events: another controller's mean nothing; removal and power-off lose it; beacond's instance removed means apply again")
    func events() throws {
        var none: MgmtAdvertiser?
        #expect(MgmtDecisions.meaning(of: MgmtEvent(index: 1, kind: .indexRemoved), index: 0, device: "hci0", advertiser: &none) == .nothing)
        #expect(MgmtDecisions.meaning(of: MgmtEvent(index: 0, kind: .indexRemoved), index: 0, device: "hci0", advertiser: &none)
                == .lost("hci0 was removed", .warning))
        #expect(MgmtDecisions.meaning(of: MgmtEvent(index: 0, kind: .newSettings(0x200)), index: 0, device: "hci0", advertiser: &none)
                == .lost("hci0 was powered off; waiting for it to be powered on", .warning))
        #expect(MgmtDecisions.meaning(of: MgmtEvent(index: 0, kind: .newSettings(0x201)), index: 0, device: "hci0", advertiser: &none) == .nothing)
        var a: MgmtAdvertiser? = try applied(true, [request(100)])
        let ours = a!.beaconInstances[0]
        guard case .reapply = MgmtDecisions.meaning(of: MgmtEvent(index: 0, kind: .advertisingRemoved(instance: ours)), index: 0, device: "hci0", advertiser: &a) else {
            Issue.record("a removed instance of beacond's is not put back")
            return
        }
        #expect(MgmtDecisions.meaning(of: MgmtEvent(index: 0, kind: .advertisingAdded(instance: 1)), index: 0, device: "hci0", advertiser: &a) == .nothing)
        #expect(a!.foreign == [1])
    }

    @Test("removal: gone, never there, powered off (on for a moment), or kept with the status")
    func removal() {
        #expect(MgmtDecisions.removal(5, .success([]), device: "hci0") == .gone("Advertising instance 5 removed on hci0"))
        #expect(MgmtDecisions.removal(5, .failure(MgmtFailure(status: .invalidParameters)), device: "hci0") == .gone(nil))
        #expect(MgmtDecisions.removal(5, .failure(MgmtFailure(status: .notPowered)), device: "hci0")
                == .whilePoweredOff(MgmtAdvertisingPlan.removeWhilePoweredOff(instance: 5)))
        #expect(MgmtDecisions.removal(5, .failure(MgmtFailure(status: nil)), device: "hci0")
                == .kept("Failed to remove advertising instance 5 on hci0: \(MgmtOpcode.removeAdvertising) → no answer"))
        #expect(MgmtDecisions.removalWhilePoweredOff(5, .success([]), device: "hci0").gone)
    }

    @Test("the kernel's interval model: sets give each beacon its interval; one advertiser rotates them at 100–150 ms")
    func onAir() throws {
        let sets = OnAir(mgmt: try applied(true, [request(250), request(500)]), information: nil)
        #expect(sets.kernelInterval == nil && sets.beacons.map(\.every) == [.milliseconds(250), .milliseconds(500)])
        #expect(sets.controller?.timeSliced == false && sets.controller?.instances == 5)
        let rotated = OnAir(mgmt: try applied(false, [request(250), request(500)]), information: nil)
        #expect(rotated.kernelInterval == .legacyNonConnectable)
        #expect(rotated.details.contains("the kernel rotates them, \(formatDuration(KernelAdvertising.turn)) each"))
        #expect(rotated.controller?.timeSliced == true)
        let one = OnAir(mgmt: try applied(false, [request(250)]), information: nil)
        #expect(one.details.first?.hasPrefix("mgmt instance ") == true && one.interval == KernelInterval.legacyNonConnectable.typical)
    }

    @Test("status --check says why Read Advertising Features was refused")
    func featuresRefused() {
        #expect(MgmtDecisions.featuresRefused(.permissionDenied).hasSuffix("(the kernel answers it to root, or with CAP_NET_ADMIN)"))
        #expect(MgmtDecisions.featuresRefused(nil) == "Read Advertising Features: no answer")
    }
}
