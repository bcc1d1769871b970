// When the lifecycle tries again: the backoff between attempts, the controller's silences in a row (the 2nd, 4th,
// 8th … power-cycle it), and how often another program took the beacons off the air in the last minute.

struct Retries: Sendable {
    private var backoff: Backoff
    /// Failures in a row on a kernel device in which the controller answered nothing (since the last time the
    /// beacons were on the air).
    private(set) var unanswered = 0
    /// When another program took the beacons off the air (CLOCK_MONOTONIC), within the last minute.
    private var reapplyTimes: [Duration] = []

    init(seed: UInt64) { backoff = Backoff(seed: seed) }

    /// The wait before the next attempt (each longer, up to the ceiling).
    mutating func next() -> Duration { backoff.next() }
    /// Start over with a short wait (the controller came back, the settings changed).
    mutating func reset() { backoff.reset() }

    /// The beacons are on the air: the silences and the waits start over.
    mutating func onAir() {
        unanswered = 0
        backoff.reset()
    }

    /// The controller answered nothing once more: whether to power-cycle it now (the 2nd, 4th, 8th … time).
    mutating func unansweredAgain() -> Bool {
        unanswered += 1
        return unanswered >= 2 && unanswered & (unanswered - 1) == 0
    }

    /// Another program took the beacons off the air at `now`: nil to put them back after the usual delay; the sixth
    /// time within a minute and after, the backoff's wait.
    mutating func reapplied(at now: Duration) -> Duration? {
        reapplyTimes = reapplyTimes.filter { now - $0 < .seconds(60) } + [now]
        return reapplyTimes.count > 5 ? backoff.next() : nil
    }
}

/// The periodic timers armed now: each exactly while it is wanted (a tick spends it).
struct PeriodicArming: Sendable {
    private var armed: Set<Lifecycle.PeriodicTimer> = []

    /// `timer` fired: it is armed no more.
    mutating func spent(_ timer: Lifecycle.PeriodicTimer) { armed.remove(timer) }

    /// Arms each timer wanted and not armed, cancels each armed and no longer wanted.
    mutating func sync(_ timers: [(Lifecycle.PeriodicTimer, wanted: Bool, period: Duration)]) -> [Lifecycle.Action] {
        var out: [Lifecycle.Action] = []
        for (timer, wanted, period) in timers {
            if wanted && !armed.contains(timer) {
                armed.insert(timer)
                out.append(.armPeriodic(timer, period))
            } else if !wanted && armed.contains(timer) {
                armed.remove(timer)
                out.append(.cancelPeriodic(timer))
            }
        }
        return out
    }
}
