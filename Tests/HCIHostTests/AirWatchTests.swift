// The watch over what reaches a kernel controller, driven by hand: enable commands and times in, a verdict out.
import BluetoothHCI
import HCIHost
import Testing

private func s(_ x: Double) -> Duration { .milliseconds(Int64(x * 1000)) }

/// LE Set Extended Advertising Enable's parameters: enable, the count, and each set's handle, duration, max events.
private func ext(_ enable: UInt8, _ handles: [UInt8]) -> [UInt8] {
    [enable, UInt8(handles.count)] + handles.flatMap { [$0, 0, 0, 0] }
}

@Suite("what reaches the controller (AirWatch)")
struct AirWatchTests {
    @Test("legacy: a disable the kernel ends within the grace is nothing; one it does not end is due after 3 s, then after 6, 12 … up to 60 s until an enable is seen")
    func legacy() {
        var w = AirWatch(sets: false, ours: [1])
        #expect(w.nextCheck == nil)
        // The kernel's own rotation or address change: off for milliseconds.
        w.command(.leSetAdvertisingEnable, [0], at: s(10))
        w.command(.leSetAdvertisingEnable, [1], at: s(10.004))
        let due = w.due(at: s(20))
        #expect(w.nextCheck == nil && !due)
        // Off and left off.
        w.command(.leSetAdvertisingEnable, [0], at: s(30))
        w.command(.leSetAdvertisingEnable, [0], at: s(31))  // a second disable does not move the start
        #expect(w.nextCheck == s(33))
        let early = w.due(at: s(32.9)), onTime = w.due(at: s(33))
        #expect(!early && onTime)
        // The put-back brought nothing back: the next wait doubles, and doubles again.
        #expect(w.nextCheck == s(39))
        let before = w.due(at: s(38)), then = w.due(at: s(39))
        #expect(!before && then)
        #expect(w.nextCheck == s(51))
        for _ in 0..<10 { _ = w.due(at: w.nextCheck!) }
        #expect(w.wait == AirWatch.longestWait)
        // An enable: on again, and the wait starts from the grace.
        w.command(.leSetAdvertisingEnable, [1], at: s(500))
        #expect(w.nextCheck == nil && w.wait == AirWatch.grace)
        // Extended commands mean nothing to a controller without sets, nor other commands.
        w.command(.leSetExtendedAdvertisingEnable, ext(0, []), at: s(600))
        w.command(.leSetAdvertisingData, [0], at: s(600))
        #expect(w.nextCheck == nil)
    }

    @Test("sets: only beacond's handles count; a disable of all sets (count 0) counts; each must be enabled again; a set no longer beacond's is no longer followed")
    func sets() {
        var w = AirWatch(sets: true, ours: [1, 2])
        w.command(.leSetExtendedAdvertisingEnable, ext(0, [3]), at: s(1))  // another program's set
        #expect(w.nextCheck == nil)
        w.command(.leSetExtendedAdvertisingEnable, ext(0, []), at: s(2))  // all sets
        #expect(w.offSince == s(2))
        w.command(.leSetExtendedAdvertisingEnable, ext(1, [1]), at: s(2.01))
        #expect(w.offSince == s(2))  // set 2 is still off
        w.command(.leSetExtendedAdvertisingEnable, ext(1, [2, 3]), at: s(2.02))
        #expect(w.offSince == nil)
        w.command(.leSetExtendedAdvertisingEnable, ext(0, [2]), at: s(5))
        #expect(w.nextCheck == s(8))
        // A reload leaves set 2 out: nothing of beacond's is off any more.
        w.applied(ours: [1])
        #expect(w.nextCheck == nil)
        // The legacy command means nothing on a controller with sets.
        w.command(.leSetAdvertisingEnable, [0], at: s(9))
        #expect(w.nextCheck == nil)
        // A Reset takes everything off until the kernel enables it again.
        w.command(.reset, [], at: s(10))
        #expect(w.nextCheck == s(13))
        w.command(.leSetExtendedAdvertisingEnable, ext(1, [1]), at: s(10.5))
        #expect(w.nextCheck == nil)
    }

    @Test("a put-back the kernel does not enable leaves the advertising off: the watch waits on after the apply")
    func putBackNotEnabled() {
        var w = AirWatch(sets: false, ours: [1])
        w.command(.leSetAdvertisingEnable, [0], at: s(0))
        let due = w.due(at: s(3))
        #expect(due)
        w.applied(ours: [1])
        #expect(w.nextCheck == s(9))
        // Malformed commands are ignored, not trusted.
        w.command(.leSetAdvertisingEnable, [], at: s(4))
        w.command(.leSetExtendedAdvertisingEnable, [1], at: s(4))
        #expect(w.nextCheck == s(9))
    }
}
