// The ownership record's file in the state directory (DaemonCore's OwnershipRecord is its contents): read once,
// written durably whenever what beacond put on a controller changes. One store per process, shared by the
// backends and the daemon, so that what one backend added is known to the next (a reconnect, a device change).
import DaemonCore
import SystemCalls

final class OwnershipStore {
    static let fileName = "owned"

    private let directory: String
    private let log: Logger
    private var record: OwnershipRecord?
    /// Without a state directory (a hand-started beacond without root) the record lives in memory only: said once.
    private var warned = false

    init(directory: String = AddressStore.directory, log: Logger) {
        self.directory = directory
        self.log = log
    }

    private var path: String { "\(directory)/\(Self.fileName)" }

    private func loaded() -> OwnershipRecord {
        if let record { return record }
        var r = OwnershipRecord()
        do throws(StateProblem) {
            r = read(try StateLock.open(directory, create: false))
        } catch {
            if let warning = error.ownershipUnread(path) { log.warning(warning) }
        }
        record = r
        return r
    }

    /// The record in the directory `dir` is open on (none yet: an empty one).
    private func read(_ dir: FileDescriptor) -> OwnershipRecord {
        do {
            guard let bytes = try dir.readFileIfPresent(named: Self.fileName, limit: 1 << 16) else { return OwnershipRecord() }
            let r = OwnershipRecord(parsing: String(decoding: bytes, as: UTF8.self))
            if r.skippedLines > 0 {
                log.warning("\(path): \(r.skippedLines) line\(r.skippedLines == 1 ? "" : "s") not understood and skipped; what they named is not removed")
            }
            return r
        } catch {
            log.warning("Cannot read \(path): \(error); what an earlier run left on the controller is not removed")
        }
        return OwnershipRecord()
    }

    subscript(device: String, kind: OwnershipRecord.Kind) -> Set<UInt8> {
        get { loaded()[device, kind] }
        set {
            guard loaded()[device, kind] != newValue else { return }
            do throws(StateProblem) {
                // This device's line in what the file holds now: a beacond on another device with the same state
                // directory writes its own lines (each device's lock has one holder: StateLock).
                try StateLock.whileWritingRecords(in: directory, failure: { $0 }) { (dir) throws(StateProblem) in
                    var r = read(dir)
                    r[device, kind] = newValue
                    record = r
                    do {
                        // 0644 whatever the umask, as the addresses.
                        try createFileDurably(named: Self.fileName, in: dir, contents: Array(r.text.utf8), mode: 0o644, exactMode: true, replacing: true)
                    } catch {
                        throw StateProblem(kind: .unusable, description: "\(error)")
                    }
                }
            } catch {
                // Kept in memory all the same: this run still removes what it added.
                var r = loaded()
                r[device, kind] = newValue
                record = r
                if !warned {
                    warned = true
                    log.warning("Cannot keep \(path): \(error); if beacond is killed, the next start cannot remove what it left on the controller")
                }
            }
        }
    }
}
