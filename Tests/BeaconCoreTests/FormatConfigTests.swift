// [beacon] format = "altbeacon" / "eddystone-uid": the keys of each format, their ranges and defaults, and the errors
// for a key that belongs to another format.
import BeaconCore
import TestSupport
import Testing

private func parse(_ text: String) throws(ConfigDiagnostics) -> BeaconConfiguration {
    try BeaconConfiguration.parse(Array(text.utf8))
}

private func errors(_ text: String) -> [String] {
    thrown(ConfigDiagnostics.self) { _ = try parse(text) }?.items.map { "\($0.location.map { "\($0)" } ?? "-"): error: \($0.message)" } ?? []
}

@Suite("beacon formats in the config")
struct FormatConfigTests {
    static let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"

    @Test("no format is an iBeacon, exactly as before")
    func defaultFormat() throws {
        let c = try parse("[beacon]\nuuid = \"\(Self.uuid)\"\nmajor = 1\nminor = 2\n")
        let uuid = try BeaconUUID(parsing: Self.uuid)
        #expect(c.beacon == .iBeacon(IBeacon(uuid: uuid, major: 1, minor: 2)))
        #expect(c.beacon?.format == .ibeacon)
    }

    @Test("altbeacon: uuid, major, minor, measured_power, company_id (default 0x0118), reserved (default 0)")
    func altBeacon() throws {
        let uuid = try BeaconUUID(parsing: Self.uuid)
        let c = try parse("[beacon]\nformat = \"altbeacon\"\nuuid = \"\(Self.uuid)\"\nmajor = 1\nminor = 2\n")
        #expect(c.beacon == .altBeacon(AltBeacon(uuid: uuid, major: 1, minor: 2,
                                                 referenceRSSI: -59, companyID: 0x0118, reserved: 0)))
        let d = try parse("[beacon]\nformat = \"altbeacon\"\nuuid = \"\(Self.uuid)\"\nmajor = 1\nminor = 2\n"
                          + "measured_power = -65\ncompany_id = 0x004C\nreserved = 0xAB\n")
        #expect(d.beacon == .altBeacon(AltBeacon(uuid: uuid, major: 1, minor: 2,
                                                 referenceRSSI: -65, companyID: 0x004C, reserved: 0xAB)))
        #expect(d.beacon?.advertisingData.bytes.count == 31)
    }

    @Test("eddystone-uid: namespace (20 hex digits), instance (12), measured_power at 0 m (default -18)")
    func eddystone() throws {
        let c = try parse("[beacon]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1B2c3D4e5F6\"\n")
        let uid = EddystoneUID(namespace: [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99],
                               instance: [0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6], txPowerAt0m: -18)!
        #expect(c.beacon == .eddystoneUID(uid))
        #expect(c.unprovisioned.isEmpty)
    }

    // The cases live in a property: Swift 6.0's compiler crashes on string interpolation inside @Test's arguments.
    static let mistakeCases: [(String, [String])] = [
        ("[beacon]\nformat = \"ibecon\"\nuuid = \"\(uuid)\"\nmajor = 1\nminor = 2\n",
         ["2:10: error: 'format' in [beacon] must be one of \"ibeacon\", \"altbeacon\", \"eddystone-uid\", \"eddystone-tlm\", \"eddystone-eid\", \"bthome\", found \"ibecon\"; did you mean \"ibeacon\"?"]),
        ("[beacon]\nuuid = \"\(uuid)\"\nmajor = 1\nminor = 2\nnamespace = \"00112233445566778899\"\n",
         ["5:1: error: 'namespace' in [beacon] belongs to format \"eddystone-uid\", not to this beacon's format \"ibeacon\""]),
        ("[beacon]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1b2c3d4e5f6\"\nmajor = 3\n",
         ["5:1: error: 'major' in [beacon] belongs to formats \"ibeacon\" and \"altbeacon\", not to this beacon's format \"eddystone-uid\""]),
        ("[beacon]\nformat = \"ibeacon\"\nuuid = \"\(uuid)\"\nmajor = 1\nminor = 2\ncompany_id = 5\n",
         ["6:1: error: 'company_id' in [beacon] belongs to format \"altbeacon\", not to this beacon's format \"ibeacon\""]),
        ("[beacon]\nformat = \"eddystone-uid\"\nnamespace = \"0011223344\"\ninstance = \"a1b2c3d4e5fg\"\n",
         ["3:13: error: 'namespace' in [beacon] must be 20 hex digits (10 bytes), found 10",
          "4:12: error: 'instance' in [beacon] must be 12 hex digits (6 bytes): 'g' at character 12 is not a hex digit"]),
        ("[beacon]\nformat = \"eddystone-uid\"\ninstance = \"a1b2c3d4e5f6\"\nmeasured_power = -101\n",
         ["1:1: error: missing required key 'namespace' in [beacon] (format \"eddystone-uid\")",
          "4:18: error: 'measured_power' in [beacon] must be from -100 to 20 dBm (at 0 m, for \"eddystone-uid\"), found -101"]),
        ("[beacon]\nformat = \"altbeacon\"\nuuid = \"\(uuid)\"\nmajor = 1\nminor = 2\nreserved = 256\ncompany_id = -1\n",
         ["6:12: error: 'reserved' in [beacon] must be from 0 to 255, found 256",
          "7:14: error: 'company_id' in [beacon] must be from 0 to 65535, found -1"]),
    ]

    @Test("each mistake names the key, the format and where", arguments: mistakeCases)
    func mistakes(text: String, expected: [String]) {
        #expect(errors(text) == expected)
    }
}
