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
    ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1"),
    ("from C6:12:34:56:78:9A", "from C6:12:34:56:78:9A"),
    ("x\(key)y\(key)", "x[32 hex digits, not shown]y[32 hex digits, not shown]"),
    ("", ""),
]

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

    @Test("runs of 16 or more hex digits become their length; shorter ones (UUID groups, addresses, numbers) stay", arguments: redactedRuns)
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
