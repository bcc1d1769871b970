// Which instances an apply through mgmt uses and removes: beacond's own (remembered across a crash), never another
// program's.
import BluetoothHCI
import HCIHost
@testable import Mgmt
import Testing

private func request(_ byte: UInt8) -> AdvertisingRequest {
    AdvertisingRequest(data: try! AdvertisingData(raw: [0x02, 0x01, 0x06, 0x03, 0xFF, 0x01, byte]), type: .nonConnectableUndirected,
                       interval: AdvertisingInterval(milliseconds: 100)!, txPower: nil)
}

private func plan(_ wanted: [AdvertisingRequest], current: [UInt8: AdvertisingRequest]? = nil, max: UInt8 = 5,
                  ours: Set<UInt8> = [], foreign: Set<UInt8> = []) -> Result<MgmtInstancePlan, MgmtInstancePlan.Shortage> {
    MgmtInstancePlan.make(wanted, current: current, maxInstances: max, ours: ours, foreign: foreign, commands: .extended,
                          canSetTxPower: true)
}

private func removes(_ steps: [MgmtStep]) -> [UInt8] {
    steps.compactMap { if case .removeAdvertising(let i) = $0.command { i } else { nil } }
}

@Suite("mgmt instance plan")
struct MgmtInstancePlanTests {
    @Test("the highest numbers first, away from bluetoothd's 1, 2, …; more beacons than instances is an error")
    func highestFirst() throws {
        #expect(try plan([request(1)]).get().slots == [5])
        #expect(try plan([request(1), request(2), request(3)]).get().slots == [5, 4, 3])
        // bluetoothd's 1 and 2 (Read Advertising Features' list) are left alone: three beacons fit, four do not.
        #expect(try plan([request(1), request(2), request(3)], foreign: [1, 2]).get().slots == [5, 4, 3])
        #expect(throws: MgmtInstancePlan.Shortage.self) { try plan((1...4).map { request($0) }, foreign: [1, 2]).get() }
        #expect(throws: MgmtInstancePlan.Shortage.self) { try plan((1...6).map { request($0) }).get() }
        // An instance in the list that is beacond's own (its previous run's) is updated, not duplicated.
        #expect(try plan([request(1)], ours: [5], foreign: [5]).get().slots == [5])
    }

    @Test("a start after a killed run with three beacons: one beacon keeps the top instance, the other two are removed")
    func leftoversOfAKilledRun() throws {
        // Nothing known on this connection (current nil), but the state directory remembers 5, 4, 3.
        let p = try plan([request(1)], ours: [5, 4, 3]).get()
        #expect(p.slots == [5])
        #expect(p.removed == [4, 3])
        #expect(removes(p.steps) == [4, 3])
    }

    @Test("a reload from three beacons to one with the adapter powered off (nothing current): the others go")
    func shrinkWithNothingCurrent() throws {
        let p = try plan([request(2)], current: nil, ours: [5, 4, 3]).get()
        #expect(Set(p.removed) == [4, 3])
    }

    @Test("another program's instance is neither taken nor removed, and the skip is reported")
    func foreignInstance() throws {
        let p = try plan([request(1), request(2)], foreign: [5]).get()
        #expect(p.slots == [4, 3])
        #expect(p.skipped == [5])
        #expect(!removes(p.steps).contains(5))
        for s in p.steps {
            switch s.command {
            case .addExtendedAdvertisingParameters(let i, _, _, _, _, _, _), .addExtendedAdvertisingData(let i, _, _):
                #expect(i != 5)
            default: break
            }
        }
    }

    @Test("beacond's own instances come first, so a restart updates them in place")
    func oursFirst() throws {
        // Earlier, 5 was another program's and beacond took 4; 5 is free now, but 4 is kept.
        let p = try plan([request(1)], ours: [4]).get()
        #expect(p.slots == [4])
        #expect(p.removed == [])
    }

    @Test("too few instances left beside another program's: a shortage that names them")
    func shortage() {
        guard case .failure(let s) = plan([request(1), request(2)], max: 2, foreign: [1]) else {
            Issue.record("expected a shortage"); return
        }
        #expect(s == MgmtInstancePlan.Shortage(wanted: 2, maxInstances: 2, foreign: [1]))
        #expect(throws: MgmtInstancePlan.Shortage.self) { try plan([request(1)], max: 0).get() }
    }

    @Test("an unchanged beacon sends nothing; a changed one's data only")
    func reload() throws {
        let p = try plan([request(1), request(3)], current: [5: request(1), 4: request(2)], ours: [5, 4]).get()
        #expect(p.slots == [5, 4])
        #expect(p.removed == [])
        #expect(p.steps.map(\.command) == [.addExtendedAdvertisingData(instance: 4, data: request(3).data.bytes, scanResponse: [])])
    }
}
