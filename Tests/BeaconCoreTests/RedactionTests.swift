// What reaches logs, STATUS and the state file never carries an Eddystone-EID identity key: no run of 16 or more hex
// digits in any diagnostic, whatever key it stood under, and a refused file said by its count and lines.
@testable import BeaconCore
import Testing

private let key = "9f11c1b2d3e4f5a6b7c8d9e0f1a2b3c4"

/// The longest run of hex digits in `text`.
func longestHexRun(_ text: String) -> Int {
    var longest = 0, run = 0
    for c in text.unicodeScalars {
        run = c.properties.isASCIIHexDigit ? run + 1 : 0
        longest = max(longest, run)
    }
    return longest
}

private func diagnostics(_ text: String) -> [String] {
    do {
        _ = try BeaconConfiguration.parse(Array(text.utf8))
        return []
    } catch {
        return error.items.map { $0.formatted(path: "/etc/beacond/beacond.conf") }
    }
}

// Outside the @Test attributes: Swift 6.0.3 crashes on a string interpolation inside one (CSGen visitTapExpr).
private let ib = "[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\n"
private let keyLines = [
    "identity-key-file = \(key)\n",                 // a misspelled key name: an unknown key, its value a bad number
    "identity_key_file =\n\(key)\n",                // the key on the line after: a bare key without '='
    "identity_kee_file = \"\(key)\"\n",             // misspelled, quoted: "did you mean" and a string
    "\(key)\n",                                     // a line of its own
    "rotation_exponent = \(key)\n",                 // pasted where a number belongs
    "identity_key_file = \"x\" \(key)\n",           // stray text after a value (the key of it redacted already)
]

private let redactedRuns = [
    ("/k/\(key) does not exist", "/k/[32 hex digits, not shown] does not exist"),
    ("found '0123456789abcdef'", "found '[16 hex digits, not shown]'"),
    ("found '0123456789abcde'", "found '0123456789abcde'"),                           // 15: a run too short to matter
    // A UUID is 32 hex digits, the shape of a 128-bit key: it is taken out too (a key written UUID-style).
    ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1", "[32 hex digits, not shown] major 1"),
    ("from C6:12:34:56:78:9A", "from C6:12:34:56:78:9A"),                             // an address: 12 digits stay
    ("C6:12:34:56:78:9A 11:22:33:44:55:66", "C6:12:34:56:78:9A 11:22:33:44:55:66"),   // two addresses are not one run
    ("at 2026-12-07 09:55:21", "at 2026-12-07 09:55:21"),                             // a time: 14 digits, mixed separators
    ("key 9f:11:c1:b2:d3:e4:f5:a6 end", "key [16 hex digits, not shown] end"),       // colon-separated, 64 bits
    ("key 9f 11 c1 b2 d3 e4 f5 a6 b7", "key [18 hex digits, not shown]"),            // space-separated
    ("key 9f-11-c1-b2-d3-e4-f5", "key 9f-11-c1-b2-d3-e4-f5"),                       // 14 digits: too short to matter
    // base64 as `beacond irk` prints it, and cut where a message's quoting stopped
    ("found 'dHVQiYLiTV2W1HUaNORnQw=='", "found '[24 characters, not shown]'"),
    ("found 'dHVQiYLiTV2W1HUaNORn'", "found '[20 characters, not shown]'"),
    ("found 'a+b/cdHVQiYLiTV2W1HU'", "found '[20 characters, not shown]'"),
    // a hex key with one typo: two runs of 15 hex digits, one run of letters and digits
    ("found '9f11c1b2d3e4f5agb7c8d9e0f1a2b3c4'", "found '[32 characters, not shown]'"),
    // what is not random stays: paths, names, key names, words
    ("/etc/beacond/keys/shop7--door.irk", "/etc/beacond/keys/shop7--door.irk"),
    ("/usr/share/doc/beacond/beacond.conf.example", "/usr/share/doc/beacond/beacond.conf.example"),
    ("/var/lib/private/beacond/Shop7Door.irk", "/var/lib/private/beacond/Shop7Door.irk"),
    ("name 'KitchenDoorBeaconNumber2'", "name 'KitchenDoorBeaconNumber2'"),
    ("'resolving_key_file' in [[beacon]]", "'resolving_key_file' in [[beacon]]"),
    ("/home/pi/HCIBackendTests/Beacon2Keys", "/home/pi/HCIBackendTests/Beacon2Keys"),
    ("/etc/beacond/keys/shop7.irk", "/etc/beacond/keys/shop7.irk"),
    ("/etc/beacond/keys/door1/a2/b3", "/etc/beacond/keys/door1/a2/b3"),
    // bug (a warm CI run): a temporary directory's random name read the path after it as base64
    ("/tmp/ci-warm2.0u0u/Tests/Fixtures/bad/key-in-wrong-table.conf:6:1", "/tmp/ci-warm2.0u0u/Tests/Fixtures/bad/key-in-wrong-table.conf:6:1"),
    ("/tmp/tmp.Xk3b9QzPq1/Tests/Fixtures/good/three.conf", "/tmp/tmp.Xk3b9QzPq1/Tests/Fixtures/good/three.conf"),
    // a key's base64 with a '/' in it: its padding (or a '+') says it is no path
    ("found 'dHVQ/YLiTV2W1HUaNORnQw=='", "found '[24 characters, not shown]'"),
    ("found 'dHVQiYLiTV2W1HUaNORnQwabcdX3/etc'", "found '[28 characters, not shown]/etc'"),
    ("x\(key), \(key)", "x[32 hex digits, not shown], [32 hex digits, not shown]"),
    ("\(key) \(key)", "[64 hex digits, not shown]"),                          // groups may be 32 digits long
    ("x\(key)y\(key)", "x[65 characters, not shown]"),                        // the 'y' might be a typo: one run
    ("deadline 0123456789abcdeX", "deadline 0123456789abcdeX"),
    ("", ""),
]

// One resolving key (16 bytes) in each spelling a user may paste: as `beacond irk` prints it for Home Assistant, as a
// UUID, colon-separated, and hex with one typo (two runs of 15 hex digits).
private let spellings = [
    "dHVQiYLiTV2W1HUaNORnQw==",
    "9f11c1b2-d3e4-f5a6-b7c8-d9e0f1a2b3c4",
    "9f:11:c1:b2:d3:e4:f5:a6:b7:c8:d9:e0:f1:a2:b3:c4",
    "9f11c1b2d3e4f5agb7c8d9e0f1a2b3c4",
]
// Each key kind's file key, and names that hold "key" without being one of beacond's.
private let keyNames = ["resolving_key_file", "bindkey_file", "identity_key_file", "resolving-key-file", "bindkey", "my_key"]
private let pasted: [(String, String)] = keyNames.flatMap { name in spellings.map { (name, $0) } }

/// Every 6 characters of `secret` (ignoring separators and case): what a message must not hold any of.
private func fragments(_ secret: String) -> [String] {
    let bare = Array(secret.lowercased().filter { !":-= ".contains($0) })
    return (0...(bare.count - 6)).map { String(bare[$0..<($0 + 6)]) }
}

@Suite("redaction")
struct RedactionTests {
    /// Redaction covered the values of identity_key* keys only: the key under a misspelled name, on the line after
    /// `identity_key_file =`, or as a bare word came back whole (review #43).
    @Test("bug: a key outside an identity_key* value was quoted whole in a diagnostic", arguments: keyLines)
    func keysElsewhereAreNeverQuoted(line: String) {
        let found = diagnostics("[beacon]\nformat = \"eddystone-eid\"\n" + line)
        #expect(!found.isEmpty)
        for d in found {
            #expect(longestHexRun(d) < 16, "\(d)")
            #expect(!d.contains(String(key.prefix(16))), "\(d)")
        }
    }

    /// isSecret knew `identity_key*` only: a resolving key's base64 pasted unquoted as `resolving_key_file` reached
    /// the journal with 120 of its 128 bits (`found 'dHVQiYLiTV2W1HUaNORn'`, issue #53).
    @Test("bug: a key pasted unquoted under any key-file key, in any spelling, was quoted in its parse error", arguments: pasted)
    func pastedKeysAreNeverQuoted(name: String, secret: String) {
        let found = diagnostics(ib + "address = \"resolvable\"\n\(name) = \(secret)\n")
        #expect(!found.isEmpty)
        for d in found {
            for f in fragments(secret) { #expect(!d.lowercased().filter({ !":-= ".contains($0) }).contains(f), "\(d)") }
        }
        #expect(found.contains { $0.contains("'\(name)' in [beacon]: the value (\(secret.count) characters) is not valid here; it is not shown") }, "\(found)")
    }

    @Test("runs of 16 or more hex digits, separated or not, and random-looking base64 runs become their length; addresses, times, paths and names stay", arguments: redactedRuns)
    func runs(text: String, redacted: String) {
        #expect(Redaction.apply(text) == redacted)
    }

    @Test("a diagnostic made with a key in its message holds none, formatted or not")
    func diagnosticsRedactThemselves() {
        var d = ConfigDiagnostic("'identity_key_file' in [beacon]: /etc/beacond/keys/\(key) does not exist", at: SourceLocation(line: 3, column: 21))
        #expect(longestHexRun(d.message) < 16)
        #expect(longestHexRun(d.formatted(path: "/c")) < 16)
        d.message = "again \(key)"
        #expect(d.message == "again [32 hex digits, not shown]")
    }

    @Test("a refused file's summary: its path, how many errors and on which lines (the first 20), no text")
    func summary() {
        func at(_ line: Int?) -> ConfigDiagnostic { ConfigDiagnostic("'x' \(key)", at: line.map { SourceLocation(line: $0, column: 1) }) }
        #expect(ConfigError(path: "/c", diagnostics: [at(4)]).summary == "/c has 1 error, on line 4")
        #expect(ConfigError(path: "/c", diagnostics: [at(4), at(4), at(9)]).summary == "/c has 3 errors, on lines 4 and 9")
        #expect(ConfigError(path: "/c", diagnostics: [at(nil)]).summary == "/c has 1 error, in the file as a whole")
        #expect(ConfigError(path: "/c", diagnostics: [at(nil), at(2), at(3), at(7)]).summary == "/c has 4 errors, on lines 2, 3 and 7 and in the file as a whole")
        let many = ConfigError(path: "/c", diagnostics: (1...5000).map { at($0) })
        #expect(many.lines == Array(1...20))
        #expect(many.summary == "/c has 5000 errors, on lines " + (1...20).map(String.init).joined(separator: ", ") + " and more")
    }
}

@Suite("redaction keeps what goes on the air")
struct RedactionShowingTests {
    @Test("a UUID beacond parsed as a beacon's may be repeated; a key beside it is still taken out")
    func showing() {
        let u = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        #expect(Redaction.apply("uuid \(u), key \(key)", showing: [u]) == "uuid \(u), key [32 hex digits, not shown]")
        let d = ConfigDiagnostic("is already \(u)", at: nil, showing: [u])
        #expect(d.formatted(path: "/c") == "/c: error: is already \(u)")
        #expect(ConfigDiagnostic("is already \(u)", at: nil).message == "is already [32 hex digits, not shown]")
    }
}
