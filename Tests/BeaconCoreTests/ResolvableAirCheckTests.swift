// A resolvable beacon on the air: `scan --expect` hears it only from addresses that resolve under its key (the same
// frame from anywhere else is a copy), and `scan --eid-keys` names the key an address resolves under. Addresses are
// made and resolved with libgcrypt's AES, the spec's sample key and prand as the known answer.
import AESCipher
@testable import BeaconCore
import BluetoothHCI
import Testing

private let cipher: BlockCipher = { key, block in try AES128.encrypt(block, key: key) }
private let irk = IdentityKey(hex: "ec0234a357c8ad05341010a60a397d9b")!
private let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"

private func report(_ data: AdvertisingData, from address: String, type: UInt8 = 1) -> AdvertisingReport {
    AdvertisingReport(eventType: 3, isExtended: false, addressType: type, address: BluetoothAddress(parsing: address)!.wire, rssi: -60, data: data.bytes)
}

@Suite("resolvable addresses heard")
struct ResolvableAirCheckTests {
    func check() throws -> AirCheck {
        var c = try BeaconConfiguration.parse(Array("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\naddress = \"resolvable\"\nresolving_key_file = \"shop.irk\"\n".utf8))
        c.setKey(irk, for: c.keyFiles[0])
        return AirCheck(ExpectedBeacon.all(in: c, path: "/f.conf"), cipher: cipher)
    }

    @Test("HEARD from an address of its key; the same frame from another address is a copy, named")
    func copy() throws {
        let plain = try BeaconConfiguration.parse(Array("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n".utf8))
        let frame = try #require(plain.beacon).advertisingData
        var real = try check()
        #expect(real.entries[0].expected.resolvingKeyFile == "shop.irk")
        let own = report(frame, from: "70:81:94:0D:FB:AA")  // the spec's sample: prand 70:81:94 under this key
        real.record(BeaconFrame(advertisingData: own.data), own, at: 1)
        #expect(real.succeeded && real.results[0].verdict == .heard)
        for (address, type, name) in [("70:81:94:0D:FB:AB", UInt8(1), "random"), ("C6:12:34:56:78:9A", 1, "random"), ("70:81:94:0D:FB:AA", 0, "public")] {
            var copied = try check()
            let r = report(frame, from: address, type: type)
            copied.record(BeaconFrame(advertisingData: r.data), r, at: 1)
            #expect(copied.results[0].verdict == .mismatch)
            #expect(copied.results[0].mismatches.first?.differences == ["from \(address) (\(name)), which does not resolve under the beacon's resolving key shop.irk: a copy of its frame from another sender"])
        }
        #expect(AirCheck.jsonLine(real.results[0]).contains("\"resolving_key_file\":\"shop.irk\""))
    }

    @Test("the keyring's resolver names the key an address resolves under, and no key for any other address")
    func resolver() throws {
        let other = try #require(IdentityKey(hex: "00112233445566778899aabbccddeeff"))
        var r = AddressResolver(keys: [("other", other), ("shop", irk)], cipher: { k in { b in try cipher(k.bytes, b) } })
        #expect(r.resolve(BluetoothAddress(parsing: "70:81:94:0D:FB:AA")!, at: 0) == "shop")
        #expect(r.resolve(BluetoothAddress(parsing: "70:81:94:0D:FB:AB")!, at: 0) == nil)
        #expect(r.resolve(BluetoothAddress(parsing: "C6:12:34:56:78:9A")!, at: 0) == nil)  // static: not resolvable at all
        let maybe = try ResolvableAddress.make(irk: other.bytes, random: [0x12, 0x34, 0x56], cipher: cipher)
        let made = try #require(maybe)
        #expect(r.resolve(made, at: 0) == "other")
    }
}

@Suite("a resolvable address heard too long")
struct ResolvableRecordingTests {
    func check(rotation: Int = 900) throws -> AirCheck {
        var c = try BeaconConfiguration.parse(Array("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\naddress = \"resolvable\"\nresolving_key_file = \"shop.irk\"\n[advertising]\naddress_rotation_s = \(rotation)\n".utf8))
        c.setKey(irk, for: c.keyFiles[0])
        return AirCheck(ExpectedBeacon.all(in: c, path: "/f.conf"), cipher: cipher)
    }

    /// A recorded address and frame replayed were HEARD for ever (issue #53): the beacon takes a new address every
    /// address_rotation_s, so one heard past that (and a slack) is a recording.
    @Test("bug: a resolvable address heard for longer than address_rotation_s plus slack was HEARD; it is a recording now")
    func heardTooLong() throws {
        let frame = try #require(try BeaconConfiguration.parse(Array("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n".utf8)).beacon).advertisingData
        let own = report(frame, from: "70:81:94:0D:FB:AA")
        var c = try check()
        let second: UInt64 = 1_000_000
        c.record(BeaconFrame(advertisingData: own.data), own, at: 1_000 * second)
        c.record(BeaconFrame(advertisingData: own.data), own, at: (1_000 + 900 + AirCheck.rotationSlack) * second)
        #expect(c.results[0].verdict == .heard)  // within the rotation and its slack
        c.record(BeaconFrame(advertisingData: own.data), own, at: (1_000 + 901 + AirCheck.rotationSlack) * second)
        c.record(BeaconFrame(advertisingData: own.data), own, at: (1_000 + 902 + AirCheck.rotationSlack) * second)  // one mismatch still
        #expect(c.results[0].mismatches.map(\.differences) == [[
            "from 70:81:94:0D:FB:AA, a resolvable address heard for more than 960 s: the beacon takes a new one every 900 s (address_rotation_s), so this is a recording replayed, or a beacon that no longer rotates; --expect takes an address for address_rotation_s + 60 s"]])
        // An earlier check's sighting counts: the address heard again by the next check, past the rotation.
        var next = try check()
        next.firstHeard = c.firstHeard
        next.record(BeaconFrame(advertisingData: own.data), own, at: 2_000 * second)
        #expect(next.results[0].verdict == .mismatch && !next.succeeded)
        // A new address of the key, as the beacon makes every rotation, is heard.
        let fresh = try #require(try ResolvableAddress.make(irk: irk.bytes, random: [0x21, 0x43, 0x65], cipher: cipher))
        let r = report(frame, from: fresh.description)
        var again = try check()
        again.firstHeard = c.firstHeard
        again.record(BeaconFrame(advertisingData: r.data), r, at: 2_000 * second)
        #expect(again.results[0].verdict == .heard)
    }
}
