// The raw-HCI side's words: transport problems, lost and hung controllers, failed commands, notes and the probe.
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import SystemConditions
import Testing

@Suite("raw HCI decisions")
struct HCIDecisionsTests {
    @Test("opening: waiting for an absent or down device, exit 77 without a capability, 69 without Bluetooth")
    func opening() {
        #expect(HCIDecisions.opening("hci0", .absent, mayBringUp: true) == BackendFailure(message: "Waiting for hci0 to appear", level: .notice))
        #expect(HCIDecisions.opening("hci0", .down(capability: "CAP_NET_ADMIN"), mayBringUp: false) == BackendFailure(message: "Waiting for hci0 to come up", level: .notice))
        #expect(HCIDecisions.opening("hci0", .down(capability: "CAP_NET_ADMIN"), mayBringUp: true).level == .warning)
        let denied = HCIDecisions.opening("hci0", .permission(capability: "CAP_NET_RAW", detail: "socket: Operation not permitted"), mayBringUp: true)
        #expect(denied.fatal == .noPermission && denied.message == "Cannot use hci0: socket: Operation not permitted; beacond needs CAP_NET_RAW")
        #expect(HCIDecisions.opening("hci0", .noBluetooth, mayBringUp: true).fatal == .unavailable)
        #expect(HCIDecisions.opening("tcp:h:1", .other("tcp:h:1: Connection refused"), mayBringUp: true).message == "Cannot open tcp:h:1: Connection refused")
    }

    @Test("lost and hung: a hung controller counts as unanswered (towards a power cycle)")
    func lost() {
        #expect(HCIDecisions.lost("hci0", .other("hci0: connection closed"), text: "hci0: connection closed").message == "Lost the controller (hci0: connection closed)")
        #expect(HCIDecisions.lost("hci0", .permission(capability: "CAP_NET_RAW", detail: "write: EPERM"), text: "").fatal == .noPermission)
        let hung = HCIDecisions.hung("hci0", after: .seconds(4))
        #expect(hung.unanswered && hung.message == "The controller on hci0 gave no command credit back within 4 s and is treated as hung")
        // A lost link as Connections says it: the same decisions.
        #expect(HCIDecisions.lost("hci0", LinkLoss.hung(.seconds(4))) == hung)
        #expect(HCIDecisions.lost("hci0", LinkLoss.transport(.other("closed"), text: "hci0: connection closed")).message == "Lost the controller (hci0: connection closed)")
        #expect(HCIDecisions.lost("hci0", LinkLoss.transport(.permission(capability: "CAP_NET_RAW", detail: "write: EPERM"), text: "")).fatal == .noPermission)
    }

    @Test("scan's failed probe: the step's command and answer, or a malformed reply")
    func scanProbe() {
        let refused = StepFailure(index: 0, step: Step(.reset), error: CommandError(opcode: .reset, reason: .status(.commandDisallowed)))
        #expect(HCIDecisions.scanProbeFailed(.step(refused), device: "tcp:h:1") == "Failed to probe the controller on tcp:h:1: \(refused.error)")
        #expect(HCIDecisions.scanProbeFailed(.malformedReply, device: "hci0") == "The controller on hci0 sent a malformed probe reply")
    }

    @Test("a failed command names the command and the status in the message and the journal fields")
    func failed() {
        let e = CommandError(opcode: .leSetAdvertisingEnable, reason: .status(.commandDisallowed))
        let f = HCIDecisions.failed("enable advertising on hci0", e, device: "hci0")
        #expect(f.message == "Failed to enable advertising on hci0: \(e)" && !f.unanswered)
        #expect(f.fields == ["HCI_DEVICE=hci0", "HCI_OPCODE=0x200A", "HCI_STATUS=0x0C"])
    }

    @Test("notes: settings warnings once, refusals at their level")
    func notes() {
        let e = CommandError(opcode: .leSetAdvertisingParameters, reason: .status(.invalidHCICommandParameters))
        #expect(HCIDecisions.logLine(.warning("w"), device: "hci0").once)
        #expect(!HCIDecisions.logLine(.info("i"), device: "hci0").once)
        #expect(HCIDecisions.logLine(.refused("r", e, level: .checkConfig), device: "hci0").level == .err)
        #expect(HCIDecisions.logLine(.refused("r", e, level: .retryingWithFloor), device: "hci0").level == .warning)
    }

    @Test("the number of sets: the reply's count, at least 1; a refused or short reply says nothing (nil: legacy commands)")
    func capacity() {
        #expect(HCIDecisions.capacity(fromReply: [0, 6]) == 6)
        #expect(HCIDecisions.capacity(fromReply: [0, 0]) == 1)
        // Command Disallowed (the legacy family in use since the reset), Unknown HCI Command, a short reply.
        #expect(HCIDecisions.capacity(fromReply: [0x0C]) == nil && HCIDecisions.capacity(fromReply: [0x01]) == nil)
        #expect(HCIDecisions.capacity(fromReply: [0]) == nil && HCIDecisions.capacity(fromReply: nil) == nil)
    }

    @Test("the probe's line names the family the advertiser took, and why legacy on an extended controller")
    func probeLine() {
        let info = ControllerInfo(version: LocalVersionInformation(hciVersion: 10), commands: SupportedCommands(octets: []),
                                  features: LEFeatures(rawValue: 1 << 12))
        #expect(HCIDecisions.probeLines(info, family: .extended, capacity: 4, device: "hci0")[0].1.hasSuffix("using extended advertising commands, 4 advertising sets"))
        #expect(HCIDecisions.probeLines(info, family: .legacy, capacity: nil, device: "hci0")[0].1
                .hasSuffix("using legacy advertising commands (it refused LE Read Number of Supported Advertising Sets: the legacy family is in use there)"))
    }

    @Test("a slot's or a refresh's failed commands: unanswered is a lost controller; a refusal is an oddity of its own kind, tried again")
    func timedStepsFailed() {
        let refused = StepFailure(index: 1, step: Step(.leSetAdvertisingData(try! AdvertisingData(raw: [0x02, 0x01, 0x06]))),
                                  error: CommandError(opcode: .leSetAdvertisingData, reason: .status(.commandDisallowed)))
        let hung = StepFailure(index: 0, step: Step(.leSetAdvertisingEnable(false)),
                               error: CommandError(opcode: .leSetAdvertisingEnable, reason: .noCredit(.seconds(4))))
        guard case .oddity("slice", let m) = HCIDecisions.failed(.slice, refused, device: "hci0") else { Issue.record("not an oddity"); return }
        #expect(m.hasPrefix("The controller on hci0 refused the next time slice's data (") && m.hasSuffix("trying again at the next slot"))
        guard case .oddity("refresh", let r) = HCIDecisions.failed(.refresh, refused, device: "hci0") else { Issue.record("not an oddity"); return }
        #expect(r.contains("when beacond turned its advertising off and on again") && r.hasSuffix("trying again in 2 s"))
        for which in [HCIDecisions.TimedSteps.slice, .refresh] {
            guard case .lost(let f) = HCIDecisions.failed(which, hung, device: "hci0") else { Issue.record("not lost"); return }
            #expect(f.unanswered && f.fields.contains("HCI_OPCODE=0x200A"))
        }
    }

    @Test("a failed probe for advertising: the step named with the device, a malformed reply, the set count's read")
    func probeFailed() {
        let step = StepFailure(index: 0, step: Step(.leSetAdvertisingEnable(false)),
                               error: CommandError(opcode: .leSetAdvertisingEnable, reason: .noCredit(.seconds(4))))
        let probe = HCIDecisions.probeFailed(.probe(.step(step)), device: "hci0")
        #expect(probe == HCIDecisions.failed("probe the controller on hci0", step.error, device: "hci0") && probe.unanswered)
        #expect(HCIDecisions.probeFailed(.probe(.malformedReply), device: "hci0").message == "The controller on hci0 sent a malformed probe reply")
        #expect(HCIDecisions.probeFailed(.sets(step), device: "hci0").message.hasPrefix("Failed to read the number of advertising sets on hci0: "))
        #expect(HCIDecisions.probeProblem(.malformedReply) == "a malformed reply")
        #expect(HCIDecisions.probeProblem(.step(step)) == "\(step.step.command.opcode): \(step.error)")
    }
}
