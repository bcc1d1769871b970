// The resolving side of Eddystone-EID: `beacond scan --eid-keys FILE`. The keyring file (TOML: a [[beacon]] per key,
// with its name, key and exponent), and a table of every key's EIDs for the periods around now, so a report is one
// dictionary lookup however many keys there are (AES runs when the periods move, not per report).

/// One key the resolver knows.
public struct EIDKey: Sendable, Hashable {
    public var name: String
    public var exponent: UInt8
    /// Written into the file (`identity_key`), or where to read it (`identity_key_file`); the loader fills `key`.
    public var keyFile: String?
    public var keyFileLocation: SourceLocation?
    public var key: IdentityKey?

    public init(name: String, exponent: UInt8, key: IdentityKey? = nil, keyFile: String? = nil, keyFileLocation: SourceLocation? = nil) {
        self.name = name
        self.exponent = exponent
        self.key = key
        self.keyFile = keyFile
        self.keyFileLocation = keyFileLocation
    }
}

public enum EIDKeyring {
    public static let keys = ["name", "identity_key", "identity_key_file", "rotation_exponent"]
    /// The file's bytes: far more than `maximumLines` take.
    public static let maximumSize = 16 * 1024 * 1024
    /// Lines with content (blank lines and comments aside) read at most: reading takes about 0.9 KB a line while the
    /// file is parsed (143 MB for 160,000 lines, review #43), so 200,000 lines, 50,000 keys of four, stay under 100 MB.
    public static let maximumLines = 200_000
    public static let maximumKeys = maximumLines / 4

    /// Every mistake is reported, in file order, as for the config.
    public static func parse(_ bytes: [UInt8]) throws(ConfigDiagnostics) -> [EIDKey] {
        if let fileProblem = ConfigFile.check(bytes, maximumSize: maximumSize, what: "a key file") { throw ConfigDiagnostics([fileProblem]) }
        // Counted before anything is parsed: past the limit, nothing is.
        if contentLines(bytes, upTo: maximumLines + 1) > maximumLines {
            throw ConfigDiagnostics([ConfigDiagnostic("the key file has more than \(maximumLines) lines (blank lines and comments aside): a keyring holds at most \(maximumKeys) keys; give each receiver the keys of the beacons it may hear", at: nil)])
        }
        let (document, syntax) = TOMLSubset.parse(bytes)
        var problems = syntax
        func fail(_ m: String, _ at: SourceLocation, _ key: String) { problems.append(ConfigDiagnostic(m, at: at, key: key)) }
        var out: [EIDKey] = []
        var names: [String: Int] = [:]
        for t in document.tables where t.name != "beacon" || !t.isArrayElement {
            if t.name == nil && t.entries.isEmpty { continue }
            fail("the key file has only [[beacon]] tables (name, identity_key or identity_key_file, rotation_exponent)", t.location, t.name ?? "")
        }
        for (n, t) in document.tables("beacon").enumerated() where t.isArrayElement {
            let label = "[[beacon]] #\(n + 1)"
            var name: String?
            var exponent = EIDBeacon.defaultExponent
            var key: IdentityKey?
            var file: (String, SourceLocation)?
            for e in t.entries {
                let what = "'\(e.key)' in \(label)"
                switch (e.key, e.item.value) {
                case ("name", .string(let s)) where !s.isEmpty && !s.unicodeScalars.contains { $0.properties.generalCategory == .control }:
                    name = s
                case ("name", _): fail("\(what) must be a non-empty string without control characters", e.item.location, "beacon.name")
                case ("rotation_exponent", .integer(let v)) where (0...15).contains(v): exponent = UInt8(v)
                case ("rotation_exponent", _): fail("\(what) must be an integer from 0 to 15", e.item.location, "beacon.rotation_exponent")
                case ("identity_key", .string(let s)):
                    if let k = IdentityKey(hex: s) { key = k } else {
                        fail("\(what) must be 32 hex digits (128 bits)", e.item.location, "beacon.identity_key")
                    }
                case ("identity_key_file", .string(let s)) where !s.isEmpty: file = (s, e.item.location)
                case ("identity_key_file", _): fail("\(what) must name a file", e.item.location, "beacon.identity_key_file")
                default:
                    var m = "unknown key '\(e.key)' in \(label)"
                    if let guess = closest(e.key, among: keys) { m += "; did you mean '\(guess)'?" } else { m += " (known keys: \(keys.joined(separator: ", ")))" }
                    fail(m, e.keyLocation, "beacon.\(e.key)")
                }
            }
            guard let name else {
                if !t.failedKeys.contains("name") && !t.entries.contains(where: { $0.key == "name" }) {
                    fail("missing required key 'name' in \(label)", t.location, "beacon.name")
                }
                continue
            }
            if let first = names[name] { fail("\(label) has the name \"\(name)\" of [[beacon]] #\(first + 1): each key needs its own name", t.location, "beacon.name") }
            names[name] = n
            switch (key, file) {
            case (nil, nil):
                // A key given but wrong was said already.
                if !t.entries.contains(where: { $0.key == "identity_key" || $0.key == "identity_key_file" }) {
                    fail("missing key in \(label): give identity_key or identity_key_file", t.location, "beacon.identity_key")
                }
            case (_?, _?): fail("\(label) has both identity_key and identity_key_file: give one", t.location, "beacon.identity_key")
            default: out.append(EIDKey(name: name, exponent: exponent, key: key, keyFile: file?.0, keyFileLocation: file?.1))
            }
        }
        if document.tables("beacon").isEmpty && problems.isEmpty {
            fail("no [[beacon]] table: the key file lists the beacons to recognize", SourceLocation(line: 1, column: 1), "beacon")
        }
        guard problems.isEmpty else { throw ConfigDiagnostics(problems.sorted { ($0.location ?? .init(line: 0, column: 0)) < ($1.location ?? .init(line: 0, column: 0)) }) }
        return out
    }
}

extension EIDKeyring {
    /// How many lines have something but blanks and a comment, counting up to `limit`.
    static func contentLines(_ bytes: [UInt8], upTo limit: Int) -> Int {
        var count = 0, lineHasContent = false, inComment = false
        for b in bytes {
            switch b {
            case 0x0A:
                if lineHasContent { count += 1 }
                if count >= limit { return count }
                lineHasContent = false
                inComment = false
            case 0x20, 0x09, 0x0D: break
            case 0x23 where !lineHasContent: inComment = true
            default: if !inComment { lineHasContent = true }
            }
        }
        return count + (lineHasContent ? 1 : 0)
    }
}

extension IdentityKey {
    /// 32 hex digits, either case.
    public init?(hex s: String) {
        let d = Array(s.utf8)
        guard d.count == 32 else { return nil }
        var bytes: [UInt8] = []
        for i in stride(from: 0, to: 32, by: 2) {
            guard let hi = ASCII.hexValue(d[i]), let lo = ASCII.hexValue(d[i + 1]) else { return nil }
            bytes.append(hi << 4 | lo)
        }
        self.init(bytes)
    }
}

/// Which key and period an EID heard belongs to: every key's EIDs for the periods from `window` before the current
/// one to `window` after it (for clocks that drift), computed when the periods move.
public struct EIDResolver: Sendable {
    public struct Match: Sendable, Hashable {
        /// The key's index in the keyring, and its name.
        public var index: Int
        public var name: String
        /// The time counter the EID belongs to (its period's start).
        public var timeCounter: UInt32
        public init(index: Int, name: String, timeCounter: UInt32) {
            (self.index, self.name, self.timeCounter) = (index, name, timeCounter)
        }
    }

    public let keys: [EIDKey]
    public let window: Int
    private let cipher: BlockCipher
    /// By the EID's 8 bytes: the key's index and the period's counter, 8 bytes (a Match with its name was 40, and
    /// --eid-window 1000 with 1,000 keys took 257 MB).
    private var table: [UInt64: Entry] = [:]
    private struct Entry { var index: UInt32; var counter: UInt32 }

    /// The most EIDs the table may hold (keys × (2 × window + 1)): about 150 MiB (bench/eid_window_memory.py: 80 MiB
    /// for 2,001,000).
    public static let maximumEntries = 4_000_000
    /// The table holds until this time counter (the first key's next boundary).
    private var validFrom: UInt32 = 1
    private var validUntil: UInt32 = 0
    /// How many times the table was made (for the benchmark and tests).
    public private(set) var rebuilds = 0

    public init(keys: [EIDKey], window: Int, cipher: @escaping BlockCipher) {
        self.keys = keys  // a key not loaded holds no EIDs; the indices stay the caller's
        self.window = max(0, window)
        self.cipher = cipher
    }

    /// The key and period of `eid` heard at time counter `now`; nil when no key gives it in the window.
    public mutating func resolve(_ eid: [UInt8], at now: UInt32) -> Match? {
        if now < validFrom || now >= validUntil { rebuild(at: now) }
        guard let e = table[Self.word(eid)] else { return nil }
        return Match(index: Int(e.index), name: keys[Int(e.index)].name, timeCounter: e.counter)
    }

    private static func word(_ eid: [UInt8]) -> UInt64 { eid.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }

    private mutating func rebuild(at now: UInt32) {
        rebuilds += 1
        table.removeAll(keepingCapacity: true)
        // Its size is known: made once, not grown by doubling (each growth held the old table and the new at once).
        table.reserveCapacity(keys.count * (2 * window + 1))
        var until = UInt32.max
        for (i, k) in keys.enumerated() {
            guard let key = k.key else { continue }
            let step = UInt64(1) << k.exponent
            let current = UInt64(EddystoneEID.periodStart(now, exponent: k.exponent))
            until = min(until, UInt32(clamping: current + step))
            // One temporary key per distinct top 16 bits of the counter (the same for nearly every window).
            var temporaryKeys: [UInt32: [UInt8]] = [:]
            for p in -window...window {
                let t = Int64(current) + Int64(p) * Int64(step)
                guard t >= 0, t <= Int64(UInt32.max) else { continue }
                let counter = UInt32(t)
                let hi = counter >> 16
                let tk: [UInt8]
                if let known = temporaryKeys[hi] { tk = known } else {
                    guard let made = try? cipher(key.bytes, EddystoneEID.temporaryKeyInput(counter)) else { continue }
                    temporaryKeys[hi] = made
                    tk = made
                }
                guard let block = try? cipher(tk, EddystoneEID.identifierInput(counter, exponent: k.exponent)) else { continue }
                table[Self.word(Array(block.prefix(8)))] = Entry(index: UInt32(i), counter: counter)
            }
        }
        validFrom = keys.isEmpty ? 0 : keys.map { EddystoneEID.periodStart(now, exponent: $0.exponent) }.max()!
        validUntil = keys.isEmpty ? UInt32.max : until
    }
}
