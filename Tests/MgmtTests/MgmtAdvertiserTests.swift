// The mgmt advertiser driven by hand: instances, the fall back to Add Advertising, other programs' instances and
// removals, and what a stop takes off.
import BluetoothHCI
import HCIHost
@testable import Mgmt
import Testing

private func request(_ byte: UInt8) -> AdvertisingRequest {
    AdvertisingRequest(data: try! AdvertisingData(raw: [0x02, 0x01, 0x06, 0x03, 0xFF, 0x01, byte]), type: .nonConnectableUndirected,
                       interval: AdvertisingInterval(milliseconds: 100)!, txPower: nil)
}

private func features(_ listed: [UInt8] = [], max: UInt8 = 5) -> MgmtAdvertisingFeatures {
    try! MgmtAdvertisingFeatures(returnParameters: [0x00, 0x0C, 0, 0, 31, 31, max, UInt8(listed.count)] + listed)
}

private func steps(_ o: MgmtAdvertiser.Outcome) -> [MgmtStep] {
    if case .send(let s) = o { return s }
    Issue.record("expected steps, got \(o)")
    return []
}

private func ok(_ s: [MgmtStep]) -> Result<[[UInt8]], MgmtStepFailure> { .success(s.map { _ in [5, 0xFC] }) }

@Suite("mgmt advertiser")
struct MgmtAdvertiserTests {
    @Test("instances added are beacond's from the first command on, and the stop removes them all")
    func ownership() {
        var a = MgmtAdvertiser(device: "hci0", features: features(), ours: [])
        let s = steps(a.apply([request(1), request(2)], dataOnlyAllowed: false))
        #expect(a.ours == [5, 4])
        _ = a.finished(ok(s))
        #expect(a.beaconInstances == [5, 4] && a.txPowers[5] == -4)
        #expect(a.stopping() == [5, 4])
        a.removed([5])
        #expect(a.ours == [4])  // 4 could not be removed: still beacond's, for the next stop or start
    }

    @Test("Invalid Parameters on Add Extended Advertising Data falls back to Add Advertising, with a warning")
    func fallback() {
        var a = MgmtAdvertiser(device: "hci0", features: features(), ours: [])
        let s = steps(a.apply([request(1)], dataOnlyAllowed: false))
        let f = MgmtStepFailure(index: 2, step: s[2], failure: MgmtFailure(status: .invalidParameters))
        let again = steps(a.finished(.failure(f)))
        #expect(a.commands == .legacy)
        #expect(again.allSatisfy { $0.command.opcode == .addAdvertising })
        #expect(a.takeNotes().count == 1)
        // Another failure is reported with what beacond tried.
        let g = MgmtStepFailure(index: 1, step: again[1], failure: MgmtFailure(status: .busy))
        #expect(a.finished(.failure(g)) == .failed(what: "add advertising instance 5 on hci0", .addAdvertising, .busy))
    }

    @Test("another program's instances, listed or added meanwhile, are left alone; one of beacond's removed by someone else means apply again")
    func otherPrograms() {
        var a = MgmtAdvertiser(device: "hci0", features: features([1]), ours: [])
        #expect(a.foreign == [1])
        _ = a.finished(ok(steps(a.apply([request(1)], dataOnlyAllowed: false))))
        #expect(a.event(.advertisingAdded(instance: 4)) == nil)
        let s = steps(a.apply([request(1), request(2), request(3)], dataOnlyAllowed: true))
        #expect(!s.contains { if case .addExtendedAdvertisingParameters(let i, _, _, _, _, _, _) = $0.command { i == 4 || i == 1 } else { false } })
        let notes = a.takeNotes()
        #expect(notes == [.notice("Advertising instance 4 on hci0 belongs to another program: beacond uses 5, 3, 2 and leaves it alone")])
        _ = a.finished(ok(s))
        #expect(a.event(.advertisingRemoved(instance: 4)) == nil)  // theirs
        #expect(a.event(.advertisingRemoved(instance: 3))?.hasPrefix("Advertising instance 3 on hci0 was removed by another program") == true)
        #expect(a.applied == nil && a.ours == [5, 2])
        #expect(a.stopping() == [5, 2])
    }

    @Test("not enough instances beside another program's: a sentence naming the numbers")
    func shortage() {
        var a = MgmtAdvertiser(device: "hci0", features: features([1, 2], max: 3), ours: [])
        #expect(a.apply([request(1), request(2)], dataOnlyAllowed: false)
                == .shortage("The config has 2 beacons, but the kernel has 3 advertising instances for hci0 (Read Advertising Features), and another program holds instances 1, 2; remove beacons"))
    }
}
