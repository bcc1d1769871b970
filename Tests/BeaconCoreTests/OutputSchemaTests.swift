// The output schema is the one source of every JSON field name: docs/output.md and the README's `status --json` table
// must be its rendering, its rows must be a consistent tree of the vocabulary, and the writer's values must print as
// before (fixed decimals kept).
import BeaconCore
import TestSupport
import Testing

private let reportCases = OutputReport.allCases

@Suite("the output schema and its reference")
struct OutputSchemaTests {
    static let doc = String(decoding: Fixtures.bytes(Fixtures.root + "/../../docs/output.md"), as: UTF8.self)
    static let readme = String(decoding: Fixtures.bytes(Fixtures.root + "/../../README.md"), as: UTF8.self)

    @Test("docs/output.md has each report's section as the rows render it, and no other table line", arguments: reportCases)
    func docSection(report: OutputReport) {
        let documented = Self.doc.contains(report.reference)
        #expect(documented, "docs/output.md differs from OutputReport.\(report).reference:\n\(report.reference)")
    }

    @Test("docs/output.md has as many table lines as the rows")
    func docTableLines() {
        let documented = Self.doc.split(separator: "\n").filter { $0.hasPrefix("|") }.count
        #expect(documented == OutputReport.allCases.map { $0.fields.count + 2 }.reduce(0, +))
    }

    @Test("the README's status --json table is the rows' rendering, row for row")
    func readmeTable() {
        let table = Self.readme.split(separator: "\n", omittingEmptySubsequences: false)
            .drop { !$0.hasPrefix("| field | type | meaning |") }.prefix { $0.hasPrefix("|") }.map(String.init)
        let rendered = OutputSchema.readmeTable.split(separator: "\n").map(String.init)
        #expect(table.count == rendered.count, "the README has \(table.count) lines of table, the rows \(rendered.count)")
        for (readme, schema) in zip(table, rendered) where readme != schema {
            Issue.record("README: \(readme)\nrows:   \(schema)\n(the README's table is OutputSchema.readmeTable)")
        }
    }

    @Test("every row's path is made of the vocabulary, under an object or array row of its report, once", arguments: reportCases)
    func rowsAreATree(report: OutputReport) {
        let rows = report.fields
        for row in rows {
            for part in row.path.split(separator: ".") {
                #expect(OutputKey(rawValue: String(part.prefix { $0 != "[" })) != nil, "\(report): \(row.path): '\(part)' is no OutputKey")
            }
            #expect(rows.filter { $0.path == row.path }.count == 1, "\(report): \(row.path) twice")
            #expect(!row.types.isEmpty && !row.meaning.isEmpty, "\(report): \(row.path)")
            guard !row.parent.isEmpty else { continue }
            let array = row.parent.hasSuffix("[]")
            let parent = rows.first { $0.path == (array ? String(row.parent.dropLast(2)) : row.parent) }
            #expect(parent?.types.contains(array ? .array : .object) == true, "\(report): \(row.path) has no \(array ? "array" : "object") \(row.parent)")
        }
    }

    @Test("every key of the vocabulary is some row's")
    func everyKeyIsUsed() {
        let names = Set(OutputReport.allCases.flatMap { $0.fields.map(\.name) })
        #expect(OutputKey.allCases.filter { !names.contains($0.rawValue) } == [])
    }

    @Test("a numeral prints its own text and reads as its number; the helpers make null of nil")
    func values() {
        #expect(JSONValue(100, decimals: 3).text == "100.000")
        #expect(JSONValue(-1.25, decimals: 1) == .numeral("-1.3"))
        #expect(JSONValue(100, decimals: 3).number == 100)
        #expect(JSONValue(Double?.none, decimals: 2) == .null)
        #expect(JSONValue(Int8(-59)).text == "-59")
        #expect(JSONValue(UInt64(1_764_680_000)).text == "1764680000")
        #expect(JSONValue(Int?.none) == .null && JSONValue(String?.none) == .null && JSONValue(Bool?.none) == .null)
        #expect(JSONValue("a \"b\"").text == "\"a \\\"b\\\"\"")
        #expect(JSONValue(strings: ["x", "y"]).text == "[\"x\",\"y\"]")
    }

    @Test("an object keeps its members' order, is read back by key, and parses to the same members")
    func object() throws {
        let o = JSONValue([(.pid, JSONValue(7)), (.addressKind, .string("static")), (.intervalMs, JSONValue(152.5, decimals: 3))])
        #expect(o.text == "{\"pid\":7,\"address_kind\":\"static\",\"interval_ms\":152.500}")
        #expect(o[.addressKind]?.string == "static" && o[.intervalMs]?.number == 152.5)
        let parsed = try #require(JSONValue(parsing: Array(o.text.utf8)))
        #expect(parsed[.pid]?.int == 7 && parsed[.intervalMs]?.number == 152.5)
    }

    @Test("types: an integer is a number, a numeral with decimals is no integer")
    func types() {
        #expect(JSONValue(3).isA(.integer) && JSONValue(3).isA(.number))
        #expect(!JSONValue(3, decimals: 1).isA(.integer) && JSONValue(3, decimals: 1).isA(.number))
        #expect(!JSONValue.number(2.5).isA(.integer))
        #expect(!JSONValue.bool(true).isA(.integer) && !JSONValue.string("1").isA(.number))
        #expect(JSONValue.null.isA(.null) && !JSONValue.null.isA(.object))
    }

    @Test("violations: a member no row names, a wrong type, in nested objects and arrays and through the inherited rows")
    func violations() {
        let good = JSONValue([(.ok, .bool(true)), (.problems, JSONValue(strings: [])), (.daemons, .array([
            JSONValue([(.unit, .null), (.stateFile, .string("/run/beacond/state.json")), (.pid, JSONValue(4)),
                       (.beacons, .array([JSONValue([(.index, JSONValue(1)), (.onAir, .bool(true))])]))]),
        ]))])
        #expect(OutputReport.status.violations(good) == [])
        let bad = JSONValue([(.ok, .string("yes")), (.daemons, .array([
            JSONValue([(.pid, .string("4")), (.beacons, .array([JSONValue([(.rssi, JSONValue(-50))])]))]),
        ])), (.eid, .null)])
        #expect(OutputReport.status.violations(bad) == [
            "ok: \"yes\" is not boolean", "daemons[].pid: \"4\" is not integer", "daemons[].beacons[].rssi: no row", "eid: no row",
        ])
        // A mismatch carries the line's own fields; the state's rows are not the scan's.
        let mismatch = JSONValue([(.kind, .string("expect")), (.mismatches, .array([JSONValue([(.differences, JSONValue(strings: ["minor"])), (.rssi, .null)])]))])
        #expect(OutputReport.expect.violations(mismatch) == [])
        #expect(OutputReport.scan.violations(JSONValue([(.onAir, .bool(true))])) == ["on_air: no row"])
    }

    @Test("scan --expect's lines hold against the rows")
    func expectLines() throws {
        let c = try BeaconConfiguration.parse(Array("[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 7\nminor = 1\n".utf8))
        let check = AirCheck(ExpectedBeacon.all(in: c, path: "/a.conf"))
        let line = try #require(JSONValue(parsing: Array(AirCheck.jsonLine(check.results[0]).utf8)))
        #expect(line[.status]?.string == "missing")
        #expect(OutputReport.expect.violations(line) == [])
    }
}
