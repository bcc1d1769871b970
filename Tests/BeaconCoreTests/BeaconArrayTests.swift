// [[beacon]]: several beacons in one file, each with its own format and interval; and [advertising] address.
import BeaconCore
import BluetoothHCI
import TestSupport
import Testing

private func parse(_ text: String) throws(ConfigDiagnostics) -> BeaconConfiguration {
    try BeaconConfiguration.parse(Array(text.utf8))
}

private func errors(_ text: String) -> [String] {
    thrown(ConfigDiagnostics.self) { _ = try parse(text) }?.items.map { "\($0.location.map { "\($0)" } ?? "-"): error: \($0.message)" } ?? []
}

private let ib = "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 2\n"
private let alt = "[[beacon]]\nformat = \"altbeacon\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 3\nminor = 4\n"
private let eddy = "[[beacon]]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1b2c3d4e5f6\"\ninterval_ms = 250\n"

@Suite("several beacons and the address policy in the config")
struct BeaconArrayTests {
    static let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"

    @Test("three [[beacon]] tables: three beacons in file order, each with its format, lines and interval")
    func three() throws {
        let c = try parse(ib + alt + "\n[advertising]\ninterval_ms = 200\n" + eddy)
        #expect(c.beacons.map(\.beacon.format) == [.ibeacon, .altbeacon, .eddystoneUID])
        #expect(c.beacons.map(\.location.line) == [1, 5, 13])
        #expect(c.beacons.map { c.interval(of: $0).units } == [320, 320, 400])  // 200, 200, 250 ms
        #expect(c.beacon?.format == .ibeacon)  // the first
        #expect(c.unprovisioned.isEmpty)
    }

    @Test("bug (#42): a [[beacon]] without uuid was an error; it is unprovisioned, as [beacon] is, and the others go on the air")
    func arrayWithoutUUID() throws {
        let c = try parse(ib + "[[beacon]]\nmajor = 1\nminor = 3\n" + alt)
        #expect(c.beacons.map(\.label) == ["[[beacon]] #1", "[[beacon]] #3"])
        #expect(c.unprovisioned == [UnprovisionedBeacon(label: "[[beacon]] #2", location: SourceLocation(line: 5, column: 1))])
        #expect(c.uuidNeeded(path: "b.conf") == "[[beacon]] #2 in b.conf:5 has no uuid yet; set one with 'beacond gen-uuid --set b.conf'")
        let none = try parse("[[beacon]]\nmajor = 1\nminor = 1\n[[beacon]]\nmajor = 1\nminor = 2\n[[beacon]]\nmajor = 1\nminor = 3\n")
        #expect(none.beacons.isEmpty && none.unprovisioned.map(\.location.line) == [1, 4, 7])
        #expect(none.uuidNeeded(path: "b.conf") == "3 beacons in b.conf (lines 1, 4 and 7) have no uuid yet; set one for all of them with 'beacond gen-uuid --set b.conf'")
        // Still a mistake: a missing major or minor beside the missing uuid.
        #expect(errors(ib + "[[beacon]]\nmajor = 1\n") == ["5:1: error: missing required key 'minor' in [[beacon]] #2"])
    }

    @Test("one [[beacon]] is the same beacon as [beacon]")
    func oneElement() throws {
        let a = try parse(ib)
        let b = try parse("[beacon]" + ib.dropFirst("[[beacon]]".count))
        #expect(a.beacons.map(\.beacon) == b.beacons.map(\.beacon))
        #expect(a.beacons.count == 1)
    }

    @Test("a beacon's own interval_ms: range checked like [advertising]'s")
    func ownInterval() throws {
        let c = try parse("[beacon]\nuuid = \"\(Self.uuid)\"\nmajor = 1\nminor = 2\ninterval_ms = 1000\n")
        #expect(c.beacons[0].interval?.units == 1600)
        #expect(errors("[beacon]\nuuid = \"\(Self.uuid)\"\nmajor = 1\nminor = 2\ninterval_ms = 10\n")
                == ["5:15: error: 'interval_ms' in [beacon] must be from 20 to 10240 ms, found 10"])
    }

    static let cases: [(String, [String])] = [
        // Each mistake names the element, so the user knows which beacon.
        (ib + "[[beacon]]\nformat = \"altbeacon\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 70000\nminor = 4\n", ["8:9: error: 'major' in [[beacon]] #2 must be from 0 to 65535, found 70000"]),
        (ib + "[[beacon]]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1b2c3d4e5f6\"\nmajor = 1\n",
         ["9:1: error: 'major' in [[beacon]] #2 belongs to formats \"ibeacon\" and \"altbeacon\", not to this beacon's format \"eddystone-uid\""]),
        (ib + "[[beacon]]\nformat = \"altbeacn\"\n", ["6:10: error: 'format' in [[beacon]] #2 must be one of \"ibeacon\", \"altbeacon\", \"eddystone-uid\", \"eddystone-tlm\", \"eddystone-eid\", \"bthome\", found \"altbeacn\"; did you mean \"altbeacon\"?"]),
        (ib + "[[beacon]]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminr = 2\n",
         ["5:1: error: missing required key 'minor' in [[beacon]] #2", "8:1: error: unknown key 'minr' in [[beacon]] #2; did you mean 'minor'?"]),
        // TOML: a name is one table or an array of tables, never both.
        ("[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 2\n" + alt,
         ["5:1: error: [[beacon]] after the table [beacon] at line 1: write every one as [[beacon]]"]),
        (ib + "[beacon]\n", ["5:1: error: [beacon] after the array of tables [[beacon]] at line 1: write every one as [[beacon]]"]),
        (ib + "[[advertising]]\ninterval_ms = 100\n", ["5:1: error: [[advertising]] is not an array of tables: there is one [advertising] (only beacons come as [[beacon]])"]),
        (ib + "[[beacon\n", ["5:9: error: expected ']]' to close the table header [[beacon"]),
        // The address policy.
        (ib + "[advertising]\naddress = \"statc\"\n", ["6:11: error: 'address' in [advertising] must be one of \"public\", \"static\", \"rotating\", \"resolvable\", found \"statc\"; did you mean \"static\"?"]),
        (ib + "[advertising]\naddress = \"static\"\n[controller]\nbackend = \"mgmt\"\n",
         ["6:11: error: 'address' in [advertising] cannot be \"static\" with backend = \"mgmt\": the kernel advertises a non-connectable beacon from a non-resolvable address it picks and rotates itself; use backend = \"hci\" or \"auto\" (which then uses raw HCI commands)"]),
    ]

    @Test("each mistake names the beacon, the key and where", arguments: BeaconArrayTests.cases)
    func mistakes(text: String, expected: [String]) {
        #expect(errors(text) == expected)
    }

    @Test("address: unset by default; public, static and rotating parse; rotating and connectable public are fine through mgmt")
    func address() throws {
        #expect(try parse(ib).advertising.address == nil)
        for policy in AddressPolicy.allCases {
            let key = policy == .resolvable ? "resolving_key_file = \"k\"\n" : ""  // its key: ResolvableConfigTests
            let c = try parse(ib + key + "[advertising]\naddress = \"\(policy.rawValue)\"\n")
            #expect(c.advertising.address == policy)
        }
        let rotating = try parse(ib + "[advertising]\naddress = \"rotating\"\n[controller]\nbackend = \"mgmt\"\n")
        #expect(rotating.advertising.address == .rotating)
        let connectable = try parse(ib + "[advertising]\naddress = \"public\"\nconnectable = true\n[controller]\nbackend = \"mgmt\"\n")
        #expect(connectable.advertising.address == .public)
    }
}

