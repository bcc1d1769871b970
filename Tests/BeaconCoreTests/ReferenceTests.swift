// The README's key table is the source of beacond.conf(5) (scripts/man.py renders it): it must list exactly the
// schema's keys, and every integer range it states must be the one the validator enforces.
import BeaconCore
import TestSupport
import Testing

@Suite("the documented config reference")
struct ReferenceTests {
    /// (table, key, type column) of every row of the README's key table.
    static let rows: [(table: String, key: String, type: String)] = {
        let readme = String(decoding: Fixtures.bytes(Fixtures.root + "/../../README.md"), as: UTF8.self)
        return readme.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("| `[") else { return nil }
            let cells = line.split(separator: "|").map { $0.trimmingSpaces }
            let name = cells[0].filter { $0 != "`" }  // "[beacon] uuid"
            let parts = name.split(separator: " ")
            guard parts.count == 2 else { return nil }
            return (String(parts[0].dropFirst().dropLast()), String(parts[1]), cells[1])
        }
    }()

    @Test("the README's key table lists exactly the schema's keys, in its order")
    func sameKeys() {
        let documented = Self.rows.map { "\($0.table).\($0.key)" }
        let schema = BeaconConfiguration.schema.flatMap { t in t.keys.map { "\(t.table).\($0)" } }
        #expect(documented == schema)
    }

    @Test("every documented integer range is the validator's: the bounds pass, one past each is refused naming it")
    func ranges() throws {
        var checked = 0
        for row in Self.rows {
            let type = row.type.replacingMinus
            guard type.hasPrefix("integer "), let dots = type.firstRange(of: "…") else { continue }
            let low = Int(type[type.index(type.startIndex, offsetBy: 8)..<dots.lowerBound])!
            let high = Int(type[dots.upperBound...].prefix { $0.isNumber || $0 == "-" })!
            for (value, ok) in [(low, true), (high, true), (low - 1, false), (high + 1, false)] {
                let text = config(setting: row.table, row.key, to: value)
                let error = thrown(ConfigDiagnostics.self) { _ = try BeaconConfiguration.parse(Array(text.utf8)) }
                if ok {
                    #expect(error == nil, "\(row.table).\(row.key) = \(value): \(error?.items.map(\.message) ?? [])")
                } else {
                    #expect(error?.items.first?.message.contains("must be from \(low) to \(high)") == true,
                            "\(row.table).\(row.key) = \(value): \(error?.items.map(\.message) ?? [])")
                }
            }
            checked += 1
        }
        #expect(checked == 9, "the README documents nine integer keys with a range")
    }

    private func config(setting table: String, _ key: String, to value: Int) -> String {
        // A beacon of the first format the key belongs to (company_id and reserved are AltBeacon's).
        let format = table == "beacon" ? BeaconFormat.allCases.first { $0.keys.contains(key) } ?? .ibeacon : .ibeacon
        let identity: [(String, String)] = format == .eddystoneEID ? [("identity_key_file", "\"k.key\"")]
            : [("uuid", "\"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\""), ("major", "1"), ("minor", "1")]
        var tables: [(String, [(String, String)])] = [
            ("beacon", [("format", "\"\(format.rawValue)\"")] + identity),
            ("advertising", []),
        ]
        if let i = tables.firstIndex(where: { $0.0 == table }) {
            tables[i].1.removeAll { $0.0 == key }
            tables[i].1.append((key, String(value)))
        } else {
            tables.append((table, [(key, String(value))]))
        }
        return tables.map { t in "[\(t.0)]\n" + t.1.map { "\($0.0) = \($0.1)\n" }.joined() }.joined()
    }
}

extension Substring {
    var trimmingSpaces: String { String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
}

extension String {
    /// The README writes negative numbers with U+2212.
    var replacingMinus: String { String(map { $0 == "\u{2212}" ? "-" : $0 }) }
}
