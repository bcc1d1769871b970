// The static addresses beacons advertise from by default: made from the kernel's CSPRNG at each beacon's first start
// and kept in the state directory's `addresses` file (DaemonCore's AddressBook), so each beacon has the same address
// after restarts and reboots, and every machine's are its own. The single `static-address` earlier versions kept
// goes to the first beacon when the file is first made, and is left in place.
import AESCipher
import BeaconCore
import BluetoothHCI
import DaemonCore
import SystemCalls
import SystemdSupport

enum AddressStore {
    /// `$STATE_DIRECTORY` (its first entry) when systemd set it (StateDirectory=beacond), else /var/lib/beacond.
    static var directory: String {
        if let d = environment("STATE_DIRECTORY")?.split(separator: ":").first, !d.isEmpty { return String(d) }
        return "/var/lib/beacond"
    }

    static let fileName = "addresses"
    /// What versions before per-beacon addresses kept: one address for all beacons.
    static let legacyFileName = "static-address"

    struct Failure: Error, CustomStringConvertible {
        var description: String
        /// The file is there but damaged: addresses were made and gateways may know them (not a missing directory).
        var damaged = false
    }

    /// The kept address of each of `keys`, made and stored first for those that have none. Never replaces a file
    /// that cannot be read as one: a damaged one is an error that says what to do, not new identities on the air.
    static func load(_ keys: [String], avoiding chosen: Set<BluetoothAddress>, in directory: String = directory) throws(Failure) -> [String: BluetoothAddress] {
        // Read, add and write as one step: a beacond on another device may add its beacons to the same file.
        try StateLock.whileWritingRecords(in: directory) { () throws(Failure) in try assign(keys, avoiding: chosen, in: directory) }
    }

    private static func assign(_ keys: [String], avoiding chosen: Set<BluetoothAddress>, in directory: String) throws(Failure) -> [String: BluetoothAddress] {
        var (book, legacy) = try read(in: directory)
        var randomFailure: (any Error)?
        let changed = book.assign(keys, legacy: legacy, avoiding: chosen, random: {
            do { return try RandomID.bytes(6) } catch { randomFailure = error; return nil }
        })
        guard let changed else {
            throw Failure(description: "Cannot make a static address: \(randomFailure.map { "\($0)" } ?? "the kernel's random bytes were refused 16 times")")
        }
        if changed {
            do {
                try createFileDurably(named: fileName, in: directory, contents: Array(book.text.utf8), replacing: true)
            } catch where error.call.hasPrefix("mkdir") {
                throw Failure(description: "Cannot keep a static address: mkdir \(directory): \(error.errno); give beacond a state directory (the unit's StateDirectory=beacond) or set address = \"public\" or \"rotating\"")
            } catch {
                throw Failure(description: "Cannot keep a static address in \(directory): \(error); give beacond a state directory (the unit's StateDirectory=beacond) or set address = \"public\" or \"rotating\"")
            }
        }
        var out: [String: BluetoothAddress] = [:]
        for k in keys { out[k] = book.address(for: k) }
        return out
    }

    /// What the tools show without making anything: each key's address if one is kept (or would come from the
    /// earlier version's file). Failure: why the directory cannot be read here.
    static func peek(_ keys: [String], in directory: String = directory) -> Result<[String: BluetoothAddress], Failure> {
        do {
            let (book, legacy) = try read(in: directory)
            var out: [String: BluetoothAddress] = [:]
            for k in keys { out[k] = book.address(for: k) }
            if book.entries.isEmpty, let legacy, let first = keys.first { out[first] = legacy }
            return .success(out)
        } catch {
            return .failure(error)
        }
    }

    /// The book (empty when there is no file yet) and, when there is no book, the earlier version's address.
    private static func read(in directory: String) throws(Failure) -> (AddressBook, legacy: BluetoothAddress?) {
        let path = "\(directory)/\(fileName)"
        do {
            let bytes = try FileDescriptor.readFile(path, limit: 1 << 20)
            do {
                return (try AddressBook(parsing: String(decoding: bytes, as: UTF8.self)), nil)
            } catch {
                throw Failure(description: "\(path):\(error.line): \(error.reason); fix or remove that line (a removed line gives its beacon a new address)",
                              damaged: true)
            }
        } catch let e as Failure {
            throw e
        } catch let e as SystemError where e.errno == .noEntry {
            return (AddressBook(), try readLegacy(in: directory))
        } catch let e as SystemError where e.errno == .tooLarge {
            throw Failure(description: "\(path) is larger than 1 MiB, far more than beacond writes: fix it, or remove it (every beacon then gets a new address)",
                          damaged: true)
        } catch {
            throw Failure(description: "Cannot read \(path): \(error)")
        }
    }

    private static func readLegacy(in directory: String) throws(Failure) -> BluetoothAddress? {
        let path = "\(directory)/\(legacyFileName)"
        do {
            let bytes = try FileDescriptor.readFile(path, limit: 64)
            let text = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == " " }).first.map(String.init) ?? ""
            guard let a = BluetoothAddress(parsing: text), a.isStatic else {
                throw Failure(description: "\(path) does not hold a random static address (one line like C3:12:34:56:78:9A, the top two bits set); remove it to make a new one",
                              damaged: true)
            }
            return a
        } catch let e as Failure {
            throw e
        } catch let e as SystemError where e.errno == .noEntry {
            return nil
        } catch {
            throw Failure(description: "Cannot read \(path): \(error)")
        }
    }
}

/// DaemonCore's AddressChoice with the system's parts: the kept static addresses (AddressStore) and the kernel's
/// random bytes.
struct AddressSource {
    private var choice = AddressChoice()

    mutating func choose(_ schedule: AdvertisingSchedule, device: DeviceSpec) -> Result<AddressChoice.Choice, BackendFailure> {
        var chosen = Set<BluetoothAddress>()
        for case .chosen(let a)? in schedule.addresses.map(\.setting) { chosen.insert(a) }
        return choice.choose(schedule.addresses, generation: schedule.addressGeneration, loadStatic: { keys in
            do throws(AddressStore.Failure) { return .success(try AddressStore.load(keys, avoiding: chosen)) } catch {
                return .failure(error.damaged ? .damaged(error.description) : .unavailable(error.description))
            }
        }, randomBytes: { try? RandomID.bytes(6) }, cipher: { key, block in try AES128.encrypt(block, key: key) }).mapError { BackendFailure(message: $0.message, fields: ["HCI_DEVICE=\(device)"]) }
    }
}
