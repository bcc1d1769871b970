// The mgmt command flow and the advertising plan, driven by hand (no socket).
import BluetoothHCI
@testable import Mgmt
import Testing

private func complete(_ op: MgmtOpcode, _ status: MgmtStatus = .success, _ params: [UInt8] = [], index: UInt16 = 0) -> MgmtEvent {
    MgmtEvent(index: index, kind: .commandComplete(op, status, params))
}

@Suite("mgmt command flow")
struct MgmtFlowTests {
    @Test("one command pending; the next goes when the reply with its opcode comes")
    func oneAtATime() {
        var f = MgmtCommandFlow()
        let a = f.enqueue(.readControllerInformation, index: 0, token: 1)
        #expect(a == [.write(MgmtCommand.readControllerInformation.frame(index: 0)), .armTimer(.seconds(3))])
        #expect(f.enqueue(.readAdvertisingFeatures, index: 0, token: 2) == [])
        // A reply to a command we are not waiting for (late, after a timeout) changes nothing.
        #expect(f.received(complete(.setPowered)) == [])
        let b = f.received(complete(.readControllerInformation, .success, [1, 2]))
        #expect(b == [.cancelTimer, .complete(1, .success([1, 2])),
                      .write(MgmtCommand.readAdvertisingFeatures.frame(index: 0)), .armTimer(.seconds(3))])
    }

    @Test("a status fails the command with it; Command Status counts as an answer")
    func statuses() {
        var f = MgmtCommandFlow()
        _ = f.enqueue(.setPowered(true), index: 0, token: 1)
        #expect(f.received(MgmtEvent(index: 0, kind: .commandStatus(.setPowered, .busy)))
            == [.cancelTimer, .complete(1, .failure(MgmtFailure(status: .busy)))])
    }

    @Test("commands without a controller go to index 0xFFFF")
    func noIndex() {
        var f = MgmtCommandFlow()
        #expect(f.enqueue(.readVersion, index: 3, token: 1).first == .write(MgmtCommand.readVersion.frame(index: 0xFFFF)))
    }

    @Test("timeout fails the pending command and lets the next go; closing fails all")
    func timeoutAndClose() {
        var f = MgmtCommandFlow(timeout: .seconds(1))
        _ = f.enqueue(.readControllerInformation, index: 0, token: 1)
        _ = f.enqueue(.readAdvertisingFeatures, index: 0, token: 2)
        _ = f.enqueue(.removeAdvertising(instance: 1), index: 0, token: 3)
        let a = f.timerFired()
        #expect(a.first == .complete(1, .failure(MgmtFailure(status: nil))))
        #expect(f.pendingOpcode == .readAdvertisingFeatures)
        #expect(f.closed() == [.cancelTimer, .complete(2, .failure(MgmtFailure(status: nil))), .complete(3, .failure(MgmtFailure(status: nil)))])
        #expect(f.isIdle && f.timerFired() == [])
    }

    @Test("events that answer nothing are passed on")
    func events() {
        var f = MgmtCommandFlow()
        let e = MgmtEvent(index: 0, kind: .advertisingRemoved(instance: 4))
        #expect(f.received(e) == [.event(e)])
    }
}

@Suite("mgmt advertising plan")
struct MgmtPlanTests {
    let instance = MgmtAdvertisingPlan.Instance(number: 4, flags: [.intervalsValid], interval: AdvertisingInterval(units: 160)!, txPower: 0, data: [2, 1, 6])

    @Test("extended: parameters, data padded by one byte (may fail), data")
    func extended() {
        let steps = MgmtAdvertisingPlan.add(instance, using: .extended)
        #expect(steps.map(\.command.opcode) == [.addExtendedAdvertisingParameters, .addExtendedAdvertisingData, .addExtendedAdvertisingData])
        #expect(steps.map(\.mayFail) == [false, true, false])
        #expect(steps[2].command == .addExtendedAdvertisingData(instance: 4, data: [2, 1, 6], scanResponse: []))
    }

    @Test("bug: a 31-byte frame (AltBeacon) cannot take the padding byte; its first copy is the Flags structure alone", arguments: [
        MgmtAdvertisingPlan.Commands.extended, .legacy,
    ])
    func fullFrameDecoy(commands: MgmtAdvertisingPlan.Commands) {
        let full = [2, 1, 6, 27, 0xFF] + [UInt8](repeating: 0xAB, count: 26)
        var i = instance
        i.data = full
        let datas: [[UInt8]] = MgmtAdvertisingPlan.add(i, using: commands).compactMap {
            switch $0.command {
            case .addExtendedAdvertisingData(_, let d, _), .addAdvertising(_, _, _, _, let d, _): d
            default: nil
            }
        }
        #expect(datas.count == 2)
        #expect(datas.first == [2, 1, 6], "the first copy must differ from the frame and fit in 31 bytes: \(datas.first ?? [])")
        #expect(datas.last == full)
        // Shorter frames keep the padding byte: the beacon stays recognizable while the first copy is on the air.
        let short = MgmtAdvertisingPlan.add(instance, using: commands)
        #expect(short.contains { $0.command == .addExtendedAdvertisingData(instance: 4, data: [2, 1, 6, 0], scanResponse: [])
                                 || $0.command == .addAdvertising(instance: 4, flags: [], duration: 0, timeout: 0, data: [2, 1, 6, 0], scanResponse: []) })
    }

    @Test("legacy Add Advertising keeps only the connectable flag")
    func legacy() {
        let steps = MgmtAdvertisingPlan.add(instance, using: .legacy)
        #expect(steps.last?.command == .addAdvertising(instance: 4, flags: [], duration: 0, timeout: 0, data: [2, 1, 6], scanResponse: []))
    }

    @Test("bug: Invalid Parameters on Add Extended Advertising Data (Raspberry Pi 6.12.93, 6.18.34) falls back to Add Advertising")
    func invalidParametersOnExtendedData() {
        let steps = MgmtAdvertisingPlan.add(instance, using: .extended)
        let f = MgmtStepFailure(index: 2, step: steps[2], failure: MgmtFailure(status: .invalidParameters))
        #expect(MgmtAdvertisingPlan.fallbackReason(after: f)?.contains("Invalid Parameters (0x0D)") == true)
    }

    @Test("Unknown Command on the parameters (a kernel before 5.10) falls back; other failures do not")
    func otherFailures() {
        let steps = MgmtAdvertisingPlan.add(instance, using: .extended)
        #expect(MgmtAdvertisingPlan.fallbackReason(after: MgmtStepFailure(index: 0, step: steps[0], failure: MgmtFailure(status: .unknownCommand))) != nil)
        #expect(MgmtAdvertisingPlan.fallbackReason(after: MgmtStepFailure(index: 0, step: steps[0], failure: MgmtFailure(status: .invalidParameters))) == nil)
        #expect(MgmtAdvertisingPlan.fallbackReason(after: MgmtStepFailure(index: 2, step: steps[2], failure: MgmtFailure(status: nil))) == nil)
        #expect(MgmtAdvertisingPlan.fallbackReason(after: MgmtStepFailure(index: 2, step: steps[2], failure: MgmtFailure(status: .busy))) == nil)
    }

    @Test("an instance on a powered-off adapter: power on, remove (gone already is fine), power off again")
    func removeWhilePoweredOff() {
        #expect(MgmtAdvertisingPlan.removeWhilePoweredOff(instance: 4) == [
            MgmtStep(.setPowered(true)), MgmtStep(.removeAdvertising(instance: 4), mayFail: true), MgmtStep(.setPowered(false)),
        ])
    }
}
