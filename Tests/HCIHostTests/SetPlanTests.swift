// Several beacons on extended advertising sets: which set each gets, and that a change touches only its own set.
import BluetoothHCI
import HCIHost
import Testing

private func request(_ byte: UInt8, ms: Int = 100) -> AdvertisingRequest {
    AdvertisingRequest(data: try! AdvertisingData(raw: [0x02, 0x01, 0x06, 0x03, 0xFF, 0x01, byte]), type: .nonConnectableUndirected,
                       interval: AdvertisingInterval(milliseconds: ms)!, txPower: nil, ownAddress: .random([1, 2, 3, 4, 5, 0xC6]))
}

/// The handle each step addresses (nil for steps without one).
private func handles(_ steps: [Step]) -> [String] {
    steps.map { s in
        switch s.command {
        case .leSetExtendedAdvertisingEnable(let on, let sets): "\(on ? "enable" : "disable") \(sets.map(\.handle))"
        case .leSetExtendedAdvertisingParameters(let p): "parameters \(p.handle)"
        case .leSetAdvertisingSetRandomAddress(let h, _): "address \(h)"
        case .leSetExtendedAdvertisingData(let h, _): "data \(h)"
        case .leRemoveAdvertisingSet(let h): "remove \(h)"
        default: "\(s.command.opcode)"
        }
    }
}

@Suite("advertising sets for several beacons")
struct SetPlanTests {
    @Test("a stop on a controller beacond owns: every set disabled at once (no set list), then all cleared")
    func stopAll() {
        let steps = AdvertisingPlan.stopAll()
        #expect(steps.map { $0.command.h4Frame } == [[0x01, 0x39, 0x20, 0x02, 0x00, 0x00], [0x01, 0x3D, 0x20, 0x00]])
    }

    @Test("from nothing: sets 0, 1, 2 in order, each started in full with its random address")
    func fresh() throws {
        let plan = try #require(SetPlan.make([request(1), request(2), request(3)], current: nil, capacity: 4))
        #expect(plan.handles == [0, 1, 2])
        #expect(handles(plan.steps) == (0...2).flatMap { ["disable [\($0)]", "parameters \($0)", "address \($0)", "data \($0)", "enable [\($0)]"] })
        #expect(plan.removed == [])
    }

    @Test("sets used earlier on the connection beyond the wanted ones are removed on a full start")
    func staleRemoved() throws {
        let plan = try #require(SetPlan.make([request(1)], current: nil, capacity: 4, stale: [0, 1, 2]))
        #expect(plan.removed == [1, 2])
        #expect(handles(plan.steps).suffix(4) == ["disable [1]", "remove 1", "disable [2]", "remove 2"])
    }

    @Test("nothing changed: no command at all")
    func unchanged() throws {
        let now: [UInt8: AdvertisingRequest] = [0: request(1), 1: request(2)]
        let plan = try #require(SetPlan.make([request(1), request(2)], current: now, capacity: 4))
        #expect(plan.steps.isEmpty && plan.handles == [0, 1])
    }

    @Test("one beacon's data changed: one data command on its set, the others untouched")
    func dataOnly() throws {
        let now: [UInt8: AdvertisingRequest] = [0: request(1), 1: request(2), 2: request(3)]
        let plan = try #require(SetPlan.make([request(1), request(9), request(3)], current: now, capacity: 4))
        #expect(plan.handles == [0, 1, 2])
        #expect(handles(plan.steps) == ["data 1"])
    }

    @Test("one beacon's interval changed: only its set restarts")
    func parametersChanged() throws {
        let now: [UInt8: AdvertisingRequest] = [0: request(1), 1: request(2)]
        let plan = try #require(SetPlan.make([request(1), request(2, ms: 250)], current: now, capacity: 4))
        #expect(handles(plan.steps) == ["disable [1]", "parameters 1", "address 1", "data 1", "enable [1]"])
    }

    @Test("added: the lowest free set; removed: disabled and removed; the rest untouched, even when the order moves")
    func addAndRemove() throws {
        let now: [UInt8: AdvertisingRequest] = [0: request(1), 1: request(2), 2: request(3)]
        // Remove the first, add a new one at the end: the new one takes over the freed set 0.
        let plan = try #require(SetPlan.make([request(2), request(3), request(4)], current: now, capacity: 4))
        #expect(plan.handles == [1, 2, 0])
        #expect(handles(plan.steps) == ["data 0"])
        // Only remove.
        let fewer = try #require(SetPlan.make([request(3)], current: now, capacity: 4))
        #expect(fewer.handles == [2] && fewer.removed == [0, 1])
        #expect(handles(fewer.steps) == ["disable [0]", "remove 0", "disable [1]", "remove 1"])
        // Only add.
        let more = try #require(SetPlan.make([request(1), request(2), request(3), request(4)], current: now, capacity: 4))
        #expect(more.handles == [0, 1, 2, 3])
        #expect(handles(more.steps) == ["disable [3]", "parameters 3", "address 3", "data 3", "enable [3]"])
    }

    @Test("more beacons than the controller has sets: no plan (the backend says so), never a silent drop")
    func capacity() {
        #expect(SetPlan.make([request(1), request(2), request(3)], current: nil, capacity: 2) == nil)
        #expect(SetPlan.make([request(1), request(2), request(3)], current: [0: request(1)], capacity: 2) == nil)
    }

    @Test("legacy time slicing: the shortest interval is the slot; each beacon comes round every count × slot")
    func slicing() {
        let s = LegacySlicing([request(1, ms: 200), request(2, ms: 100), request(3, ms: 1000)])
        #expect(s.slot.units == 160)
        #expect(s.base.data == request(1).data)
        #expect(s.effectiveInterval(slot: s.slot) == .milliseconds(300))
        #expect([0, 1, 2].map(s.next(after:)) == [1, 2, 0])
    }
}

@Suite("address and scan response in the start sequences")
struct StartSequenceTests {
    static let name = try! AdvertisingData(raw: [0x05, 0x09, 0x53, 0x68, 0x65, 0x6C])  // "Shel"

    @Test("legacy: the random address after the parameters (steps 0 and 1 stay disable and parameters), the scan response after the data")
    func legacy() {
        var r = request(1)
        r = AdvertisingRequest(data: r.data, type: .nonConnectableUndirected, interval: r.interval, txPower: nil,
                               ownAddress: .random([1, 2, 3, 4, 5, 0xC6]), scanResponse: Self.name)
        #expect(r.type == .scannableUndirected)  // a name makes it scannable
        let steps = AdvertisingPlan.start(r, family: .legacy, handle: 0)
        #expect(steps.map(\.command.opcode) == [.leSetAdvertisingEnable, .leSetAdvertisingParameters, .leSetRandomAddress,
                                                 .leReadAdvertisingPhysicalChannelTxPower, .leSetAdvertisingData, .leSetScanResponseData,
                                                 .leSetAdvertisingEnable])
        #expect(hexString(steps[1].command.parameters) == "a000a000" + "02" + "01" + "00" + "000000000000" + "07" + "00")
        #expect(hexString(steps[2].command.parameters) == "0102030405c6")
    }

    @Test("extended: own address type random, LE Set Advertising Set Random Address for that set, LE Set Extended Scan Response Data")
    func extended() {
        let r = AdvertisingRequest(data: request(1).data, type: .nonConnectableUndirected, interval: request(1).interval, txPower: nil,
                                   ownAddress: .random([1, 2, 3, 4, 5, 0xC6]), scanResponse: Self.name)
        let steps = AdvertisingPlan.start(r, family: .extended, handle: 3)
        #expect(handles(steps) == ["disable [3]", "parameters 3", "address 3", "data 3", "\(Opcode.leSetExtendedScanResponseData)", "enable [3]"])
        if case .leSetExtendedAdvertisingParameters(let p) = steps[1].command {
            #expect(p.ownAddressType == 1 && p.eventProperties == 0x0012)
        } else {
            Issue.record("step 1 is not the parameters")
        }
        #expect(hexString(steps[2].command.parameters) == "03" + "0102030405c6")
        #expect(hexString(steps[4].command.parameters) == "03" + "03" + "01" + "06" + "05095368656c")
        // Public and without a name: exactly the sequence beacond always sent.
        let plain = AdvertisingPlan.start(AdvertisingRequest(data: r.data, type: .nonConnectableUndirected, interval: r.interval, txPower: nil),
                                          family: .extended, handle: 0)
        #expect(handles(plain) == ["disable [0]", "parameters 0", "data 0", "enable [0]"])
    }

    @Test("time slices: a beacon without a name answers with an empty scan response when another has one")
    func slicesWithNames() {
        let named = AdvertisingRequest(data: request(1).data, type: .nonConnectableUndirected, interval: request(1).interval, txPower: nil,
                                       scanResponse: Self.name)
        let s = LegacySlicing([request(2), named])
        #expect(s.base.type == .scannableUndirected)
        #expect(s.scanResponse(0)?.bytes == [] && s.scanResponse(1) == Self.name)
        #expect(LegacySlicing([request(2), request(3)]).scanResponse(0) == nil)
    }
}

@Suite("Bluetooth addresses")
struct BluetoothAddressTests {
    @Test("static: top two bits 11; non-resolvable: 00; an all-zero or all-one random part is refused")
    func kinds() throws {
        let s = try #require(BluetoothAddress.makeStatic(from: [1, 2, 3, 4, 5, 6]))
        #expect(s == [1, 2, 3, 4, 5, 0xC6] && s.isStatic && s.kind == .staticRandom)
        let n = try #require(BluetoothAddress.makeNonResolvable(from: [1, 2, 3, 4, 5, 0xFF]))
        #expect(n == [1, 2, 3, 4, 5, 0x3F] && !n.isStatic && n.kind == .nonResolvable && n.isValidRandom)
        #expect(BluetoothAddress.makeStatic(from: [0, 0, 0, 0, 0, 0xC0]) == nil)
        #expect(BluetoothAddress.makeStatic(from: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x3F]) == nil)
        #expect(BluetoothAddress.makeNonResolvable(from: [0, 0, 0, 0, 0, 0]) == nil)
        let resolvable: BluetoothAddress = [1, 2, 3, 4, 5, 0x46]
        #expect(resolvable.kind == .resolvable && !resolvable.isStatic)
        let reserved: BluetoothAddress = [1, 2, 3, 4, 5, 0x86]
        #expect(reserved.kind == .reserved && !reserved.isValidRandom)
        let controller = try #require(BluetoothAddress(parsing: "C3:12:34:56:78:9A", public: true))
        #expect(controller.kind == .public && !controller.isStatic && !controller.isValidRandom)
        #expect(BluetoothAddress(wire: [1, 2, 3, 4, 5]) == nil)
    }

    @Test("text: most significant first, colons; anything else is refused")
    func text() {
        #expect(([0x9A, 0x78, 0x56, 0x34, 0x12, 0xC3] as BluetoothAddress).description == "C3:12:34:56:78:9A")
        #expect(BluetoothAddress(parsing: "C3:12:34:56:78:9A") == [0x9A, 0x78, 0x56, 0x34, 0x12, 0xC3])
        #expect(BluetoothAddress(parsing: "c3:12:34:56:78:9a") == [0x9A, 0x78, 0x56, 0x34, 0x12, 0xC3])
        for bad in ["", "C3:12:34:56:78", "C3:12:34:56:78:9A:00", "C3:12:34:56:78:9G", "C312:34:56:78:9A:0", "+3:12:34:56:78:9A"] {
            #expect(BluetoothAddress(parsing: bad) == nil)
        }
    }
}
