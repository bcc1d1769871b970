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
