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
        var r = try AddressResolver(keys: [("other", other), ("shop", irk)], cipher: { k in { b in try cipher(k.bytes, b) } })
        #expect(r.resolve(BluetoothAddress(parsing: "70:81:94:0D:FB:AA")!, at: 0) == "shop")
        #expect(r.resolve(BluetoothAddress(parsing: "70:81:94:0D:FB:AB")!, at: 0) == nil)
        #expect(r.resolve(BluetoothAddress(parsing: "C6:12:34:56:78:9A")!, at: 0) == nil)  // static: not resolvable at all
        let maybe = try ResolvableAddress.make(irk: other.bytes, random: [0x12, 0x34, 0x56], cipher: cipher)
        let made = try #require(maybe)
        #expect(r.resolve(made, at: 0) == "other")
    }
}
