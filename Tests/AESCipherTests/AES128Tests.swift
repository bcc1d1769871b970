// libgcrypt's AES-128 through the wrapper, against FIPS-197's published example (Appendix C.1) and NIST SP 800-38A's
// ECB-AES128 vectors (F.1.1), so a wrong binding (key or block order, length) cannot pass.
import AESCipher
import Testing

private func hex(_ s: String) -> [UInt8] {
    let d = Array(s.utf8)
    return stride(from: 0, to: d.count, by: 2).map { UInt8(String(decoding: d[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

@Suite("AES-128 from libgcrypt")
struct AES128Tests {
    @Test("FIPS-197 C.1 and SP 800-38A F.1.1")
    func vectors() throws {
        #expect(try AES128.encrypt(hex("00112233445566778899aabbccddeeff"), key: hex("000102030405060708090a0b0c0d0e0f"))
                == hex("69c4e0d86a7b0430d8cdb78070b4c55a"))
        let c = try AES128(key: hex("2b7e151628aed2a6abf7158809cf4f3c"))
        #expect(try c.encrypt(hex("6bc1bee22e409f96e93d7e117393172a")) == hex("3ad77bb40d7a3660a89ecaf32466ef97"))
        #expect(try c.encrypt(hex("ae2d8a571e03ac9c9eb76fac45af8e51")) == hex("f5d3d58503b9699de785895a96fdbaaf"))
    }

    @Test("wrong lengths are errors, not crashes")
    func lengths() {
        #expect(throws: AES128.Failure.self) { try AES128(key: [1, 2, 3]) }
        #expect(throws: AES128.Failure.self) { try AES128.encrypt([0], key: [UInt8](repeating: 0, count: 16)) }
    }
}

/// AES-CCM from libgcrypt, against NIST SP 800-38C's Example 1 (a 4-byte tag with associated data) and bthome.io's
/// published encryption example in both of its versions (the counter's bytes before and after the page's 2025 fix),
/// each recomputed with pyca/cryptography's AESCCM for the research notes.
@Suite("AES-CCM from libgcrypt")
struct AESCCMTests {
    @Test("SP 800-38C Example 1: Tlen 32, Nlen 56, Alen 64, Plen 32")
    func sp80038c() throws {
        #expect(try AESCCM.seal(hex("20212223"), key: hex("404142434445464748494a4b4c4d4e4f"), nonce: hex("10111213141516"),
                                aad: hex("0001020304050607"), tagLength: 4) == hex("7162015b4dac255d"))
    }

    @Test("bthome.io's example: 25.06 °C and 50.55 % under its bindkey, MAC 54:48:E6:8F:80:A5, counter 1122867")
    func bthome() throws {
        let key = hex("231d39c1d7cc1ab1aee224cd096db932")
        // Today's page: the counter 0x00112233 little-endian (33 22 11 00) in the nonce.
        #expect(try AESCCM.seal(hex("02ca0903bf13"), key: key, nonce: hex("5448e68f80a5d2fc4133221100")) == hex("e445f3c9962b" + "6c7c4519"))
        // The page before December 2025 (and bthome-ble 3.8.0's test_bindkey_correct): counter bytes 00 11 22 33.
        #expect(try AESCCM.seal(hex("02ca0903bf13"), key: key, nonce: hex("5448e68f80a5d2fc4100112233")) == hex("a47266c95f73" + "78237214"))
    }

    @Test("wrong lengths are errors, not crashes")
    func lengths() {
        let key = [UInt8](repeating: 0, count: 16)
        #expect(throws: AES128.Failure.self) { try AESCCM.seal([1], key: [1, 2, 3], nonce: [UInt8](repeating: 0, count: 13)) }
        #expect(throws: AES128.Failure.self) { try AESCCM.seal([1], key: key, nonce: [UInt8](repeating: 0, count: 14)) }
        #expect(throws: AES128.Failure.self) { try AESCCM.seal([1], key: key, nonce: [UInt8](repeating: 0, count: 13), tagLength: 3) }
    }
}
