// BTHome v2: the self-report's objects and frames, plain and encrypted, against known answers computed by other
// implementations (bthome.io's example, and one computed with pyca/cryptography's AESCCM and read back by bthome-ble
// 3.8.0, the parser Home Assistant 2024.3.3 runs); the config keys of format "bthome".
import AESCipher
import BeaconCore
import BluetoothHCI
import Testing

private func hex(_ s: String) -> [UInt8] {
    let d = Array(s.utf8)
    return stride(from: 0, to: d.count, by: 2).map { UInt8(String(decoding: d[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

private let seal: CCMSeal = { key, nonce, plaintext in try AESCCM.seal(plaintext, key: key, nonce: nonce) }

@Suite("BTHome")
struct BTHomeTests {
    @Test("the objects in ascending id order: packet id, count, problem, uptime as a 32-bit count, little-endian")
    func objects() {
        #expect(BTHomeReport(packetID: 7, beaconsOnAir: 3, problem: false, uptimeSeconds: 3600).objects == hex("0007" + "0903" + "2600" + "3e100e0000"))
        #expect(BTHomeReport(packetID: 255, beaconsOnAir: 0, problem: true, uptimeSeconds: 0x0102_0304).objects == hex("00ff" + "0900" + "2601" + "3e04030201"))
        // A count beyond what the object holds says the most it can.
        #expect(BTHomeReport(beaconsOnAir: 300).objects[3] == 255)
    }

    @Test("plain: 02 01 06, service data D2 FC, info 0x40, the objects: 19 bytes")
    func plain() {
        let objects = BTHomeReport(packetID: 1, beaconsOnAir: 2, problem: true, uptimeSeconds: 60).objects
        let data = BTHome.advertisingData(serviceData: BTHome.plainServiceData(objects))
        #expect(data.bytes == hex("020106" + "0f16" + "d2fc40" + "0001" + "0902" + "2601" + "3e3c000000"))
        #expect(data.bytes.count == 19)
    }

    @Test("the nonce: the address as written (not the wire's order), D2 FC, the info byte, the counter little-endian")
    func nonce() {
        let a = BluetoothAddress(parsing: "54:48:E6:8F:80:A5")!
        #expect(BTHome.nonce(address: a, counter: 0x0011_2233) == hex("5448e68f80a5" + "d2fc41" + "33221100"))
    }

    @Test("bthome.io's encryption example, as the page has it today (counter 1122867, bytes 33 22 11 00)")
    func bthomeIOExample() throws {
        let service = try BTHome.encryptedServiceData(hex("02ca0903bf13"), key: BindKey(hex: "231d39c1d7cc1ab1aee224cd096db932")!,
                                                      address: BluetoothAddress(parsing: "54:48:E6:8F:80:A5")!, counter: 1_122_867, seal: seal)
        #expect(service == hex("d2fc41e445f3c9962b332211006c7c4519"))
    }

    /// Computed for this test with pyca/cryptography's AESCCM (tag_length=4) in the integration venv, and decoded by
    /// bthome-ble 3.8.0 with the bindkey: bindkey_verified, packet id 7, count_1 3, count_2 3600, problem False.
    @Test("beacond's report encrypted: a known answer from pyca/cryptography that bthome-ble 3.8.0 verifies")
    func beacondKnownAnswer() throws {
        let objects = BTHomeReport(packetID: 7, beaconsOnAir: 3, problem: false, uptimeSeconds: 3600).objects
        let service = try BTHome.encryptedServiceData(objects, key: BindKey(hex: "0123456789abcdeffedcba9876543210")!,
                                                      address: BluetoothAddress(parsing: "C6:12:34:56:78:9A")!, counter: 1000, seal: seal)
        #expect(service == hex("d2fc41" + "650cba5c917b7ef13b4aca" + "e8030000" + "d3efe286"))
        #expect(BTHome.advertisingData(serviceData: service).bytes == hex("0201061716d2fc41650cba5c917b7ef13b4acae8030000d3efe286"))
    }

    @Test("a cipher that returns the wrong length is an error, not a frame")
    func badCipher() {
        #expect(throws: BTHome.SealFailure.self) {
            try BTHome.encryptedServiceData([1, 2], key: BindKey([UInt8](repeating: 0, count: 16))!,
                                            address: BluetoothAddress(parsing: "C6:12:34:56:78:9A")!, counter: 0, seal: { _, _, p in p })
        }
    }

    @Test("a bindkey is never printed: description, debug description, dump")
    func keyNeverPrinted() {
        let k = BindKey(hex: "0123456789abcdeffedcba9876543210")!
        var dumped = ""
        dump(k, to: &dumped)
        for text in ["\(k)", String(reflecting: k), dumped] { #expect(!text.contains("0123") && !text.contains("fedc"), "\(text)") }
    }
}

@Suite("BTHome config")
struct BTHomeConfigTests {
    private func parse(_ text: String) throws -> BeaconConfiguration { try BeaconConfiguration.parse(Array(text.utf8)) }
    private func errors(_ text: String) -> [String] {
        do {
            _ = try BeaconConfiguration.parse(Array(text.utf8))
            return []
        } catch {
            return error.items.map { "\($0.location.map { "\($0)" } ?? "-"): \($0.message)" }
        }
    }

    @Test("format bthome with a name and a bindkey file; its address is static, even where [advertising] says rotating")
    func parses() throws {
        let c = try parse("[advertising]\naddress = \"rotating\"\n[[beacon]]\nformat = \"bthome\"\nname = \"shop7\"\nbindkey_file = \"home.key\"\n")
        let b = try #require(c.beacons[0].beacon.bthome)
        #expect(b.bindkeyFile == "home.key" && b.encrypted && b.bindkey == nil)
        #expect(c.beacons[0].name == "shop7")
        #expect(c.addressPlan.wanted[0].setting == .policy(.static))
        #expect(c.addressPlan.ownCommandsNeeded != nil)  // backend auto: raw HCI
        #expect(try parse("[beacon]\nformat = \"bthome\"\n").beacon?.bthome?.encrypted == false)
        let chosen = try parse("[beacon]\nformat = \"bthome\"\naddress = \"C6:12:34:56:78:9A\"\n")
        #expect(chosen.addressPlan.wanted[0].setting == .chosen(BluetoothAddress(parsing: "C6:12:34:56:78:9A")!))
    }

    @Test("refused: an address that changes or is shared, backend mgmt, a second self-report, a bindkey on another format")
    func refused() {
        #expect(errors("[beacon]\nformat = \"bthome\"\naddress = \"rotating\"\n") == [
            "3:11: 'address' in [beacon] cannot be \"rotating\": Home Assistant keys a BTHome device on its address (and an encrypted frame's nonce holds it), so the self-report goes out from a fixed one; use \"static\" (its default) or a random static address"])
        #expect(errors("[beacon]\nformat = \"bthome\"\naddress = \"public\"\n").count == 1)
        #expect(errors("[beacon]\nformat = \"bthome\"\n[controller]\nbackend = \"mgmt\"\n") == [
            "1:1: [beacon] is a BTHome self-report, which cannot use backend = \"mgmt\": it goes out from a fixed address, and the kernel advertises from one it rotates; use backend = \"hci\" or \"auto\" (which then uses raw HCI commands)"])
        #expect(errors("[[beacon]]\nformat = \"bthome\"\n[[beacon]]\nformat = \"bthome\"\n") == [
            "3:1: [[beacon]] #2 is a second BTHome self-report, beside [[beacon]] #1 (line 1): beacond reports its health once"])
        #expect(errors("[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\nbindkey_file = \"k\"\n") == [
            "5:1: 'bindkey_file' in [beacon] belongs to format \"bthome\", not to this beacon's format \"ibeacon\""])
        #expect(errors("[beacon]\nformat = \"bthome\"\nbindkey_file = \"\"\n").count == 1)
    }
}
