// The log front end: native journal entries with structured fields under journald, plain stderr lines otherwise.
import BeaconCore
import SystemdSupport

final class Logger {
    var maxLevel: LogLevel
    let toJournal: Bool

    init(level: LogLevel) {
        maxLevel = level
        toJournal = Journal.stderrIsJournal()
    }

    /// One event, one line. `fields` are extra journal fields (`BEACON_UUID=…`); plain stderr shows only the message.
    func log(_ level: LogLevel, _ message: String, _ fields: [String] = []) {
        guard level <= maxLevel else { return }
        if toJournal {
            let entry = ["MESSAGE=\(message)", "PRIORITY=\(level.rawValue)", "SYSLOG_IDENTIFIER=beacond"] + fields
            if Journal.send(entry) { return }
            Output.err("<\(level.rawValue)>\(message)\n")  // journald refused: its stream still takes the prefix form
            return
        }
        Output.err(message + "\n")
    }

    func error(_ m: String, _ f: [String] = []) { log(.err, m, f) }
    func warning(_ m: String, _ f: [String] = []) { log(.warning, m, f) }
    func notice(_ m: String, _ f: [String] = []) { log(.notice, m, f) }
    func info(_ m: String, _ f: [String] = []) { log(.info, m, f) }
    func debug(_ m: String, _ f: [String] = []) { log(.debug, m, f) }
}

/// Exponential backoff from 250 ms to 30 s with ±20 % jitter (never above 30 s), so a fleet does not retry in lockstep.
struct Backoff {
    static let first = Duration.milliseconds(250)
    static let limit = Duration.seconds(30)
    private(set) var attempt = 0

    mutating func next() -> Duration {
        var base = Self.first
        for _ in 0..<attempt where base < Self.limit { base *= 2 }
        if base > Self.limit { base = Self.limit }
        attempt += 1
        let jittered = base * Double.random(in: 0.8...1.2)
        return min(jittered, Self.limit)
    }

    mutating func reset() { attempt = 0 }
}

/// `250 ms`, `4 s`, `1.5 s`.
func formatDuration(_ d: Duration) -> String {
    let ms = Int(d.components.seconds) * 1000 + Int(d.components.attoseconds / 1_000_000_000_000_000)
    if ms < 1000 { return "\(ms) ms" }
    if ms % 1000 == 0 || ms >= 10_000 { return "\((ms + 500) / 1000) s" }
    return "\(ms / 1000).\((ms % 1000) / 100) s"
}
