// The config schema is the one source of every key: the README's table must be its rendering, and the validator
// must do what each row says (its range, its default, and a meaning for every key).
import BeaconCore
import TestSupport
import Testing

@Suite("the config schema and its reference")
struct ReferenceTests {
    static let readme = String(decoding: Fixtures.bytes(Fixtures.root + "/../../README.md"), as: UTF8.self)

    @Test("the README's key table is the schema's rendering, row for row")
    func readmeTable() {
        let table = Self.readme.split(separator: "\n", omittingEmptySubsequences: false)
            .drop { !$0.hasPrefix("| key | formats |") }.prefix { $0.hasPrefix("|") }
        let documented = table.map(String.init), rendered = ConfigSchema.referenceTable.split(separator: "\n").map(String.init)
        #expect(documented.count == rendered.count, "the README has \(documented.count) lines of table, the schema \(rendered.count)")
        for (readme, schema) in zip(documented, rendered) where readme != schema {
            Issue.record("README: \(readme)\nschema: \(schema)\n(the README's table is ConfigSchema.referenceTable)")
        }
    }

    @Test("the README says the schema's syntax paragraph, word for word")
    func syntax() {
        let words = { (t: String) in t.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ") }
        #expect(words(Self.readme).contains(words(ConfigSchema.syntax)))
    }

    @Test("every integer range is the validator's: the bounds pass, one past each is refused naming it")
    func ranges() throws {
        var checked = 0
        for row in ConfigSchema.keys {
            guard case .integer(let range, _, _) = row.type else { continue }
            let (low, high) = (range.lowerBound, range.upperBound)
            for (value, ok) in [(low, true), (high, true), (low - 1, false), (high + 1, false)] {
                let text = Self.config(row, setting: String(value))
                let error = thrown(ConfigDiagnostics.self) { _ = try BeaconConfiguration.parse(Array(text.utf8)) }
                if ok {
                    #expect(error == nil, "\(row.path) = \(value): \(error?.items.map(\.message) ?? [])")
                } else {
                    #expect(error?.items.first?.message.contains("must be from \(low) to \(high)") == true,
                            "\(row.path) = \(value): \(error?.items.map(\.message) ?? [])")
                }
            }
            checked += 1
        }
        #expect(checked == 11, "eleven integer rows (measured_power twice)")
    }

    @Test("a key set to its stated default changes nothing")
    func defaults() throws {
        var checked = 0
        for row in ConfigSchema.keys {
            guard case .value(let v) = row.defaultValue else { continue }
            let without = try BeaconConfiguration.parse(Array(Self.config(row, setting: nil).utf8))
            let with = try BeaconConfiguration.parse(Array(Self.config(row, setting: v).utf8))
            #expect(with.beacons.map(\.beacon) == without.beacons.map(\.beacon) && with.advertising.interval == without.advertising.interval
                        && with.advertising.connectable == without.advertising.connectable && with.controller == without.controller,
                    "\(row.path) = \(v) for \(row.formats.first?.rawValue ?? "-")")
            checked += 1
        }
        #expect(checked >= 9)
    }

    /// A valid value for each key whose default is not a value (those are checked above).
    static let samples: [String: String] = [
        "beacon.uuid": "\"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"", "beacon.major": "1", "beacon.minor": "2",
        "beacon.namespace": "\"00112233445566778899\"", "beacon.instance": "\"AABBCCDDEEFF\"", "beacon.identity_key_file": "\"k.key\"", "beacon.bindkey_file": "\"home.key\"",
        "beacon.resolving_key_file": "\"shop.irk\"",
        "beacon.interval_ms": "200", "beacon.name": "\"Shelf 4\"", "beacon.address": "\"C6:12:34:56:78:9A\"",
        "advertising.tx_power": "0", "advertising.address": "\"rotating\"", "daemon.log_level": "\"debug\"",
    ]

    /// The keys a key needs beside it (a resolving key is for a resolvable address).
    static let companions: [String: (String, String)] = ["beacon.resolving_key_file": ("address", "\"resolvable\"")]

    @Test("every row has a meaning: a valid value for it parses (the validator would stop on a key it cannot use)")
    func everyKeyHasAMeaning() throws {
        for row in ConfigSchema.keys {
            let value: String
            if case .value(let v) = row.defaultValue { value = v } else {
                guard let s = Self.samples[row.path] else {
                    Issue.record("no sample value for \(row.path): add one to ReferenceTests.samples")
                    continue
                }
                value = s
            }
            let text = Self.config(row, setting: value)
            let error = thrown(ConfigDiagnostics.self) { _ = try BeaconConfiguration.parse(Array(text.utf8)) }
            #expect(error == nil, "\(row.path) = \(value): \(error?.items.map(\.message) ?? [])")
        }
    }

    @Test("the schema's JSON marks the keys that name a key file: exactly those the loader reads as one (keyFiles)")
    func keyFileKeys() throws {
        let json = try #require(JSONValue(parsing: Array(ConfigSchema.json.utf8)))
        let rows = try #require(json["keys"]?.array)
        #expect(rows.count == ConfigSchema.keys.count)
        for (row, key) in zip(rows, ConfigSchema.keys) {
            let marked = try #require(row["keyFile"]?.bool, "\(key.path) has no keyFile member")
            guard key.table == .beacon, let format = key.formats.first else {
                #expect(!marked, "\(key.path)")
                continue
            }
            // The row set to a valid value, in a beacon of a format it belongs to: the loader reads a file for it or not.
            let value: String
            if case .value(let v) = key.defaultValue { value = v } else { value = try #require(Self.samples[key.path]) }
            let config = try BeaconConfiguration.parse(Array(Self.config(key, setting: value).utf8))
            let read = config.keyFiles.map(\.key).filter { $0 == key.name }
            #expect(marked == !read.isEmpty, "\(key.path) for \(format.rawValue): keyFile \(marked), the loader reads \(read)")
        }
        #expect(Set(rows.filter { $0["keyFile"]?.bool == true }.compactMap { $0["key"]?.string })
                    == ["identity_key_file", "bindkey_file", "resolving_key_file"])
    }

    @Test("each format's keys are the schema's, and a key of another format names its owners")
    func formatKeys() throws {
        #expect(BeaconFormat.altbeacon.keys == ["uuid", "major", "minor", "measured_power", "company_id", "reserved", "resolving_key_file"])
        #expect(BeaconFormat.eddystoneTLM.keys == ["resolving_key_file"])
        let text = "[beacon]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"AABBCCDDEEFF\"\nreserved = 1\n"
        let error = thrown(ConfigDiagnostics.self) { _ = try BeaconConfiguration.parse(Array(text.utf8)) }
        #expect(error?.items.map(\.message) == ["'reserved' in [beacon] belongs to format \"altbeacon\", not to this beacon's format \"eddystone-uid\""])
    }

    /// A config with a beacon of the first format the row applies to, and `row` set to `value` (nil: left out).
    static func config(_ row: ConfigKey, setting value: String?) -> String {
        let format = row.formats.first ?? .ibeacon
        var identity: [(String, String)] = format.keys.compactMap { key in
            ConfigSchema.row(key, format: format).flatMap { r in r.defaultValue == .required || r.defaultValue == .provisioning ? (key, samples[r.path]!) : nil }
        }
        var tables: [(String, [(String, String)])] = [("beacon", [("format", "\"\(format.rawValue)\"")]), ("advertising", [])]
        if let value {
            if row.table == .beacon {
                identity.removeAll { $0.0 == row.name }
                identity.append((row.name, value))
                if let c = companions[row.path] { identity.append(c) }
            } else if let i = tables.firstIndex(where: { $0.0 == row.table.rawValue }) {
                tables[i].1.append((row.name, value))
            } else {
                tables.append((row.table.rawValue, [(row.name, value)]))
            }
        }
        tables[0].1 += identity.filter { $0.0 != "format" }
        if row.name == "format", let value { tables[0].1[0].1 = value }
        return tables.map { t in "[\(t.0)]\n" + t.1.map { "\($0.0) = \($0.1)\n" }.joined() }.joined()
    }
}
