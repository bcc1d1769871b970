// Which address each beacon advertises from: the static addresses kept per beacon identity (the state directory's
// `addresses` file, as a value), and the choice per beacon for its setting. Pure: the file's bytes and the kernel's
// random bytes are passed in by the backend.
import BeaconCore
import BluetoothHCI
import HCIHost
import SystemConditions

/// The state directory's `addresses` file: one random static address per beacon identity, made at that beacon's
/// first start and kept, so a beacon keeps its address across restarts, reboots, a new adapter, a reordered file and
/// other beacons coming and going. Entries of beacons no longer configured stay: put back, a beacon gets its address
/// back; at most `limit` entries are kept, the oldest of the beacons no longer configured going first. A beacon that is
/// configured now, on this device or another sharing the file (`keeping`), never goes.
public struct AddressBook: Sendable, Hashable {
    public private(set) var entries: [(key: String, address: BluetoothAddress)]

    public static func == (a: Self, b: Self) -> Bool {
        a.entries.map(\.key) == b.entries.map(\.key) && a.entries.map(\.address) == b.entries.map(\.address)
    }
    public func hash(into h: inout Hasher) { for e in entries { h.combine(e.key); h.combine(e.address) } }

    public init() { entries = [] }

    /// How many entries the book keeps: far more than a radio carries, and a file (about 80 bytes an entry) well
    /// under the 1 MiB beacond reads.
    public static let limit = 4096

    /// A line of the file that holds no entry.
    public struct Damaged: Error, Sendable, Hashable {
        public var line: Int
        public var reason: String
    }

    /// The file's text: `# comments`, blank lines, and `C6:12:34:56:78:9A <identity>` lines.
    public init(parsing text: String) throws(Damaged) {
        entries = []
        var keys = Set<String>()
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.drop { $0 == " " }
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let a = BluetoothAddress(parsing: String(parts[0])), a.isStatic else {
                throw Damaged(line: n + 1, reason: "not a random static address followed by a beacon's identity")
            }
            let key = String(parts[1])
            guard keys.insert(key).inserted else { throw Damaged(line: n + 1, reason: "a second address for \(key)") }
            entries.append((key, a))
        }
    }

    public func address(for key: String) -> BluetoothAddress? { entries.first { $0.key == key }?.address }

    /// Gives every key of `keys` without an address one: `legacy` (the single static address earlier versions kept)
    /// goes to the first key when the book is new, so an upgrade changes nothing for the first beacon; the others
    /// get fresh ones from `random`, never one another beacon has or `avoiding` names (chosen addresses). Past the
    /// limit, the oldest entries go that are neither among `keys` nor `keeping` (every identity configured now, here
    /// and on the other devices sharing the file: a reload that adds one beacon passes only the new one as `keys`).
    /// Returns whether the book changed; nil when the random bytes ran out.
    public mutating func assign(_ keys: [String], legacy: BluetoothAddress?, avoiding: Set<BluetoothAddress> = [], keeping: Set<String> = [],
                                limit: Int = limit, random: () -> [UInt8]?) -> Bool? {
        var changed = false
        defer {
            // Over the limit: the oldest entries of beacons not configured now go (their beacons get new addresses
            // if they ever come back).
            if changed, entries.count > limit {
                let current = Set(keys).union(keeping)
                var excess = entries.count - limit
                entries.removeAll { e in
                    guard excess > 0, !current.contains(e.key) else { return false }
                    excess -= 1
                    return true
                }
            }
        }
        var legacy = entries.isEmpty ? legacy.flatMap { $0.isStatic ? $0 : nil } : nil
        for key in keys where address(for: key) == nil {
            if let l = legacy {
                entries.append((key, l))
                legacy = nil
                changed = true
                continue
            }
            var made: BluetoothAddress?
            for _ in 0..<16 {
                guard let bytes = random() else { return nil }
                if let a = BluetoothAddress.makeStatic(from: bytes), !avoiding.contains(a), !entries.contains(where: { $0.address == a }) {
                    made = a
                    break
                }
            }
            guard let made else { return nil }
            entries.append((key, made))
            changed = true
        }
        return changed
    }

    public var text: String {
        "# beacond's static addresses, one per beacon (by its identity), each made at that beacon's first start.\n"
            + "# Keep this file to keep the addresses gateways know; remove a line to give that beacon a new one.\n"
            + entries.map { "\($0.address) \($0.key)\n" }.joined()
    }
}

/// The state directory's `in-use` file: the identities with a kept static address that each device's beacond has
/// configured now, so that the address book's cap never takes the address of a beacon that is on the air on any device
/// sharing the directory. Each beacond replaces its device's lines; a device's lines stay after its beacond stopped
/// (they only keep addresses a while longer) until its next run writes them anew. Lines it does not understand are
/// skipped: the file only ever protects.
public struct AddressesInUse: Sendable, Hashable {
    public private(set) var byDevice: [String: [String]] = [:]

    public init() {}

    /// `DEVICE IDENTITY` lines, the device with anything but letters, digits, `.`, `-`, `:` and `/` as %XX.
    public init(parsing text: String) {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let device = Self.decode(parts[0]) else { continue }
            byDevice[device, default: []].append(String(parts[1]))
        }
    }

    /// Every identity in use on any device.
    public var all: Set<String> { Set(byDevice.values.joined()) }

    /// Sets `device`'s identities; whether that changed the file.
    public mutating func set(_ keys: [String], for device: String) -> Bool {
        let old = byDevice[device] ?? []
        byDevice[device] = keys.isEmpty ? nil : keys
        return old != keys
    }

    public var text: String {
        "# The beacons each beacond has configured now (by device): their static addresses are always kept.\n"
            + byDevice.keys.sorted().flatMap { d in byDevice[d]!.map { "\(Self.encode(d)) \($0)\n" } }.joined()
    }

    private static func encode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            if (0x30...0x3A).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == 0x2E || b == 0x2D || b == 0x2F {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + String(b >> 4, radix: 16, uppercase: true) + String(b & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    private static func decode(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var i = s.utf8.startIndex
        let u = s.utf8
        while i < u.endIndex {
            if u[i] == 0x25 {
                let a = u.index(after: i)
                guard a < u.endIndex, u.index(after: a) < u.endIndex,
                      let v = UInt8(String(decoding: u[a...u.index(after: a)], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(v)
                i = u.index(a, offsetBy: 2)
            } else {
                bytes.append(u[i])
                i = u.index(after: i)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Which address the controller is told each beacon advertises from, for its setting: the decisions, with the two
/// things that need the system (the kept static addresses, fresh random bytes) passed in by the backend.
public struct AddressChoice: Sendable {
    private var kept: [String: BluetoothAddress] = [:]
    /// A beacon without an `address` and no static address could be kept: the public address from then on, said once.
    private var fellBack = false
    /// The rotating and resolvable addresses of this period, with the key a resolvable one was made with (a reload
    /// that changes the key or the kind gets a new address at once).
    private var rotating: [String: (generation: UInt64, address: BluetoothAddress, irk: IdentityKey?)] = [:]

    public init() {}

    /// Why the static addresses could not be had.
    public enum StaticFailure: Error, Sendable, Hashable {
        /// No state directory to keep them in (a hand-started beacond without root): the default may fall back.
        case unavailable(String)
        /// The file is there but damaged: addresses were made and gateways may know them. Never replaced silently.
        case damaged(String)
    }

    /// No address: the sentence to say.
    public struct Refusal: Error, Sendable, Hashable {
        public var message: String
    }

    public struct Choice: Sendable, Hashable {
        /// One per beacon, in the order asked.
        public var addresses: [OwnAddress]
        /// Say this once: the default fell back to the public address.
        public var warning: String?
    }

    /// `generation`: the rotating and resolvable addresses' period. `cipher` (AES-128) makes the resolvable ones.
    /// `loadStatic` gets the identities that need a kept static
    /// address and returns the address of each (making the missing ones); it is called only for identities not
    /// loaded before on this connection.
    public mutating func choose(_ wanted: [BeaconAddressWanted], generation: UInt64,
                                loadStatic: ([String]) -> Result<[String: BluetoothAddress], StaticFailure>,
                                randomBytes: () -> [UInt8]?, cipher: BlockCipher? = nil) -> Result<Choice, Refusal> {
        var warning: String?
        let needStatic = wanted.filter { w in
            guard w.known == nil else { return false }
            switch w.setting {
            case nil: return !fellBack
            case .policy(.static)?: return true
            default: return false
            }
        }.map(\.key).filter { kept[$0] == nil }
        if !needStatic.isEmpty {
            var keys: [String] = []
            for k in needStatic where !keys.contains(k) { keys.append(k) }
            switch loadStatic(keys) {
            case .success(let got):
                kept.merge(got) { _, new in new }
            case .failure(.unavailable(let why)) where !wanted.contains(where: { $0.setting == .policy(.static) }):
                fellBack = true
                warning = "\(why); advertising from the controller's public address until it can be kept"
            case .failure(.unavailable(let why)), .failure(.damaged(let why)):
                return .failure(Refusal(message: why))
            }
        }
        var out: [OwnAddress] = []
        for w in wanted {
            if let a = w.known {
                out.append(.random(a))
                continue
            }
            switch w.setting {
            case .policy(.public)?: out.append(.public)
            case .chosen(let a)?: out.append(.random(a))
            case nil where fellBack: out.append(.public)
            case nil, .policy(.static)?:
                guard let a = kept[w.key] else { return .failure(Refusal(message: "No static address was kept for \(w.key)")) }
                out.append(.random(a))
            case .policy(.rotating)?, .policy(.resolvable)?:
                let generation = w.period ?? generation
                if let r = rotating[w.key], r.generation == generation, r.irk == w.resolvingKey {
                    out.append(.random(r.address))
                    continue
                }
                let made: BluetoothAddress?
                if w.setting == .policy(.resolvable) {
                    guard let irk = w.resolvingKey, let cipher else {
                        return .failure(Refusal(message: "Cannot make a resolvable address for \(w.key): its resolving key is not loaded"))
                    }
                    made = freshPrivate(randomBytes) { try? ResolvableAddress.make(irk: irk.bytes, random: $0, cipher: cipher) }
                } else {
                    made = freshPrivate(randomBytes, BluetoothAddress.makeNonResolvable)
                }
                guard let a = made else {
                    return .failure(Refusal(message: "Cannot make a private address: no usable random bytes from the kernel"))
                }
                rotating[w.key] = (generation, a, w.resolvingKey)
                out.append(.random(a))
            }
        }
        return .success(Choice(addresses: out, warning: warning))
    }

    /// A few draws at most: `make` refuses the bytes only when they make all zeros or all ones; an address another
    /// beacon has is drawn again.
    private func freshPrivate(_ randomBytes: () -> [UInt8]?, _ make: ([UInt8]) -> BluetoothAddress?) -> BluetoothAddress? {
        for _ in 0..<8 {
            guard let bytes = randomBytes() else { return nil }
            if let a = make(bytes), !rotating.values.contains(where: { $0.address == a }) { return a }
        }
        return nil
    }
}

extension AddressBook {
    /// Why the book at `path` (its file there, `text` the failure's own words) cannot be read: one far larger than
    /// beacond writes is damaged, to fix or remove; anything else is said as it is.
    public static func unreadable(_ path: String, _ c: SystemCondition, text: String) -> String {
        c.kind == .tooLarge
            ? "\(path) is larger than 1 MiB, far more than beacond writes: fix it, or remove it (every beacon then gets a new address)"
            : "Cannot read \(path): \(text)"
    }
}
