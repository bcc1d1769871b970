// The event loop's sources: fire-once timers must not pile up (`beacond scan` made one a second and kept them all).
import SystemdSupport
import Testing

@Suite("event loop")
struct EventLoopTests {
    @Test("bug: a fire-once timer is released after it fires; one that rearms itself stays, as one source")
    func fireOnceTimersDoNotAccumulate() throws {
        let loop = try EventLoop()
        let baseline = loop.sourceCount
        var fired = 0
        var ticks = 0
        // The loop ends when every timer has done its part, not after a fixed 200 ms: a CI run at nice 10 on a loaded
        // machine got there with the ticker short of its 20 ticks (a time bound in a test is a load test). The
        // backstop's exit code 1 fails the test instead of hanging it.
        var backstop: EventSource?
        func finishWhenDone() {
            guard fired == 100 && ticks == 20 else { return }
            backstop?.cancel()
            loop.exit(code: 0)
        }
        for i in 0..<100 {
            _ = try loop.addTimer(after: .milliseconds(Int64(1 + i % 5))) { fired += 1; finishWhenDone() }
        }
        var ticker: EventSource?
        ticker = try loop.addTimer(after: .milliseconds(1)) {
            ticks += 1
            if ticks < 20 { ticker?.rearm(after: .milliseconds(1)) }
            finishWhenDone()
        }
        backstop = try loop.addTimer(after: .seconds(60)) { loop.exit(code: 1) }
        #expect(try loop.run() == 0)
        #expect(fired == 100 && ticks == 20)
        // Only the ticker may remain (its last run did not rearm it, so it is gone too).
        #expect(loop.sourceCount == baseline, "\(loop.sourceCount - baseline) timers left registered after firing")
    }

    @Test("an idle timer stays registered while disarmed, for rearming later")
    func idleTimersStay() throws {
        let loop = try EventLoop()
        let baseline = loop.sourceCount
        var fired = 0
        let t = try loop.addIdleTimer { fired += 1; loop.exit(code: 0) }
        t.rearm(after: .milliseconds(1))
        let backstop = try loop.addTimer(after: .seconds(60)) { loop.exit(code: 1) }
        #expect(try loop.run() == 0)
        backstop.cancel()
        #expect(fired == 1 && loop.sourceCount == baseline + 1)
        t.cancel()
        #expect(loop.sourceCount == baseline)
    }
}
