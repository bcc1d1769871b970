// The config grammar and schema against the fixture files, and the editor behind `gen-uuid --set`.
@testable import BeaconCore
import BluetoothHCI
import Glibc
import TestSupport
import Testing

enum Fixtures {
    static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(2)
        return parts.joined(separator: "/") + "/Fixtures"
    }()

    static func list(_ dir: String) -> [String] {
        guard let d = opendir(root + "/" + dir) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".conf") { names.append(name) }
        }
        return names.sorted()
    }

    static func bytes(_ path: String) -> [UInt8] {
        guard let f = fopen(path, "rb") else { return [] }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return out
    }

    /// `# expect: LINE:COL TEXT` lines at the top of a bad fixture.
    static func expectations(_ bytes: [UInt8]) -> [(BeaconCore.SourceLocation, String)] {
        String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { line in
            guard line.hasPrefix("# expect: ") else { return nil }
            let rest = line.dropFirst("# expect: ".count)
            guard let space = rest.firstIndex(of: " ") else { return nil }
            let lc = rest[..<space].split(separator: ":")
            return (BeaconCore.SourceLocation(line: Int(lc[0])!, column: Int(lc[1])!), String(rest[rest.index(after: space)...]))
        }
    }
}

@Suite("config files")
struct ConfigFixtureTests {
    @Test("fixture directories are found and not empty")
    func fixturesExist() {
        #expect(Fixtures.list("bad").count >= 30)
        #expect(Fixtures.list("good").count >= 3)
    }

    @Test("each bad file reports exactly its expected errors, at the right line and column", arguments: Fixtures.list("bad"))
    func bad(name: String) throws {
        let bytes = Fixtures.bytes(Fixtures.root + "/bad/" + name)
        let expected = Fixtures.expectations(bytes)
        #expect(!expected.isEmpty, "fixture \(name) has no '# expect:' line")
        let error = thrown(ConfigDiagnostics.self) { _ = try BeaconConfiguration.parse(bytes) }
        #expect(error != nil, "\(name) parsed without an error")
        let got = error?.items ?? []
        #expect(got.count == expected.count, "\(name): \(got.map(\.description))")
        for (location, text) in expected {
            #expect(got.contains { $0.location == location && $0.message.contains(text) },
                    "\(name): no error at \(location) containing \"\(text)\"; got \(got.map(\.description))")
        }
    }

    @Test("each good file is valid", arguments: Fixtures.list("good"))
    func good(name: String) throws {
        _ = try BeaconConfiguration.parse(Fixtures.bytes(Fixtures.root + "/good/" + name))
    }

    @Test("the shipped config is valid, has no uuid yet (nothing made up goes on the air), and gen-uuid --set completes it")
    func shippedExample() throws {
        let bytes = Fixtures.bytes(Fixtures.root + "/../../config/beacond.conf")
        let c = try BeaconConfiguration.parse(bytes)
        #expect(c.beacon == nil)
        #expect(c.unprovisioned.map(\.location.line) == [4])
        #expect(c.advertising.interval.units == 160 && !c.advertising.connectable && c.advertising.txPower == nil)
        #expect(c.controller.device == .kernel(index: 0) && c.controller.backend == .auto)
        let uuid = BeaconUUID.version4(random: Array(0..<16))
        let set = try BeaconConfiguration.parse(try ConfigEditor.settingUUIDs(uuid, in: bytes).bytes)
        #expect(set.beacon?.iBeacon?.uuid == uuid)
        #expect(set.beacon?.iBeacon?.major == 1 && set.beacon?.iBeacon?.minor == 1 && set.beacon?.iBeacon?.measuredPower == -59)
        #expect(set.unprovisioned.isEmpty)
    }

    @Test("a [beacon] without uuid is valid and unprovisioned; without major or minor it is still an error")
    func unprovisioned() throws {
        let c = try BeaconConfiguration.parse(Array("# fresh\n[beacon]\nmajor = 1\nminor = 2\n".utf8))
        #expect(c.beacon == nil && c.unprovisioned == [UnprovisionedBeacon(location: SourceLocation(line: 2, column: 1))])
        let e = thrown(ConfigDiagnostics.self) { _ = try BeaconConfiguration.parse(Array("[beacon]\nmajor = 1\n".utf8)) }
        #expect(e?.items.map(\.message) == ["missing required key 'minor' in [beacon]"])
        let bad = thrown(ConfigDiagnostics.self) { _ = try BeaconConfiguration.parse(Array("[beacon]\nuuid = 5\nmajor = 1\nminor = 2\n".utf8)) }
        #expect(bad?.items.count == 1, "a uuid that is there but wrong is an error, not a fresh install")
    }

    @Test("every key and TOML form: values land where they belong")
    func everyKey() throws {
        let c = try BeaconConfiguration.parse(Fixtures.bytes(Fixtures.root + "/good/every-key.conf"))
        #expect(c.beacon?.iBeacon?.major == 0xFF && c.beacon?.iBeacon?.minor == 1000 && c.beacon?.iBeacon?.measuredPower == -127)
        #expect(c.advertising.interval.units == 0x4000 && c.advertising.connectable && c.advertising.txPower == 20)
        #expect(c.advertising.legacyType == .connectableUndirected)
        #expect(c.controller.device == .serial(path: "/dev/ttyUSB0", baud: 921_600) && c.controller.backend == .hci)
        #expect(c.daemon.logLevel == .debug)
    }

    @Test("a BOM, CRLF line ends and \\u escapes are accepted")
    func bomAndEscapes() throws {
        let c = try BeaconConfiguration.parse(Fixtures.bytes(Fixtures.root + "/good/bom-crlf-escapes.conf"))
        #expect(c.beacon?.iBeacon?.uuid.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" && c.beacon?.iBeacon?.minor == 2)
    }

    @Test("defaults: measured power -59, 100 ms, non-connectable, hci0, auto")
    func defaults() throws {
        let c = try BeaconConfiguration.parse(Array("[beacon]\nuuid=\"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor=1\nminor=2".utf8))
        #expect(c.beacon?.iBeacon?.measuredPower == -59 && c.advertising.interval.units == 160 && !c.advertising.connectable)
        #expect(c.controller.device == .kernel(index: 0) && c.controller.backend == .auto && c.daemon.logLevel == nil)
    }

    @Test("a file over 64 KiB gets one whole-file error")
    func tooLarge() {
        let bytes = [UInt8](repeating: 0x23, count: 64 * 1024 + 1)
        let e = thrown(ConfigDiagnostics.self) { _ = try BeaconConfiguration.parse(bytes) }
        #expect(e != nil)
        #expect(e?.items.count == 1 && e?.items.first?.location == nil)
    }

    @Test("integers: TOML's forms and limits", arguments: [
        ("0", Int64(0)), ("+1", 1), ("-0", 0), ("1_000", 1000), ("0xff", 255), ("0xDEAD_beef", 0xDEADBEEF),
        ("9223372036854775807", Int64.max), ("-9223372036854775808", Int64.min),
    ])
    func integers(text: String, value: Int64) {
        let (doc, d) = TOMLSubset.parse(Array("k = \(text)\n".utf8))
        #expect(d.isEmpty, "\(d)")
        #expect(doc.tables[0].entries.first?.item.value == .integer(value))
    }

    @Test("numbers beacond refuses, each with its reason", arguments: [
        ("9223372036854775808", "does not fit in 64 bits"), ("1__0", "between digits"), ("_1", "expected a value"),
        ("1_", "between digits"), ("0o17", "octal and binary"), ("0b1", "octal and binary"), ("-0x1", "sign is not allowed"),
        ("0X1F", "lowercase 0x"), ("1e3", "floating-point"), ("inf", "floating-point"), ("nan", "floating-point"),
        ("-inf", "floating-point"), ("07:32:00", "dates and times"), ("0x", "expected digits"), ("12a", "not a valid integer"),
    ])
    func refusedNumbers(text: String, reason: String) {
        let (_, d) = TOMLSubset.parse(Array("k = \(text)\n".utf8))
        #expect(d.count == 1 && d[0].message.contains(reason), "\(text): \(d)")
    }

    /// A key pasted without quotes (or with stray text after it) is never quoted back: the message reaches stderr, the
    /// journal, STATUS and Ansible's output. Only its kind and length.
    @Test("bug: the value of an identity_key* key was quoted in full in its error", arguments: [
        ("identity_key_file", "9f11c1b2d3e4f5a6b7c8d9e0f1a2b3ee", "32 hex digits"),    // floating-point (the 'e')
        ("identity_key", "00112233445566778899aabbccddeeff", "32 hex digits"),         // not a valid integer
        ("identity_key", "12345678901234567890123456789012", "32 hex digits"),         // does not fit in 64 bits
        ("identity_key", "0x00112233445566778899aabbccddeeff", "34 characters"),       // does not fit in 64 bits
        ("identity_key", "ABEiM0RVZneImaq7zN3u/w==", "24 characters"),                 // base64: expected a value
        ("identity_key", "\"00112233445566778899aabbccddeeff\" 0011223344", "32 hex digits) is followed"),  // stray text
        ("identity_key", "\"00112233445566778899aabbccdd\\q\"", "30 characters"),  // a bad escape in the string
    ])
    func secretValuesAreNeverQuoted(key: String, value: String, kind: String) {
        for table in ["[[beacon]]\nformat = \"eddystone-eid\"\n", "[[beacon]]\nname = \"shop\"\n"] {
            let (_, d) = TOMLSubset.parse(Array("\(table)\(key) = \(value)\n".utf8))
            #expect(d.count == 1, "\(d)")
            let secretPieces = value.split(whereSeparator: { "\" \\".contains($0) }).map(String.init)
            for m in d.map(\.message) {
                #expect(m.hasPrefix("'\(key)' in [beacon]: ") && m.contains(kind), "\(m)")
                for piece in secretPieces where piece.count >= 6 {
                    for start in 0...(piece.count - 6) {
                        let six = String(piece.dropFirst(start).prefix(6))
                        #expect(!m.contains(six), "'\(six)' of the value is in \(m)")
                    }
                }
            }
            #expect(d.allSatisfy { $0.key == "beacon.\(key)" }, "\(d)")
        }
    }

    @Test("other keys' values are still quoted, so a mistake can be found")
    func otherValuesAreQuoted() {
        let (_, d) = TOMLSubset.parse(Array("[[beacon]]\nname = 1e3\n".utf8))
        #expect(d.count == 1 && d[0].message.contains("found '1e3'"), "\(d)")
    }
}

@Suite("gen-uuid --set editing")
struct EditorTests {
    static let commented = """
        # Shop 12, shelf 3
        [beacon]
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"   # region
        major = 12
        minor = 3

        [advertising]
        interval_ms = 100 # keep
        """

    @Test("replacing the UUID changes exactly one line and nothing else")
    func replace() throws {
        let uuid = BeaconUUID.version4(random: Array(0..<16))
        let out = try ConfigEditor.settingUUIDs(uuid, in: Array(Self.commented.utf8), replacing: true).bytes
        let before = Self.commented.split(separator: "\n", omittingEmptySubsequences: false)
        let after = String(decoding: out, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(before.count == after.count)
        let changed = zip(before, after).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
        #expect(changed == [2])
        #expect(after[2] == "uuid = \"\(uuid)\"   # region")
        #expect(try BeaconConfiguration.parse(out).beacon?.iBeacon?.uuid == uuid)
    }

    @Test("bug: --set on a file that has a uuid silently gave each Pi of a fleet its own region; it needs --replace")
    func keepsAnExistingUUID() {
        let uuid = BeaconUUID.version4(random: Array(0..<16))
        let error = thrown(ConfigDiagnostics.self) { _ = try ConfigEditor.settingUUIDs(uuid, in: Array(Self.commented.utf8)) }
        #expect(error?.items.map(\.message) == ["'uuid' in [beacon] is already E2C56DB5-DFFB-48D2-B060-D0F5A71096E0; a fleet shares one UUID, so --set keeps it: pass --replace to give this file a new region"])
        #expect(error?.items.first?.location?.line == 3)
    }

    @Test("a missing uuid key is added right after [beacon]")
    func insert() throws {
        let text = "# c\n[beacon]\nmajor = 1\nminor = 2\n"
        let uuid = BeaconUUID.version4(random: [UInt8](repeating: 0xAB, count: 16))
        let out = String(decoding: try ConfigEditor.settingUUIDs(uuid, in: Array(text.utf8)).bytes, as: UTF8.self)
        #expect(out == "# c\n[beacon]\nuuid = \"\(uuid)\"\nmajor = 1\nminor = 2\n")
    }

    @Test("a malformed UUID is fixed, a file with syntax errors is refused")
    func refuse() throws {
        let uuid = BeaconUUID.version4(random: Array(0..<16))
        _ = try ConfigEditor.settingUUIDs(uuid, in: Array("[beacon]\nuuid = \"nope\"\nmajor = 1\nminor = 2\n".utf8))
        #expect(throws: ConfigDiagnostics.self) {
            try ConfigEditor.settingUUIDs(uuid, in: Array("[beacon]\nuuid = \"x\nmajor = 1\nminor = 2\n".utf8))
        }
        #expect(throws: ConfigDiagnostics.self) {  // valid syntax, but the result would still be invalid
            try ConfigEditor.settingUUIDs(uuid, in: Array("[beacon]\nmajor = 1\n".utf8))
        }
    }

    static let threeShop = """
        # Shop 7: three shelves
        [[beacon]]
        major = 7
        minor = 1
        name = "shelf 1"

        [[beacon]]
        major = 7
        minor = 2   # by the door
        name = "shelf 2"

        [[beacon]]
        major = 7
        minor = 3
        name = "shelf 3"
        """

    @Test("bug (#42): --set refused [[beacon]] tables; now every beacon without a uuid gets the same new one, and nothing else changes")
    func fillsEveryArrayBeacon() throws {
        let uuid = BeaconUUID.version4(random: Array(0..<16))
        let edit = try ConfigEditor.settingUUIDs(uuid, in: Array(Self.threeShop.utf8))
        #expect(edit.uuid == uuid && !edit.reusedSiteUUID)
        #expect(edit.filled == ["[[beacon]] #1", "[[beacon]] #2", "[[beacon]] #3"])
        let before = Self.threeShop.split(separator: "\n", omittingEmptySubsequences: false)
        let after = String(decoding: edit.bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        // Exactly three lines added, one right after each header; every other line as it was.
        let added = after.enumerated().filter { $0.element.hasPrefix("uuid = ") }.map(\.offset)
        #expect(added == [2, 8, 14])
        #expect(after.enumerated().filter { !added.contains($0.offset) }.map(\.element) == before)
        let c = try BeaconConfiguration.parse(edit.bytes)
        #expect(c.beacons.compactMap(\.beacon.iBeacon?.uuid) == [uuid, uuid, uuid])
        #expect(c.beacons.compactMap(\.beacon.iBeacon?.minor) == [1, 2, 3] && c.unprovisioned.isEmpty)
    }

    @Test("a beacon added to a provisioned site joins the site's UUID; several UUIDs or none missing are refused")
    func joinsTheSiteUUID() throws {
        let fresh = BeaconUUID.version4(random: Array(0..<16))
        let site = "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 2\n"
        let edit = try ConfigEditor.settingUUIDs(fresh, in: Array((site + "[[beacon]]\nmajor = 1\nminor = 3\n").utf8))
        #expect(edit.reusedSiteUUID && edit.filled == ["[[beacon]] #2"] && edit.uuid.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        // Nothing missing: kept, as for [beacon].
        let kept = thrown(ConfigDiagnostics.self) { _ = try ConfigEditor.settingUUIDs(fresh, in: Array((site + site).utf8)) }
        #expect(kept?.items.map(\.message) == ["every beacon in this file has its uuid already (E2C56DB5-DFFB-48D2-B060-D0F5A71096E0); a fleet shares one UUID, so --set keeps it: pass --replace to give this file a new region"])
        // Two regions in one file: which one the new beacon joins is the user's to say.
        let other = "[[beacon]]\nuuid = \"00112233-4455-6677-8899-AABBCCDDEEFF\"\nmajor = 1\nminor = 4\n"
        let two = thrown(ConfigDiagnostics.self) {
            _ = try ConfigEditor.settingUUIDs(fresh, in: Array((site + other + "[[beacon]]\nmajor = 1\nminor = 3\n").utf8))
        }
        #expect(two?.items.first?.message.hasPrefix("the beacons in this file have 2 different UUIDs") == true)
        // --replace: every beacon the one new UUID.
        let replaced = try ConfigEditor.settingUUIDs(fresh, in: Array((site + other).utf8), replacing: true)
        #expect(try BeaconConfiguration.parse(replaced.bytes).beacons.compactMap(\.beacon.iBeacon?.uuid) == [fresh, fresh])
    }

    @Test("beacons of formats without a uuid are left alone")
    func otherFormats() throws {
        let fresh = BeaconUUID.version4(random: Array(0..<16))
        let eddy = "[[beacon]]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1b2c3d4e5f6\"\n"
        let edit = try ConfigEditor.settingUUIDs(fresh, in: Array((eddy + "[[beacon]]\nformat = \"altbeacon\"\nmajor = 1\nminor = 3\n").utf8))
        #expect(edit.filled == ["[[beacon]] #2"])
        #expect(thrown(ConfigDiagnostics.self) { _ = try ConfigEditor.settingUUIDs(fresh, in: Array(eddy.utf8)) } != nil)
    }
}
