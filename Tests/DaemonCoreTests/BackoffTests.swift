// The retry backoff and how durations print.
import BeaconCore
@testable import DaemonCore
import Testing

@Suite("retry backoff")
struct BackoffTests {
    @Test("doubles from 250 ms to a 30 s ceiling, within ±20 % jitter, and resets")
    func doubling() {
        var b = Backoff(seed: 7)
        var bases: [Double] = [0.25, 0.5, 1, 2, 4, 8, 16, 30, 30, 30]
        for base in bases {
            let d = b.next()
            let s = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
            #expect(s >= base * 0.8 - 1e-9 && s <= min(base * 1.2, 30) + 1e-9, "\(s) vs \(base)")
        }
        b.reset()
        bases = [0.25]
        let s = b.next()
        #expect(s <= .milliseconds(300) && s >= .milliseconds(200))
    }

    @Test("durations print as people read them")
    func format() {
        #expect(formatDuration(.milliseconds(250)) == "250 ms")
        #expect(formatDuration(.milliseconds(4000)) == "4 s")
        #expect(formatDuration(.milliseconds(1500)) == "1.5 s")
        #expect(formatDuration(.seconds(30)) == "30 s")
    }
}
