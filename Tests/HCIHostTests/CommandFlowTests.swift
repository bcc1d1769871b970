// The command-flow state machine and the advertising plans, driven by hand (no I/O).
import BluetoothHCI
@testable import HCIHost
import Testing

private func complete(_ op: Opcode, status: UInt8 = 0, credits: UInt8 = 1, extra: [UInt8] = []) -> HCIEvent {
    .commandComplete(credits: credits, opcode: op, returnParameters: [status] + extra)
}

@Suite("command flow")
struct CommandFlowTests {
    @Test("one command in flight; the next goes out when the reply comes")
    func oneAtATime() {
        var f = CommandFlow()
        #expect(f.enqueue(.reset, token: 1) == [.write(HCICommand.reset.h4Frame), .armTimer(.seconds(2))])
        #expect(f.enqueue(.readLocalVersionInformation, token: 2) == [])
        let a = f.received(complete(.reset))
        #expect(a == [.cancelTimer, .complete(1, .success([0])), .write(HCICommand.readLocalVersionInformation.h4Frame), .armTimer(.seconds(2))])
        #expect(f.inFlightOpcode == .readLocalVersionInformation)
    }

    @Test("a non-success status fails the command with its opcode and status")
    func errorStatus() {
        var f = CommandFlow()
        _ = f.enqueue(.leSetAdvertisingEnable(true), token: 7)
        let a = f.received(complete(.leSetAdvertisingEnable, status: 0x0C))
        let e = CommandError(opcode: .leSetAdvertisingEnable, reason: .status(.commandDisallowed))
        #expect(a == [.cancelTimer, .complete(7, .failure(e))])
        #expect(e.description == "LE Set Advertising Enable (0x200A) → Command Disallowed (0x0C)")
    }

    @Test("Command Status with an error also ends the command")
    func commandStatus() {
        var f = CommandFlow()
        _ = f.enqueue(.leSetAdvertisingEnable(true), token: 1)
        let a = f.received(.commandStatus(status: .unknownHCICommand, credits: 1, opcode: .leSetAdvertisingEnable))
        #expect(a.contains(.complete(1, .failure(CommandError(opcode: .leSetAdvertisingEnable, reason: .status(.unknownHCICommand))))))
    }

    @Test("credits: zero credits hold the queue until a credit-only Command Complete (opcode 0)")
    func credits() {
        var f = CommandFlow()
        _ = f.enqueue(.reset, token: 1)
        _ = f.enqueue(.readBDAddr, token: 2)
        let a = f.received(complete(.reset, credits: 0))
        // Nothing written without a credit; the credit timer runs instead of a command timer.
        #expect(a == [.cancelTimer, .complete(1, .success([0])), .armTimer(.seconds(4))])
        let b = f.received(.commandComplete(credits: 1, opcode: Opcode(rawValue: 0), returnParameters: []))
        #expect(b == [.write(HCICommand.readBDAddr.h4Frame), .armTimer(.seconds(2))])
    }

    @Test("zero credits and silence: after the credit timeout the controller is hung and everything waiting fails")
    func zeroCreditsForever() {
        // The bug: a Reset answered with Num_HCI_Command_Packets = 0, then nothing — beacond waited forever.
        var f = CommandFlow(creditTimeout: .seconds(4))
        _ = f.enqueue(.reset, token: 1)
        _ = f.enqueue(.readLocalVersionInformation, token: 2)
        _ = f.enqueue(.readBDAddr, token: 3)
        let a = f.received(complete(.reset, credits: 0))
        #expect(a.last == .armTimer(.seconds(4)))
        // Unrelated events do not send anything or restart the wait.
        #expect(f.received(.hardwareError(code: 0)) == [.unsolicited(.hardwareError(code: 0))])
        let b = f.timerFired()
        let e: (Opcode) -> CommandError = { CommandError(opcode: $0, reason: .noCredit(.seconds(4))) }
        #expect(b == [.cancelTimer, .complete(2, .failure(e(.readLocalVersionInformation))), .complete(3, .failure(e(.readBDAddr))),
                      .controllerHung(.seconds(4))])
        #expect(e(.readBDAddr).description.contains("gave no command credit back within 4 s"))
        #expect(f.isIdle)
        // Afterwards the flow starts over with one credit (a reopened controller).
        #expect(f.enqueue(.reset, token: 4) == [.write(HCICommand.reset.h4Frame), .armTimer(.seconds(2))])
    }

    @Test("a credit that comes back late, within the bound, lets the waiting command go")
    func lateCredit() {
        var f = CommandFlow()
        _ = f.enqueue(.reset, token: 1)
        _ = f.received(complete(.reset, credits: 0))
        _ = f.enqueue(.readBDAddr, token: 2)
        // Still waiting: a second command does not arm a second timer.
        #expect(f.enqueue(.readLocalVersionInformation, token: 3) == [])
        let a = f.received(.commandStatus(status: .success, credits: 1, opcode: Opcode(rawValue: 0)))
        #expect(a == [.write(HCICommand.readBDAddr.h4Frame), .armTimer(.seconds(2))])
    }

    @Test("on a kernel socket the credits in events are the kernel's and do not hold our queue")
    func kernelCredits() {
        var f = CommandFlow(respectsCredits: false)
        _ = f.enqueue(.reset, token: 1)
        _ = f.enqueue(.readBDAddr, token: 2)
        let a = f.received(complete(.reset, credits: 0))
        #expect(a.contains(.write(HCICommand.readBDAddr.h4Frame)))
    }

    @Test("replies to commands we did not send, and controller events, are passed on as unsolicited")
    func unsolicited() {
        var f = CommandFlow()
        _ = f.enqueue(.reset, token: 1)
        let other = complete(.leSetAdvertisingEnable)
        #expect(f.received(other) == [.unsolicited(other)])
        #expect(f.received(.hardwareError(code: 1)) == [.unsolicited(.hardwareError(code: 1))])
        #expect(f.inFlightOpcode == .reset)
    }

    @Test("a timeout fails the command and lets the next one go")
    func timeout() {
        var f = CommandFlow(timeout: .milliseconds(500))
        _ = f.enqueue(.reset, token: 1)
        _ = f.enqueue(.readBDAddr, token: 2)
        let a = f.timerFired()
        #expect(a == [.complete(1, .failure(CommandError(opcode: .reset, reason: .timeout))),
                      .write(HCICommand.readBDAddr.h4Frame), .armTimer(.milliseconds(500))])
        #expect(f.timerFired().count == 1)  // readBDAddr times out too, nothing left after it
        #expect(f.timerFired() == [])
    }

    @Test("transport closed fails everything pending, in order")
    func closed() {
        var f = CommandFlow()
        _ = f.enqueue(.reset, token: 1)
        _ = f.enqueue(.readBDAddr, token: 2)
        let a = f.transportClosed()
        #expect(a == [.cancelTimer, .complete(1, .failure(CommandError(opcode: .reset, reason: .transportClosed))),
                      .complete(2, .failure(CommandError(opcode: .readBDAddr, reason: .transportClosed)))])
        #expect(f.isIdle)
    }

    @Test("an empty Command Complete is a malformed reply, not a crash")
    func malformed() {
        var f = CommandFlow()
        _ = f.enqueue(.reset, token: 1)
        let a = f.received(.commandComplete(credits: 1, opcode: .reset, returnParameters: []))
        #expect(a.contains(.complete(1, .failure(CommandError(opcode: .reset, reason: .malformedReply)))))
    }
}

@Suite("advertising plans")
struct PlanTests {
    static let data = try! AdvertisingData(raw: [2, 1, 6])
    static func request(_ ms: Int = 100, type: LegacyAdvertisingType = .nonConnectableUndirected, tx: Int8? = nil) -> AdvertisingRequest {
        AdvertisingRequest(data: data, type: type, interval: AdvertisingInterval(milliseconds: ms)!, txPower: tx)
    }
    static func info(hciVersion: UInt8, extended: Bool) -> ControllerInfo {
        ControllerInfo(version: LocalVersionInformation(hciVersion: hciVersion), commands: SupportedCommands(octets: []),
                       features: LEFeatures(rawValue: extended ? 1 << 12 : 0))
    }

    @Test("the family follows the LE Extended Advertising feature bit")
    func family() {
        #expect(Self.info(hciVersion: 9, extended: true).preferredFamily == .extended)
        #expect(Self.info(hciVersion: 9, extended: false).preferredFamily == .legacy)
    }

    @Test("before Core 5.0 a non-connectable interval under 100 ms is raised; connectable and 5.0 are left alone")
    func floor() {
        let old = Self.info(hciVersion: 8, extended: false)
        #expect(AdvertisingPlan.effectiveInterval(Self.request(50), on: old) == (.pre50NonConnectableFloor, true))
        #expect(AdvertisingPlan.effectiveInterval(Self.request(150), on: old).raised == false)
        #expect(AdvertisingPlan.effectiveInterval(Self.request(50, type: .connectableUndirected), on: old).raised == false)
        #expect(AdvertisingPlan.effectiveInterval(Self.request(20), on: Self.info(hciVersion: 9, extended: false)).raised == false)
    }

    @Test("start sequences begin with a disable; a legacy disable of disabled advertising may be refused harmlessly")
    func startSequences() {
        let legacy = AdvertisingPlan.start(Self.request(), family: .legacy, handle: 0).map(\.command.opcode)
        #expect(legacy == [.leSetAdvertisingEnable, .leSetAdvertisingParameters, .leReadAdvertisingPhysicalChannelTxPower,
                           .leSetAdvertisingData, .leSetAdvertisingEnable])
        let ext = AdvertisingPlan.start(Self.request(tx: -4), family: .extended, handle: 3)
        #expect(ext.map(\.command.opcode) == [.leSetExtendedAdvertisingEnable, .leSetExtendedAdvertisingParameters,
                                              .leSetExtendedAdvertisingData, .leSetExtendedAdvertisingEnable])
        #expect(ext[0].tolerated == [.unknownAdvertisingIdentifier])
        #expect(AdvertisingPlan.start(Self.request(), family: .legacy, handle: 0)[0].tolerated == [.commandDisallowed])
        #expect(AdvertisingPlan.familyProbeSteps == 2)
        // Right after a Reset nothing advertises: the disable is left out and the parameters come first.
        #expect(AdvertisingPlan.start(Self.request(), family: .extended, handle: 0, afterReset: true).first?.command.opcode
                == .leSetExtendedAdvertisingParameters)
        guard case .leSetExtendedAdvertisingParameters(let p) = ext[1].command else { Issue.record("no params"); return }
        #expect(p.handle == 3 && p.txPower == -4 && p.eventProperties == 0x0010)
    }

    @Test("a data-only change keeps advertising on; a new interval, type or TX power needs a restart")
    func restart() {
        var other = Self.request()
        other.data = try! AdvertisingData(raw: [2, 1, 4])
        #expect(!Self.request().needsRestart(for: other))
        #expect(Self.request().needsRestart(for: Self.request(200)))
        #expect(Self.request().needsRestart(for: Self.request(type: .connectableUndirected)))
        #expect(Self.request().needsRestart(for: Self.request(tx: 0)))
        #expect(AdvertisingPlan.updateData(other.data, family: .legacy, handle: 0).map(\.command.opcode) == [.leSetAdvertisingData])
        #expect(AdvertisingPlan.updateData(other.data, family: .extended, handle: 0).map(\.command.opcode) == [.leSetExtendedAdvertisingData])
    }

    @Test("stop: disable, and for extended also remove the set")
    func stop() {
        #expect(AdvertisingPlan.stop(family: .legacy, handle: 0).map(\.command) == [.leSetAdvertisingEnable(false)])
        #expect(AdvertisingPlan.stop(family: .extended, handle: 0).map(\.command.opcode) == [.leSetExtendedAdvertisingEnable, .leRemoveAdvertisingSet])
    }

    @Test("the TX power the controller reports is read from the right replies")
    func txPower() {
        #expect(AdvertisingPlan.reportedTxPower(for: .leReadAdvertisingPhysicalChannelTxPower, returnParameters: [0, 0xFC]) == -4)
        #expect(AdvertisingPlan.reportedTxPower(for: .leSetAdvertisingEnable(true), returnParameters: [0]) == nil)
    }
}
