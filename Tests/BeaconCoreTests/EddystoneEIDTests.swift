// Eddystone-EID's computation with libgcrypt's AES-128, against published vectors, and the frame's bytes.
import AESCipher
import BeaconCore
import BluetoothHCI
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
