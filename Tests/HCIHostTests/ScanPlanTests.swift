// `scan`'s steps: per family, the masks a reset controller needs, and one switch of family on a refused start.
import BluetoothHCI
import HCIHost
import Testing

@Suite("scan plan")
struct ScanPlanTests {
    @Test("each family scans passively with its own commands, a stale scan turned off first")
    func steps() {
        #expect(ScanPlan(family: .legacy).startSteps.map(\.command.opcode) == [.leSetScanEnable, .leSetScanParameters, .leSetScanEnable])
        #expect(ScanPlan(family: .extended).startSteps.map(\.command.opcode) == [.leSetExtendedScanEnable, .leSetExtendedScanParameters, .leSetExtendedScanEnable])
        #expect(ScanPlan(family: .legacy).startSteps[0].tolerated == [.commandDisallowed])
        #expect(ScanPlan(family: .extended).stopSteps == [Step(.leSetExtendedScanEnable(enable: false, filterDuplicates: false))])
    }

    @Test("only a controller beacond reset needs the event masks")
    func masks() {
        #expect(ScanPlan.eventMasks(ownsController: false).isEmpty)
        #expect(ScanPlan.eventMasks(ownsController: true).map(\.command.opcode) == [.setEventMask, .leSetEventMask])
    }

    @Test("a start refused as the other family's users are switches family once, then gives up")
    func switchOnce() {
        var plan = ScanPlan(family: .extended)
        let refused = StepFailure(index: 1, step: plan.startSteps[1], error: CommandError(opcode: .leSetExtendedScanParameters, reason: .status(.unknownHCICommand)))
        #expect(plan.startFailed(refused) && plan.family == .legacy)
        let again = StepFailure(index: 1, step: plan.startSteps[1], error: CommandError(opcode: .leSetScanParameters, reason: .status(.unknownHCICommand)))
        #expect(!plan.startFailed(again) && plan.family == .legacy)
        // A refusal later in the sequence is not about the family.
        var other = ScanPlan(family: .legacy)
        let late = StepFailure(index: 2, step: other.startSteps[2], error: CommandError(opcode: .leSetScanEnable, reason: .status(.commandDisallowed)))
        #expect(!other.startFailed(late) && other.family == .legacy)
    }
}
