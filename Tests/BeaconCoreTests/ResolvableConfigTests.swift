// address = "resolvable" in the config: its resolving_key_file, address_rotation_s, the formats that cannot take it,
// and what the address plan makes of it (raw HCI under backend auto, as for static).
import BeaconCore
import BluetoothHCI
import TestSupport
import Testing

private func parse(_ text: String) throws(ConfigDiagnostics) -> BeaconConfiguration {
    try BeaconConfiguration.parse(Array(text.utf8))
}

private func errors(_ text: String) -> [String] {
    thrown(ConfigDiagnostics.self) { _ = try parse(text) }?.items.map { "\($0.location.map { "\($0)" } ?? "-"): \($0.message) [\($0.key ?? "")]" } ?? []
}

private let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
private func ib(_ minor: Int, _ extra: String = "") -> String { "[[beacon]]\nuuid = \"\(uuid)\"\nmajor = 1\nminor = \(minor)\n\(extra)" }
private let keyed = "address = \"resolvable\"\nresolving_key_file = \"shop.irk\"\n"

@Suite("resolvable addresses in the config")
struct ResolvableConfigTests {
    @Test("a resolvable beacon with its key: the plan has it, auto takes raw HCI, the loader is told of the file")
    func accepted() throws {
        let c = try parse(ib(1, keyed) + ib(2) + "[advertising]\naddress_rotation_s = 2\n")
        let plan = c.addressPlan
        #expect(plan.wanted.map(\.setting) == [.policy(.resolvable), nil])
        #expect(plan.beacondChooses)  // through mgmt the kernel cannot take a per-beacon key
        #expect(plan.rotates && plan.rotation == .seconds(2))
        #expect(c.keyFiles == [KeyFileReference(beacon: 0, key: "resolving_key_file", file: "shop.irk", location: SourceLocation(line: 6, column: 22),
                                                kind: "a resolving key")])
        #expect(plan.sentence(0, throughKernel: false, kept: nil) == "resolvable (a new resolvable private address every 2 s, made with the key in shop.irk)")
        #expect(plan.kind(0, throughKernel: false) == .resolvable)
        let rotation = try parse(ib(1)).advertising.addressRotation
        #expect(rotation == .seconds(900))
    }

    @Test("the loaded key goes with the address it makes; an Eddystone-TLM beacon shares its UID beacon's, key and all")
    func keyInThePlan() throws {
        let uid = "[[beacon]]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1b2c3d4e5f6\"\nresolving_key_file = \"uid.irk\"\n"
        var c = try parse(uid + "[[beacon]]\nformat = \"eddystone-tlm\"\n[advertising]\naddress = \"resolvable\"\n")
        let key = try #require(IdentityKey(hex: "ec0234a357c8ad05341010a60a397d9b"))
        c.setKey(key, for: c.keyFiles[0])
        let plan = c.addressPlan
        #expect(plan.wanted[0].resolvingKey == key && plan.wanted[1] == plan.wanted[0])
        #expect(plan.resolvingKeyFiles == ["uid.irk", "uid.irk"])
    }

    @Test("mistakes name the key, its place and what to do", arguments: [
        // The address without its key: at the address.
        (ib(1, "address = \"resolvable\"\n"),
         "5:11: 'address' in [[beacon]] #1 is \"resolvable\", which needs its key: add resolving_key_file = \"NAME\" (32 hex digits in /etc/beacond/keys, made with 'beacond gen-key'), or choose another address [beacon.resolving_key_file]"),
        // [advertising]'s, at the beacon that lacks the key.
        (ib(1, "resolving_key_file = \"a.irk\"\n") + ib(2) + "[advertising]\naddress = \"resolvable\"\n",
         "6:1: [[beacon]] #2 takes address = \"resolvable\" from [advertising] (line 11), which needs its key: add resolving_key_file = \"NAME\" (32 hex digits in /etc/beacond/keys, made with 'beacond gen-key'), or choose another address [beacon.resolving_key_file]"),
        // The key without the address: at the key.
        (ib(1, "resolving_key_file = \"a.irk\"\n"),
         "5:22: 'resolving_key_file' in [[beacon]] #1 names \"a.irk\", but the beacon has its default address: a resolving key is for address = \"resolvable\"; set that too, or remove the key [beacon.resolving_key_file]"),
        (ib(1, "address = \"static\"\nresolving_key_file = \"a.irk\"\n"),
         "6:22: 'resolving_key_file' in [[beacon]] #1 names \"a.irk\", but the beacon has address = \"static\": a resolving key is for address = \"resolvable\"; set that too, or remove the key [beacon.resolving_key_file]"),
        // Formats that cannot take it: the EID beacon's address follows its EID, the self-report's is fixed.
        ("[beacon]\nformat = \"eddystone-eid\"\nidentity_key_file = \"e.key\"\nresolving_key_file = \"a.irk\"\n",
         "4:1: 'resolving_key_file' in [beacon] belongs to formats \"ibeacon\", \"altbeacon\", \"eddystone-uid\" and \"eddystone-tlm\", not to this beacon's format \"eddystone-eid\" [beacon.resolving_key_file]"),
        ("[beacon]\nformat = \"bthome\"\naddress = \"resolvable\"\n",
         "3:11: 'address' in [beacon] cannot be \"resolvable\": Home Assistant keys a BTHome device on its address (and an encrypted frame's nonce holds it), so the self-report goes out from a fixed one; use \"static\" (its default) or a random static address [beacon.address]"),
        // The kernel cannot take a per-beacon key.
        (ib(1, keyed) + "[controller]\nbackend = \"mgmt\"\n",
         "5:11: 'address' in [[beacon]] #1 cannot be \"resolvable\" with backend = \"mgmt\": the kernel advertises a non-connectable beacon from a non-resolvable address it picks and rotates itself; use backend = \"hci\" or \"auto\" (which then uses raw HCI commands) [beacon.address]"),
        (ib(1) + "[advertising]\naddress_rotation_s = 0\n",
         "6:22: 'address_rotation_s' in [advertising] must be from 1 to 3600 s, found 0 [advertising.address_rotation_s]"),
        (ib(1) + "[advertising]\naddress_rotation_s = 3601\n",
         "6:22: 'address_rotation_s' in [advertising] must be from 1 to 3600 s, found 3601 [advertising.address_rotation_s]"),
    ])
    func mistakes(_ text: String, _ expected: String) {
        #expect(errors(text) == [expected])
    }

    @Test("an EID beacon and the self-report keep their own addresses under [advertising]'s resolvable, and need no key")
    func othersUnderAdvertising() throws {
        let text = "[[beacon]]\nformat = \"eddystone-eid\"\nidentity_key_file = \"e.key\"\n[[beacon]]\nformat = \"bthome\"\n" + ib(1, "resolving_key_file = \"a.irk\"\n")
            + "[advertising]\naddress = \"resolvable\"\n"
        let c = try parse(text)
        #expect(c.addressPlan.wanted.map(\.setting) == [.policy(.rotating), .policy(.static), .policy(.resolvable)])
        #expect(c.keyFiles.map(\.key) == ["identity_key_file", "resolving_key_file"])
    }
}
