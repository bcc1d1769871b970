// [beacon] address: each beacon's own address setting, a chosen address and its checks, and what each beacon's kept
// address is filed under (its identity), so reordering and adding beacons moves nothing.
import BeaconCore
import BluetoothHCI
import TestSupport
import Testing

private func parse(_ text: String) throws(ConfigDiagnostics) -> BeaconConfiguration {
    try BeaconConfiguration.parse(Array(text.utf8))
}

private func errors(_ text: String) -> [String] {
    thrown(ConfigDiagnostics.self) { _ = try parse(text) }?.items.map { "\($0.location.map { "\($0)" } ?? "-"): error: \($0.message) [\($0.key ?? "")]" } ?? []
}

private let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
private func ib(_ minor: Int, _ extra: String = "") -> String { "[[beacon]]\nuuid = \"\(uuid)\"\nmajor = 1\nminor = \(minor)\n\(extra)" }
private let uid = "[[beacon]]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1b2c3d4e5f6\"\n"
private let tlm = "[[beacon]]\nformat = \"eddystone-tlm\"\n"

@Suite("per-beacon addresses in the config")
struct BeaconAddressConfigTests {
    @Test("a chosen address, a policy per beacon, and [advertising]'s for the rest")
    func settings() throws {
        let c = try parse(ib(1, "address = \"C6:12:34:56:78:9A\"\n") + ib(2, "address = \"public\"\n") + ib(3) + "[advertising]\naddress = \"rotating\"\n")
        #expect(c.addressPlan.wanted.map(\.setting) == [.chosen([0x9A, 0x78, 0x56, 0x34, 0x12, 0xC6]), .policy(.public), .policy(.rotating)])
        #expect(c.beacons[0].addressLocation == SourceLocation(line: 5, column: 11))
    }

    @Test("kept addresses follow the identity: the same keys after reordering and adding beacons; a repeated identity is #2")
    func keys() throws {
        let a = try parse(ib(1) + ib(2)).addressPlan.wanted.map(\.key)
        #expect(a == ["ibeacon \(uuid) 1 1", "ibeacon \(uuid) 1 2"])
        let reordered = try parse(ib(2) + uid + ib(1)).addressPlan.wanted.map(\.key)
        #expect(reordered == ["ibeacon \(uuid) 1 2", "eddystone-uid 00112233445566778899 a1b2c3d4e5f6", "ibeacon \(uuid) 1 1"])
        // measured_power is not identity: editing it keeps the address.
        #expect(try parse(ib(1, "measured_power = -70\n")).addressPlan.wanted.map(\.key) == ["ibeacon \(uuid) 1 1"])
        #expect(try parse(ib(1) + ib(1)).addressPlan.wanted.map(\.key) == ["ibeacon \(uuid) 1 1", "ibeacon \(uuid) 1 1 #2"])
    }

    @Test("Eddystone-TLM goes out from its UID beacon's address (the one before it, else the first); alone it has its own")
    func telemetryFollowsUID() throws {
        let c = try parse(tlm + uid + ib(1) + tlm)
        let w = c.addressPlan.wanted
        #expect(w[0] == w[1] && w[3] == w[1])
        let own = try parse(uid + tlm + "address = \"D1:00:00:00:00:01\"\n").addressPlan.wanted
        #expect(own[1].setting == BeaconAddressSetting.chosen([1, 0, 0, 0, 0, 0xD1]))
        #expect(try parse(tlm + tlm).addressPlan.wanted.map(\.key) == ["eddystone-tlm", "eddystone-tlm #2"])
    }

    @Test("a chosen address must be a random static one, and each beacon's own", arguments: [
        (ib(1, "address = \"06:12:34:56:78:9A\"\n"),
         "5:11: error: 'address' in [[beacon]] #1 is not a random static address: its two top bits must be 11 (a first digit of C, D, E or F), found \"06:12:34:56:78:9A\"; a public or private address cannot be chosen here [beacon.address]"),
        (ib(1, "address = \"FF:FF:FF:FF:FF:FF\"\n"),
         "5:11: error: 'address' in [[beacon]] #1 is not a random static address: the 46 bits after the top two must not be all 0 or all 1, found \"FF:FF:FF:FF:FF:FF\" [beacon.address]"),
        (ib(1, "address = \"C6:12:34:56:78\"\n"),
         "5:11: error: 'address' in [[beacon]] #1 must be \"public\", \"static\", \"rotating\", \"resolvable\" or a random static address like \"C6:12:34:56:78:9A\", found \"C6:12:34:56:78\" [beacon.address]"),
        (ib(1, "address = \"statc\"\n"),
         "5:11: error: 'address' in [[beacon]] #1 must be \"public\", \"static\", \"rotating\", \"resolvable\" or a random static address like \"C6:12:34:56:78:9A\", found \"statc\"; did you mean \"static\"? [beacon.address]"),
        (ib(1, "address = \"c6:12:34:56:78:9a\"\n") + ib(2, "address = \"C6:12:34:56:78:9A\"\n"),
         "10:11: error: 'address' in [[beacon]] #2 is C6:12:34:56:78:9A, the same as in [[beacon]] #1 (line 5): gateways would take the two for one device; give each beacon its own address [beacon.address]"),
        (ib(1) + "[advertising]\naddress = \"C6:12:34:56:78:9A\"\n",
         "6:11: error: 'address' in [advertising] names one address, which belongs to one beacon: put address = \"C6:12:34:56:78:9A\" in that beacon's table ([beacon] or its [[beacon]]) [advertising.address]"),
        (ib(1, "address = \"C6:12:34:56:78:9A\"\n") + "[controller]\nbackend = \"mgmt\"\n",
         "5:11: error: 'address' in [[beacon]] #1 cannot be \"C6:12:34:56:78:9A\" with backend = \"mgmt\": the kernel advertises a non-connectable beacon from a non-resolvable address it picks and rotates itself; use backend = \"hci\" or \"auto\" (which then uses raw HCI commands) [beacon.address]"),
    ])
    func mistakes(_ text: String, _ expected: String) {
        #expect(errors(text) == [expected])
    }

    @Test("who tells the controller the addresses: beacond for hci and H4, and for auto when a beacon needs its own address")
    func whoChooses() throws {
        #expect(try parse(ib(1)).addressPlan.beacondChooses == false)  // auto on hci0: mgmt, the kernel's addresses
        #expect(try parse(ib(1, "address = \"static\"\n")).addressPlan.beacondChooses)
        #expect(try parse(ib(1) + "[controller]\nbackend = \"hci\"\n").addressPlan.beacondChooses)
        #expect(try parse(ib(1) + "[controller]\ndevice = \"unix:/tmp/x\"\n").addressPlan.beacondChooses)
        #expect(try parse(ib(1, "address = \"rotating\"\n")).addressPlan.beacondChooses == false)
    }
}
