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
