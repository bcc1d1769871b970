// What an event nobody waited for means, and how long beacond waits after another program's command.
import BluetoothHCI
import HCIHost
import Testing

@Suite("unsolicited events and foreign commands")
struct EventMeaningTests {
    @Test("a Hardware Error loses the controller, on any controller")
    func hardwareError() {
        for owns in [true, false] {
            #expect(HCIEvent.hardwareError(code: 0x42).unsolicitedMeaning(device: "hci0", ownsController: owns)
                    == .lost("The controller on hci0 reported Hardware Error 0x42; its advertising state is gone, starting over"))
        }
    }

    @Test("a connection or a terminated set interrupts connectable advertising; a disconnection lets it start again")
    func connectable() {
        #expect(HCIEvent.leMeta(subevent: 0x0A, parameters: [0]).unsolicitedMeaning(device: "hci0", ownsController: true) == .connectableInterrupted("a central connected"))
        #expect(HCIEvent.leMeta(subevent: 0x12, parameters: [0]).unsolicitedMeaning(device: "hci0", ownsController: false) == .connectableInterrupted("the advertising set terminated"))
        #expect(HCIEvent.other(code: 0x05, parameters: [0]).unsolicitedMeaning(device: "hci0", ownsController: true) == .connectableInterrupted("a connection ended"))
    }

    @Test("on a controller beacond owns, a reply it did not wait for and unknown events are oddities, each of its kind")
    func oddities() {
        let reply = HCIEvent.commandComplete(credits: 1, opcode: .leSetAdvertisingEnable, returnParameters: [0])
        guard case .oddity(let kind, let m) = reply.unsolicitedMeaning(device: "tcp:h:1", ownsController: true) else {
            Issue.record("not an oddity")
            return
        }
        #expect(kind == "unsolicited-\(Opcode.leSetAdvertisingEnable.rawValue)" && m.contains("which beacond did not send"))
        #expect(HCIEvent.other(code: 0x77, parameters: [1, 2]).unsolicitedMeaning(device: "tcp:h:1", ownsController: true)
                == .oddity(kind: "event-119", "The controller on tcp:h:1 sent event 0x77 (2 bytes), which beacond does not use; ignoring it"))
        // On a kernel device, replies to other programs' commands are normal traffic.
        #expect(reply.unsolicitedMeaning(device: "hci0", ownsController: false) == .nothing)
        #expect(HCIEvent.other(code: 0x77, parameters: []).unsolicitedMeaning(device: "hci0", ownsController: false) == .nothing)
        // A zero opcode is a credit update (Command Complete with no command), not a reply.
        #expect(HCIEvent.commandComplete(credits: 1, opcode: Opcode(rawValue: 0), returnParameters: []).unsolicitedMeaning(device: "x", ownsController: true) == .nothing)
    }

    @Test("after another program's reset beacond waits 500 ms, after other commands 100 ms")
    func foreign() {
        #expect(ForeignCommand.delay(.reset) == .milliseconds(500))
        #expect(ForeignCommand.delay(.leSetAdvertisingEnable) == .milliseconds(100))
        #expect(ForeignCommand.reason(.reset, device: "hci0") == "Another program sent \(Opcode.reset) to hci0")
    }

    @Test("an LE Meta event's advertising reports, none from anything else or from reports that run past the end")
    func reports() {
        // One legacy report: type 3, random address, 3 bytes of data, RSSI -60.
        let one = HCIEvent.leMeta(subevent: 0x02, parameters: [1, 3, 1, 1, 2, 3, 4, 5, 0xC6, 3, 2, 1, 6, 0xC4])
        #expect(one.advertisingReports.map(\.address.description) == ["C6:05:04:03:02:01"])
        #expect(one.advertisingReports.first?.rssi == -60 && one.advertisingReports.first?.data == [2, 1, 6])
        #expect(HCIEvent.leMeta(subevent: 0x02, parameters: [1, 3, 1, 1, 2]).advertisingReports.isEmpty)
        #expect(HCIEvent.hardwareError(code: 1).advertisingReports.isEmpty)
    }
}
