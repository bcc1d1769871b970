// What an encrypted BTHome self-report keeps in the state directory: its static address (the `addresses` file, as
// every static beacon's) and its counters (`bthome-counters`, DaemonCore's CounterBook), reserved a block at a time
// and written durably before any frame uses them. The lifecycle asks (`supplySelfReport`); this answers.
import BluetoothHCI
import DaemonCore
import SystemCalls

enum SelfReportStore {
    static let fileName = "bthome-counters"

    static func supply(_ needs: SelfReportNeeds, in directory: String = AddressStore.directory,
                       clock: UInt32 = UInt32(clamping: wallClock().seconds)) -> SelfReportSupply {
        var address = needs.address
        if let key = needs.addressKey {
            do throws(AddressStore.Failure) {
                address = try AddressStore.load([key], avoiding: needs.avoiding, in: directory)[key]
            } catch {
                return SelfReportSupply(failure: error.description)
            }
        }
        guard let address else { return SelfReportSupply(failure: "No static address was kept for the BTHome self-report") }
        guard let from = needs.countersFrom else { return SelfReportSupply(address: address, clock: clock) }
        do throws(Failure) {
            return SelfReportSupply(address: address, counters: try reserve(address, from: from, in: directory, clock: clock), clock: clock)
        } catch {
            return SelfReportSupply(address: address, failure: error.description)
        }
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// The counter the next start would use first for `address` (the wall clock's seconds at least), without writing anything;
    /// nil when the file cannot be read here.
    static func peek(_ address: BluetoothAddress, in directory: String = AddressStore.directory,
                     clock: UInt32 = UInt32(clamping: wallClock().seconds)) -> UInt32? {
        do throws(SystemError) {
            let bytes = try FileDescriptor.readFile("\(directory)/\(fileName)", limit: 1 << 20)
            return (try? CounterBook(parsing: String(decoding: bytes, as: UTF8.self))).map { max($0.entries[address] ?? 0, clock) }
        } catch {
            return error.errno == .noEntry ? clock : nil
        }
    }

    /// Reads the book, raises `address`'s number by a block and writes it back durably, under the records' lock
    /// (beacond on another device may share the directory).
    static func reserve(_ address: BluetoothAddress, from: UInt32, count: UInt32 = CounterBook.block, in directory: String,
                        clock: UInt32 = UInt32(clamping: wallClock().seconds)) throws(Failure) -> CounterReservation {
        let path = "\(directory)/\(fileName)"
        let failure = { (p: StateProblem) in Failure(description: "Cannot keep the BTHome counters: \(p)") }
        return try StateLock.whileWritingRecords(in: directory, failure: failure) { (dir) throws(Failure) -> CounterReservation in
            var text = ""
            do throws(SystemError) {
                text = String(decoding: try dir.readFileIfPresent(named: fileName, limit: 1 << 20) ?? [], as: UTF8.self)
            } catch {
                throw Failure(description: "Cannot read \(path): \(error)")
            }
            var book: CounterBook
            do throws(CounterBook.Damaged) { book = try CounterBook(parsing: text) } catch {
                // Never start over from 0 on a damaged file: receivers would drop every frame.
                throw Failure(description: "\(path):\(error.line): \(error.reason); fix that line (a number only ever goes up)")
            }
            let r = book.reserve(address, from: from, count: count, clock: clock)
            do {
                try createFileDurably(named: fileName, in: dir, contents: Array(book.text.utf8), mode: 0o644, exactMode: true, replacing: true)
            } catch {
                throw Failure(description: "Cannot keep the BTHome counters in \(directory): \(error); give beacond a state directory (the unit's StateDirectory=beacond)")
            }
            return r
        }
    }
}
