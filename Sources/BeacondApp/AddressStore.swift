// The static addresses beacons advertise from by default: made from the kernel's CSPRNG at each beacon's first start
// and kept in the state directory's `addresses` file (DaemonCore's AddressBook), so each beacon has the same address
// after restarts and reboots, and every machine's are its own. The single `static-address` earlier versions kept
// goes to the first beacon when the file is first made, and is left in place.
import AESCipher
import BeaconCore
import BluetoothHCI
import DaemonCore
import SystemCalls
import SystemConditions

enum AddressStore {
    /// `$STATE_DIRECTORY` (its first entry) when systemd set it (StateDirectory=beacond), else /var/lib/beacond.
    static var directory: String {
        if let d = environment("STATE_DIRECTORY")?.split(separator: ":").first, !d.isEmpty { return String(d) }
        return "/var/lib/beacond"
    }

    static let fileName = "addresses"
    /// Which identities each device's beacond has configured now (AddressesInUse): never evicted from `addresses`.
    static let inUseFileName = "in-use"
    /// What versions before per-beacon addresses kept: one address for all beacons.
    static let legacyFileName = "static-address"

    struct Failure: Error, CustomStringConvertible {
        var description: String
        /// No state directory at all (none can be made: a user without one): a beacon without its own `address` may
        /// fall back to the public address. Anything else (a damaged or unreadable file, a directory not beacond's, a
        /// lock held by another) is refused, so that no beacon goes on the air from an address other than its kept one.
        var fallsBack = false
    }

    private static func failure(_ p: StateProblem) -> Failure {
        let refusal = p.staticAddressRefusal
        return Failure(description: refusal.message, fallsBack: refusal.fallsBack)
    }

    /// The kept address of each of `keys`, made and stored first for those that have none. Never replaces a file
    /// that cannot be read as one: a damaged one is an error that says what to do, not new identities on the air.
    /// `inUse`: every identity with a static address that `device`'s config has now (kept in `in-use`, so that no
    /// beacond sharing the directory evicts them when the book is full).
    static func load(_ keys: [String], avoiding chosen: Set<BluetoothAddress>, inUse: [String] = [], device: String? = nil,
                     in directory: String = directory) throws(Failure) -> [String: BluetoothAddress] {
        // Read, add and write as one step: a beacond on another device may add its beacons to the same file.
        try StateLock.whileWritingRecords(in: directory, failure: failure) { (dir) throws(Failure) in
            var inUseNow = readInUse(in: dir)
            if let device, inUseNow.set(inUse, for: device) {
                // The file only protects (the book's cap): one that cannot be written (a full disk) keeps its old lines,
                // which still protect, and never keeps the beacons off the air (issue #52).
                try? createFileDurably(named: inUseFileName, in: dir, contents: Array(inUseNow.text.utf8), mode: 0o644, exactMode: true, replacing: true)
            }
            return try assign(keys, avoiding: chosen, keeping: inUseNow.all.union(inUse), in: dir, path: directory)
        }
    }

    private static func readInUse(in dir: FileDescriptor) -> AddressesInUse {
        (try? dir.readFile(named: inUseFileName, limit: 1 << 20)).map { AddressesInUse(parsing: String(decoding: $0, as: UTF8.self)) } ?? AddressesInUse()
    }

    private static func assign(_ keys: [String], avoiding chosen: Set<BluetoothAddress>, keeping: Set<String>, in dir: FileDescriptor,
                               path directory: String) throws(Failure) -> [String: BluetoothAddress] {
        var (book, legacy) = try read(in: dir, path: directory)
        var randomFailure: (any Error)?
        let changed = book.assign(keys, legacy: legacy, avoiding: chosen, keeping: keeping, random: {
            do { return try kernelRandomBytes(6) } catch { randomFailure = error; return nil }
        })
        guard let changed else {
            throw Failure(description: "Cannot make a static address: \(randomFailure.map { "\($0)" } ?? "the kernel's random bytes were refused 16 times")")
        }
        if changed {
            do {
                // 0644 whatever the umask: the records are beacond's, and the tools of any user may show them.
                try createFileDurably(named: fileName, in: dir, contents: Array(book.text.utf8), mode: 0o644, exactMode: true, replacing: true)
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
        let dir: FileDescriptor
        do { dir = try StateLock.open(directory, create: false, writes: false) } catch {
            return error.kind == .absent ? .success([:]) : .failure(Failure(description: "\(error)"))
        }
        do throws(Failure) {
            let (book, legacy) = try read(in: dir, path: directory)
            var out: [String: BluetoothAddress] = [:]
            for k in keys { out[k] = book.address(for: k) }
            if book.entries.isEmpty, let legacy, let first = keys.first { out[first] = legacy }
            return .success(out)
        } catch {
            return .failure(error)
        }
    }

    /// The book (empty when there is no file yet) and, when there is no book, the earlier version's address.
    private static func read(in dir: FileDescriptor, path directory: String) throws(Failure) -> (AddressBook, legacy: BluetoothAddress?) {
        let path = "\(directory)/\(fileName)"
        let read: [UInt8]?
        do { read = try dir.readFileIfPresent(named: fileName, limit: 1 << 20) } catch {
            throw Failure(description: AddressBook.unreadable(path, error.condition, text: "\(error)"))
        }
        guard let bytes = read else { return (AddressBook(), try readLegacy(in: dir, path: directory)) }
        do {
            return (try AddressBook(parsing: String(decoding: bytes, as: UTF8.self)), nil)
        } catch {
            throw Failure(description: "\(path):\(error.line): \(error.reason); fix or remove that line (a removed line gives its beacon a new address)")
        }
    }

    private static func readLegacy(in dir: FileDescriptor, path directory: String) throws(Failure) -> BluetoothAddress? {
        let path = "\(directory)/\(legacyFileName)"
        do {
            guard let bytes = try dir.readFileIfPresent(named: legacyFileName, limit: 64) else { return nil }
            let text = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == " " }).first.map(String.init) ?? ""
            guard let a = BluetoothAddress(parsing: text), a.isStatic else {
                throw Failure(description: "\(path) does not hold a random static address (one line like C3:12:34:56:78:9A, the top two bits set); remove it to make a new one")
            }
            return a
        } catch let e as Failure {
            throw e
        } catch {
            throw Failure(description: "Cannot read \(path): \(error)")
        }
    }
}

/// The daemon's one AddressSource, for its whole life: the kept static addresses and the private addresses of the
/// period outlive a connection, so a controller that goes away and comes back within an address period gets the same
/// addresses again (a reconnect drew new private addresses when each connection had its own, issue #52).
final class AddressKeeper {
    var source = AddressSource()
}

/// DaemonCore's AddressChoice with the system's parts: the kept static addresses (AddressStore) and the kernel's
/// random bytes.
struct AddressSource {
    private var choice = AddressChoice()

    mutating func choose(_ schedule: AdvertisingSchedule, device: DeviceSpec) -> Result<AddressChoice.Choice, BackendFailure> {
        var chosen = Set<BluetoothAddress>()
        for case .chosen(let a)? in schedule.addresses.map(\.setting) { chosen.insert(a) }
        // Every identity of this config that keeps a static address, not only those loaded now (a reload that adds one
        // beacon loads that one): none of them may be evicted.
        var inUse: [String] = []
        for w in schedule.addresses where w.setting == nil || w.setting == .policy(.static) || w.known != nil { if !inUse.contains(w.key) { inUse.append(w.key) } }
        return choice.choose(schedule.addresses, generation: schedule.addressGeneration, loadStatic: { keys in
            do throws(AddressStore.Failure) {
                return .success(try AddressStore.load(keys, avoiding: chosen, inUse: inUse, device: device.description))
            } catch {
                return .failure(error.fallsBack ? .unavailable(error.description) : .damaged(error.description))
            }
        }, randomBytes: { try? kernelRandomBytes(6) }, cipher: { key, block in try AES128.encrypt(block, key: key) }).mapError { BackendFailure(message: $0.message, fields: ["HCI_DEVICE=\(device)"]) }
    }
}
