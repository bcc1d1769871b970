// The address plan: the one place that knows which address each beacon gets, which of them the kernel's management
// interface can give, and how each is described.
import BeaconCore
import BluetoothHCI
import Testing

private func plan(_ text: String) throws -> AddressPlan {
    try BeaconConfiguration.parse(Array(text.utf8)).addressPlan
}

private let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
private func ib(_ minor: Int, _ extra: String = "") -> String { "[[beacon]]\nuuid = \"\(uuid)\"\nmajor = 1\nminor = \(minor)\n\(extra)" }
private let uid = "[[beacon]]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"a1b2c3d4e5f6\"\n"
private let uid2 = "[[beacon]]\nformat = \"eddystone-uid\"\nnamespace = \"00112233445566778899\"\ninstance = \"0000000000ff\"\n"
private let tlm = "[[beacon]]\nformat = \"eddystone-tlm\"\n"
private let eid = "[[beacon]]\nformat = \"eddystone-eid\"\nidentity_key_file = \"k.key\"\n"

@Suite("the address plan")
struct AddressPlanTests {
    @Test("the kernel gives only its own rotating private address, and the public one to connectable advertising")
    func kernelRule() {
        let chosen: BluetoothAddress = [1, 2, 3, 4, 5, 0xC6]
        for (setting, connectable, ok) in [(nil, false, true), (.policy(.rotating), false, true), (.policy(.public), true, true),
                                           (.policy(.public), false, false), (.policy(.static), false, false), (.policy(.static), true, false),
                                           (.chosen(chosen), false, false)] as [(BeaconAddressSetting?, Bool, Bool)] {
            #expect(AddressPlan.kernelCanGive(setting, connectable: connectable) == ok, "\(String(describing: setting)) connectable \(connectable)")
        }
    }

    @Test("beacond's own commands are needed for EID, static, chosen and non-connectable public addresses, and say why")
    func ownCommands() throws {
        #expect(try plan(ib(1)).ownCommandsNeeded == nil)
        #expect(try plan(ib(1) + "[advertising]\naddress = \"rotating\"\n").ownCommandsNeeded == nil)
        #expect(try plan(ib(1) + "[advertising]\naddress = \"public\"\nconnectable = true\n").ownCommandsNeeded == nil)
        #expect(try plan(ib(1) + "[advertising]\naddress = \"static\"\n").ownCommandsNeeded
                == "address = \"static\" needs them; the management interface would advertise from the kernel's own address")
        #expect(try plan(ib(1, "address = \"C6:12:34:56:78:9A\"\n")).ownCommandsNeeded?.hasPrefix("address = \"C6:12:34:56:78:9A\" needs them") == true)
        #expect(try plan(ib(1) + eid).ownCommandsNeeded == "an Eddystone-EID beacon's address must change with each EID, which needs them")
    }

    @Test("who chooses the addresses: beacond on H4 and with backend hci, the kernel with mgmt, auto by the addresses")
    func chooser() throws {
        #expect(try plan(ib(1)).beacondChooses == false)
        #expect(try plan(ib(1) + "[controller]\nbackend = \"hci\"\n").beacondChooses)
        #expect(try plan(ib(1) + "[controller]\ndevice = \"tcp:127.0.0.1:9000\"\n").beacondChooses)
        #expect(try plan(ib(1) + "[advertising]\naddress = \"static\"\n").beacondChooses)
        #expect(try plan(ib(1) + "[advertising]\naddress = \"rotating\"\n[controller]\nbackend = \"mgmt\"\n").beacondChooses == false)
    }

    @Test("telemetry goes out from its Eddystone-UID beacon's address: the one before it, else the first; not with its own")
    func telemetryFollowsUID() throws {
        let p = try plan(tlm + uid + tlm + uid2 + tlm + "[[beacon]]\nformat = \"eddystone-tlm\"\naddress = \"public\"\n")
        #expect(p.sharesWith == [1, nil, 1, nil, 3, nil])
        #expect(p.wanted[0] == p.wanted[1] && p.wanted[4] == p.wanted[3] && p.wanted[5].setting == .policy(.public))
        #expect(try plan(tlm + ib(1)).sharesWith == [nil, nil], "no UID beacon: nothing to follow")
    }

    @Test("#52: which beacons never take the public address: private addresses, EIDs, an encrypted self-report; not static, chosen or plaintext ones")
    func neverPublic() throws {
        let bthome = "[[beacon]]\nformat = \"bthome\"\n"
        let p = try plan(ib(1) + ib(2, "address = \"C6:12:34:56:78:9A\"\n") + ib(3, "address = \"rotating\"\n") + eid + bthome
                         + "[advertising]\naddress = \"static\"\n")
        #expect(p.neverPublic == [false, false, true, true, false])
        let encrypted = try BeaconConfiguration.parse(Array((ib(1) + bthome + "bindkey_file = \"home.key\"\n").utf8))
        #expect(encrypted.addressPlan.neverPublic == [false, true])
        // TLM shares its UID's address, and so its fate.
        #expect(try plan(uid + tlm + "[advertising]\naddress = \"rotating\"\n").neverPublic == [true, true])
    }

    @Test("#52: check-config's warning: a private address on a frame that names its beacon hides nothing; none for EID or TLM")
    func identityWarning() throws {
        let p = try plan(ib(1, "address = \"rotating\"\n") + ib(2) + eid + uid + "address = \"rotating\"\n" + tlm + "address = \"rotating\"\n"
                         + ib(3, "address = \"rotating\"\nname = \"shelf\"\n"))
        #expect(p.identityWarning(0)?.contains("its uuid, major and minor tell anyone who it is") == true)
        #expect(p.identityWarning(1) == nil && p.identityWarning(2) == nil && p.identityWarning(4) == nil)
        #expect(p.identityWarning(3)?.contains("its namespace and instance") == true)
        #expect(p.identityWarning(5)?.contains("and the name in its scan response") == true)
    }

    @Test("#52: each format's address is one row of data")
    func formatRows() {
        #expect(BeaconFormat.allCases.filter { $0.addressRule.takesPrivateAddress } == [.ibeacon, .altbeacon, .eddystoneUID, .eddystoneTLM])
        #expect(BeaconFormat.allCases.filter { !$0.addressRule.takesAddressKey } == [.eddystoneEID])
        #expect(BeaconFormat.allCases.filter { $0.addressRule.address == .fixed } == [.bthome])
    }

    @Test("each beacon's kind and setting by name, as the state file and payload name them")
    func kinds() throws {
        let p = try plan(ib(1, "address = \"C6:12:34:56:78:9A\"\n") + ib(2, "address = \"public\"\n") + ib(3, "address = \"rotating\"\n") + ib(4) + eid)
        #expect((0..<5).map { p.kind($0, throughKernel: false) } == [.chosen, .public, .rotating, .static, .eid])
        #expect((0..<5).map { p.settingKind($0) } == [.chosen, .public, .rotating, .static, .eid])
        let k = try plan(ib(1) + ib(2, "address = \"rotating\"\n"))
        #expect((0..<2).map { k.kind($0, throughKernel: true) } == [.kernel, .kernel])
        #expect((0..<2).map { k.settingKind($0) } == [.kernel, .rotating])
    }

    @Test("the sentences: before anything is on the air, and an address on the air")
    func sentences() throws {
        let p = try plan(ib(1, "address = \"C6:12:34:56:78:9A\"\n") + ib(2, "address = \"public\"\n") + ib(3, "address = \"rotating\"\n") + ib(4) + eid)
        let file = "/var/lib/beacond/addresses"
        #expect(p.sentence(0, throughKernel: false, kept: nil) == "C6:12:34:56:78:9A (chosen)")
        #expect(p.sentence(1, throughKernel: false, kept: nil) == "public (the controller's own address)")
        #expect(p.sentence(2, throughKernel: false, kept: nil) == "rotating (a new private address every 900 s)")
        #expect(p.sentence(3, throughKernel: false, kept: .known([1, 2, 3, 4, 5, 0xD0], file: file)) == "D0:05:04:03:02:01 (static, kept in \(file))")
        #expect(p.sentence(3, throughKernel: false, kept: .notYet(file: file)) == "static, made at first start (kept in \(file))")
        #expect(p.sentence(3, throughKernel: true, kept: nil).hasPrefix("the kernel's own"))
        #expect(p.sentence(4, throughKernel: false, kept: nil) == "a new non-resolvable private address with every EID")
        let a: BluetoothAddress = [1, 2, 3, 4, 5, 0xC6]
        #expect(AddressPlan.describe(.random(a), nil) == "static address C6:05:04:03:02:01")
        #expect(AddressPlan.describe(.random(a), .chosen(a)) == "chosen address C6:05:04:03:02:01")
        #expect(AddressPlan.describe(.random(a), .policy(.rotating)) == "rotating address C6:05:04:03:02:01")
        #expect(AddressPlan.describe(.public, .policy(.static)) == "public address")
    }

    @Test("backend mgmt refuses every address the kernel cannot give, with the one rule")
    func mgmtRefusals() throws {
        let text = ib(1, "address = \"C6:12:34:56:78:9A\"\n") + ib(2, "address = \"rotating\"\n") + "[advertising]\naddress = \"static\"\n[controller]\nbackend = \"mgmt\"\n"
        let error = try #require(thrown(text))
        #expect(error.items.count == 2)
        #expect(error.items.allSatisfy { $0.message.contains(AddressPlan.kernelRule) })
        #expect(error.items.map(\.key) == ["beacon.address", "advertising.address"])
    }

    private func thrown(_ text: String) -> ConfigDiagnostics? {
        do { _ = try BeaconConfiguration.parse(Array(text.utf8)); return nil } catch { return error }
    }

    @Test("review: a chosen address both repeated and refused under mgmt names the repetition first, as before the plan")
    func duplicateThenRefusal() throws {
        let a = "address = \"C6:12:34:56:78:9A\"\n"
        let error = try #require(thrown(ib(1, a) + ib(2, a) + "[controller]\nbackend = \"mgmt\"\n"))
        let second = error.items.filter { $0.location?.line == 10 }.map(\.message)
        #expect(second.count == 2 && second[0].contains("the same as in [[beacon]] #1") && second[1].contains(AddressPlan.kernelRule))
    }
}

@Suite("address kinds")
struct AddressKindTests {
    @Test("the raw values are the state file's documented address_kind values, each once, in the documented order")
    func documented() {
        let row = OutputSchema.fields(.state).first { $0.path == "beacons[].address_kind" }
        let documented = row.map { $0.meaning.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) } }
        #expect(documented == AddressKind.allCases.map(\.rawValue))
    }

    @Test("a policy's kind has the policy's name")
    func policies() {
        for p in AddressPolicy.allCases { #expect(AddressKind(p).rawValue == p.rawValue) }
    }
}
