// Another program's scan as the raw channel shows it: which commands are signs, and when beacond's own addresses may
// come back.
import BluetoothHCI
import HCIHost
import Testing

@Suite("another program's scan")
struct OtherScannerTests {
    @Test("the kernel's scan commands and its own random address are signs; advertising and other commands are not")
    func signs() {
        #expect(OtherScanner.sign(.leSetScanEnable, [1, 0]) == .scanEnabled)
        #expect(OtherScanner.sign(.leSetScanEnable, [0, 0]) == .scanDisabled)
        #expect(OtherScanner.sign(.leSetExtendedScanEnable, [1, 0, 0, 0, 0, 0]) == .scanEnabled)
        #expect(OtherScanner.sign(.leSetRandomAddress, [1, 2, 3, 4, 5, 6]) == .randomAddressWritten)
        #expect(OtherScanner.sign(.leSetScanEnable, []) == nil)  // too short to say
        #expect(OtherScanner.sign(.leSetAdvertisingEnable, [1]) == nil)
        #expect(OtherScanner.sign(.leSetScanParameters, [1, 0x12, 0, 0x12, 0, 1, 0]) == nil)
        #expect(OtherScanner.takesTheAddress(.scanEnabled) && OtherScanner.takesTheAddress(.randomAddressWritten))
        #expect(!OtherScanner.takesTheAddress(.scanDisabled) && !OtherScanner.takesTheAddress(.ownAddressRefused))
    }

    @Test("a scan that restarts never looks ended; one whole quiet period after it ends lets the own addresses back")
    func quietPeriod() {
        var s = OtherScanner()
        // Each tick, in order: may beacond try its own addresses?
        var ticks: [Bool] = []
        func tick() { ticks.append(s.tick()) }
        tick()  // nothing seen: beacond may try
        s.saw(.scanEnabled)
        tick(); tick()  // on, whatever the periods
        // Restarts: off and on again within a period.
        s.saw(.scanDisabled)
        s.saw(.scanEnabled)
        tick()
        // The end: off, then the period it fell in, then a quiet one.
        s.saw(.scanDisabled)
        tick(); tick()
        // A refusal of beacond's address (a scan beacond saw no command of, on an H4 controller) is a sign too.
        s.saw(.ownAddressRefused)
        tick(); tick()
        #expect(ticks == [true, false, false, false, false, true, false, true])
    }
}
