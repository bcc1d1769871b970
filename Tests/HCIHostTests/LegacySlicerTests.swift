// The legacy time slicer on its own: turns, what a slot sends, and the restart cost said once.
import BluetoothHCI
import HCIHost
import Testing

private func beacon(_ byte: UInt8, _ address: OwnAddress = .public) -> AdvertisingRequest {
    var r = AdvertisingRequest(data: try! AdvertisingData(raw: [0x02, 0x01, 0x06, 0x03, 0xFF, 0x01, byte]), type: .nonConnectableUndirected,
                               interval: AdvertisingInterval(milliseconds: 100)!, txPower: nil)
    r.ownAddress = address
    return r
}

@Suite("legacy slicer")
struct LegacySlicerTests {
    @Test("one beacon takes no turns; several take turns, each slot sending only what differs")
    func turns() {
        var one = LegacySlicer()
        one.started(LegacySlicing([beacon(1)]))
        #expect(one.slicing == nil && one.next().isEmpty)
        var s = LegacySlicer()
        s.started(LegacySlicing([beacon(1), beacon(2), beacon(3)]))
        #expect(s.index == 0 && s.data == beacon(1).data)
        let second = s.next()
        #expect(second.map(\.command.opcode) == [.leSetAdvertisingData])
        #expect(s.finished(true, took: nil) == nil && s.index == 1 && s.data == beacon(2).data)
        // A refused slot is not carried: the turn stays.
        _ = s.next()
        _ = s.finished(false, took: nil)
        #expect(s.index == 1)
    }

    @Test("fewer beacons after an update: the turn starts over within them")
    func update() {
        var s = LegacySlicer()
        s.started(LegacySlicing([beacon(1), beacon(2), beacon(3)]))
        _ = s.next(); _ = s.finished(true, took: nil)
        _ = s.next(); _ = s.finished(true, took: nil)
        #expect(s.index == 2)
        let (steps, _) = s.update(to: LegacySlicing([beacon(1), beacon(9)]))
        // The advertiser still carries beacon 3: slot 0's beacon goes on it.
        #expect(s.index == 0 && steps.map(\.command.opcode) == [.leSetAdvertisingData])
    }

    @Test("a restart puts on the beacon whose turn it is: found by its data among the new beacons, else the same turn, else the first")
    func turnAcrossARestart() {
        var s = LegacySlicer()
        s.started(LegacySlicing([beacon(1), beacon(2), beacon(3)]))
        _ = s.next(); _ = s.finished(true, took: nil)
        #expect(s.turn(in: LegacySlicing([beacon(1), beacon(2), beacon(3)])) == 1)
        // The same beacons from other addresses (the public one while another program scans): found by the data.
        #expect(s.turn(in: LegacySlicing([beacon(1, .random([1, 2, 3, 4, 5, 0xC6])), beacon(2, .random([6, 5, 4, 3, 2, 0xD1]))])) == 1)
        // Beacon 1 paused meanwhile: beacon 2 is the first of the two.
        #expect(s.turn(in: LegacySlicing([beacon(2), beacon(3)])) == 0)
        // A reload that replaced it: its turn; fewer beacons than that: the first.
        #expect(s.turn(in: LegacySlicing([beacon(1), beacon(9), beacon(3)])) == 1)
        #expect(s.turn(in: LegacySlicing([beacon(8)])) == 0)
        // Beacon 3's slot failed (its enable withheld: another program wrote the address): it is beacon 3's turn.
        _ = s.next()
        _ = s.finished(false, took: nil)
        #expect(s.index == 1 && s.turn(in: LegacySlicing([beacon(1), beacon(2), beacon(3)])) == 2)
        // Started there: its data on the advertiser, and the next turn after it.
        s.started(LegacySlicing([beacon(1), beacon(2), beacon(3)]), at: 2)
        #expect(s.index == 2 && s.data == beacon(3).data && s.next().map(\.command) == [.leSetAdvertisingData(beacon(1).data)])
    }

    @Test("slots that restart from each beacon's address: the cost (commands, median) is said once, after the samples")
    func restartCost() {
        var s = LegacySlicer()
        s.started(LegacySlicing([beacon(1, .random([1, 2, 3, 4, 5, 0xC6])), beacon(2, .random([6, 5, 4, 3, 2, 0xD1]))]))
        var said: [(commands: Int, median: Duration)] = []
        for k in 0..<(2 * LegacySlicer.restartSamples) {
            let steps = s.next()
            #expect(steps.contains { $0.command.opcode == .leSetRandomAddress })
            if let cost = s.finished(true, took: .microseconds(Int64(100 + k))) { said.append(cost) }
        }
        #expect(said.count == 1 && said[0].median == .microseconds(Int64(100 + LegacySlicer.restartSamples / 2)))
    }
}
