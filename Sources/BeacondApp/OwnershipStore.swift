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
        do {
            let bytes = try FileDescriptor.readFile(path, limit: 1 << 16)
            r = OwnershipRecord(parsing: String(decoding: bytes, as: UTF8.self))
            if r.skippedLines > 0 {
                log.warning("\(path): \(r.skippedLines) line\(r.skippedLines == 1 ? "" : "s") not understood and skipped; what they named is not removed")
            }
        } catch where error.errno == .noEntry {
        } catch {
            log.warning("Cannot read \(path): \(error); what an earlier run left on the controller is not removed")
        }
        record = r
        return r
    }

    subscript(device: String, kind: OwnershipRecord.Kind) -> Set<UInt8> {
        get { loaded()[device, kind] }
        set {
            guard loaded()[device, kind] != newValue else { return }
            do throws(SystemError) {
                // This device's line in what the file holds now: a beacond on another device with the same state
                // directory writes its own lines (each device's lock has one holder: StateLock).
                try StateLock.whileWritingRecords(in: directory) { () throws(SystemError) in
                    record = nil
                    var r = loaded()
                    r[device, kind] = newValue
                    record = r
                    try createFileDurably(named: Self.fileName, in: directory, contents: Array(r.text.utf8), replacing: true)
                }
            } catch {
                if !warned {
                    warned = true
                    log.warning("Cannot keep \(path): \(error); if beacond is killed, the next start cannot remove what it left on the controller")
                }
            }
        }
    }
}
