// Eddystone-EID's computation with libgcrypt's AES-128, against published vectors, and the frame's bytes.
import AESCipher
import BeaconCore
import BluetoothHCI
import TestSupport
import Testing

private func hex(_ s: String) -> [UInt8] {
    let d = Array(s.utf8)
    return stride(from: 0, to: d.count, by: 2).map { UInt8(String(decoding: d[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

private func aes(_ key: [UInt8], _ block: [UInt8]) throws -> [UInt8] { try AES128.encrypt(block, key: key) }

@Suite("Eddystone-EID")
struct EddystoneEIDTests {
    @Test("RadiusNetworks/ephemeral_calc's vectors: key 0102…1516, K = 10, t = 0 and t = 2000")
    func radiusNetworks() throws {
        let key = hex("0102030405060708090A111213141516")
        #expect(try EddystoneEID.identifier(identityKey: key, exponent: 10, time: 0, cipher: aes) == hex("A9B76A71C5F89290"))
        #expect(try EddystoneEID.identifier(identityKey: key, exponent: 10, time: 2000, cipher: aes) == hex("4144413E45FEFA58"))
        // Within a period the EID stays: 2000 is in the period that starts at 1024.
        #expect(try EddystoneEID.identifier(identityKey: key, exponent: 10, time: 1024, cipher: aes) == hex("4144413E45FEFA58"))
    }

    @Test("the blocks: the temporary key's from the top 16 bits, the EID's from the period's start")
    func blocks() {
        #expect(EddystoneEID.temporaryKeyInput(0xABCD_1234) == [UInt8](repeating: 0, count: 11) + [0xFF, 0, 0, 0xAB, 0xCD])
        #expect(EddystoneEID.identifierInput(0xFFFF_FFFF, exponent: 15) == [UInt8](repeating: 0, count: 11) + [15, 0xFF, 0xFF, 0x80, 0x00])
        #expect(EddystoneEID.periodStart(2000, exponent: 0) == 2000)
    }

    @Test("the frame: 02 01 06 03 03 AA FE 0D 16 AA FE 30 <power> <EID>")
    func frame() {
        let f = EddystoneEID(txPowerAt0m: -20, eid: hex("A9B76A71C5F89290"))!
        #expect(f.advertisingData.bytes == hex("0201060303AAFE0D16AAFE30EC") + hex("A9B76A71C5F89290"))
        #expect(EddystoneEID(txPowerAt0m: 0, eid: [1, 2]) == nil)
    }
}

@Suite("Eddystone-EID resolver")
struct EIDResolverTests {
    private let key = IdentityKey(hex("0102030405060708090A111213141516"))!

    @Test("an EID of the window resolves to its key and period; outside the window or another key's does not; tables are made at boundaries only")
    func resolve() throws {
        let other = IdentityKey(hex("00000000000000000000000000000001"))!
        var r = EIDResolver(keys: [EIDKey(name: "shop 7", exponent: 10, key: key), EIDKey(name: "other", exponent: 4, key: other)],
                            window: 2, cipher: aes)
        let now: UInt32 = 10 * 1024 + 5
        func at(_ t: UInt32) throws -> [UInt8] { try EddystoneEID.identifier(identityKey: key.bytes, exponent: 10, time: t, cipher: aes) }
        let current = r.resolve(try at(now), at: now)
        #expect(current == EIDResolver.Match(index: 0, name: "shop 7", timeCounter: 10 * 1024))
        let slow = r.resolve(try at(now - 2 * 1024), at: now)  // a slow clock, 2 periods back
        let fast = r.resolve(try at(now + 2 * 1024), at: now)
        let outside = r.resolve(try at(now + 3 * 1024), at: now)
        let zero = r.resolve(hex("A9B76A71C5F89290"), at: now)  // t = 0
        let slowCounter = slow?.timeCounter ?? 0, fastCounter = fast?.timeCounter ?? 0
        #expect(slowCounter == 8 * 1024)
        #expect(fastCounter == 12 * 1024)
        #expect(outside == nil && zero == nil)
        let rebuilds = r.rebuilds
        _ = r.resolve([0, 0, 0, 0, 0, 0, 0, 0], at: now + 1)
        #expect(r.rebuilds == rebuilds)  // the same periods: no AES
        _ = r.resolve([0, 0, 0, 0, 0, 0, 0, 0], at: 10 * 1024 + 16)  // "other" (K = 4) entered its next period
        #expect(r.rebuilds == rebuilds + 1)
        // The temporary key rolls over between 65535 and 65536, and the counter's top.
        for t: UInt32 in [65535, 65536, UInt32.max] {
            var top = EIDResolver(keys: [EIDKey(name: "k", exponent: 0, key: key)], window: 0, cipher: aes)
            let e = try EddystoneEID.identifier(identityKey: key.bytes, exponent: 0, time: t, cipher: aes)
            let counter = top.resolve(e, at: t)?.timeCounter ?? 0
            #expect(counter == t)
        }
    }

    @Test("the keyring file: names, keys, exponents; every mistake named at file:line:col")
    func keyring() throws {
        let keys = try EIDKeyring.parse(Array("""
            [[beacon]]
            name = "shop 7"
            identity_key = "0102030405060708090A111213141516"

            [[beacon]]
            name = "shop 8"
            identity_key_file = "8.key"
            rotation_exponent = 4
            """.utf8))
        #expect(keys.map(\.name) == ["shop 7", "shop 8"] && keys[0].key == key && keys[0].exponent == 10 && keys[1].keyFile == "8.key")
        #expect("\(keys[0])".contains("0102") == false)  // the key is never printed, not even by reflection
        let e = thrown(ConfigDiagnostics.self) {
            _ = try EIDKeyring.parse(Array("[[beacon]]\nname = \"a\"\n\n[[beacon]]\nname = \"a\"\nidentity_key = \"xyz\"\nkey = 1\n".utf8))
        }?.items.map { "\($0.location!): \($0.message)" }
        #expect(e == ["1:1: missing key in [[beacon]] #1: give identity_key or identity_key_file",
                      "4:1: [[beacon]] #2 has the name \"a\" of [[beacon]] #1: each key needs its own name",
                      "6:16: 'identity_key' in [[beacon]] #2 must be 32 hex digits (128 bits)",
                      "7:1: unknown key 'key' in [[beacon]] #2 (known keys: name, identity_key, identity_key_file, rotation_exponent)"])
    }
}
