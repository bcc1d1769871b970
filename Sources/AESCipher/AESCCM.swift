// AES-128 in CCM mode (NIST SP 800-38C) from libgcrypt's GCRY_CIPHER_MODE_CCM, for BTHome's encrypted frames.
// Never written by hand: the mode is the library's.
import CGcrypt

public enum AESCCM {
    /// The encryption of `plaintext` under `key` (16 bytes) and `nonce` (7 to 13 bytes), with `aad` authenticated but
    /// not encrypted: the ciphertext (as long as the plaintext) followed by a `tagLength`-byte MIC.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = [], tagLength: Int = 4) throws(AES128.Failure) -> [UInt8] {
        guard key.count == 16 else { throw AES128.Failure(description: "an AES-128 key is 16 bytes, not \(key.count)") }
        guard (7...13).contains(nonce.count) else { throw AES128.Failure(description: "a CCM nonce is 7 to 13 bytes, not \(nonce.count)") }
        guard [4, 6, 8, 10, 12, 14, 16].contains(tagLength) else { throw AES128.Failure(description: "a CCM tag is 4 to 16 bytes (even), not \(tagLength)") }
        guard AES128.libraryReady else { throw AES128.Failure(description: "libgcrypt is older than 1.8 or could not be initialized") }
        var h: gcry_cipher_hd_t?
        let opened = gcry_cipher_open(&h, Int32(GCRY_CIPHER_AES.rawValue), Int32(GCRY_CIPHER_MODE_CCM.rawValue), 0)
        guard opened == 0, let h else { throw AES128.Failure(description: "gcry_cipher_open(AES128, CCM) failed: \(describe(opened))") }
        // Closing wipes the key schedule (libgcrypt clears a context before freeing it).
        defer { gcry_cipher_close(h) }
        func check(_ e: gcry_error_t, _ call: String) throws(AES128.Failure) {
            guard e == 0 else { throw AES128.Failure(description: "\(call) failed: \(describe(e))") }
        }
        try check(key.withUnsafeBytes { gcry_cipher_setkey(h, $0.baseAddress, 16) }, "gcry_cipher_setkey")
        try check(nonce.withUnsafeBytes { gcry_cipher_setiv(h, $0.baseAddress, nonce.count) }, "gcry_cipher_setiv")
        // CCM must know every length before the first byte (SP 800-38C's B0 block holds them).
        var lengths: [UInt64] = [UInt64(plaintext.count), UInt64(aad.count), UInt64(tagLength)]
        try check(lengths.withUnsafeMutableBytes { gcry_cipher_ctl(h, Int32(GCRYCTL_SET_CCM_LENGTHS.rawValue), $0.baseAddress, $0.count) },
                  "gcry_cipher_ctl(GCRYCTL_SET_CCM_LENGTHS)")
        if !aad.isEmpty { try check(aad.withUnsafeBytes { gcry_cipher_authenticate(h, $0.baseAddress, aad.count) }, "gcry_cipher_authenticate") }
        var out = [UInt8](repeating: 0, count: plaintext.count)
        if !plaintext.isEmpty {
            try check(out.withUnsafeMutableBytes { o in plaintext.withUnsafeBytes { i in gcry_cipher_encrypt(h, o.baseAddress, o.count, i.baseAddress, i.count) } },
                      "gcry_cipher_encrypt")
        }
        var tag = [UInt8](repeating: 0, count: tagLength)
        try check(tag.withUnsafeMutableBytes { gcry_cipher_gettag(h, $0.baseAddress, tagLength) }, "gcry_cipher_gettag")
        return out + tag
    }

    /// Nil when the library encrypts bthome.io's example (BTHome v2's encryption page) correctly; otherwise what
    /// went wrong.
    public static var selfTestFailure: String? {
        let key: [UInt8] = [0x23, 0x1D, 0x39, 0xC1, 0xD7, 0xCC, 0x1A, 0xB1, 0xAE, 0xE2, 0x24, 0xCD, 0x09, 0x6D, 0xB9, 0x32]
        let nonce: [UInt8] = [0x54, 0x48, 0xE6, 0x8F, 0x80, 0xA5, 0xD2, 0xFC, 0x41, 0x33, 0x22, 0x11, 0x00]
        let sealed: [UInt8] = [0xE4, 0x45, 0xF3, 0xC9, 0x96, 0x2B, 0x6C, 0x7C, 0x45, 0x19]
        do {
            return try seal([0x02, 0xCA, 0x09, 0x03, 0xBF, 0x13], key: key, nonce: nonce) == sealed ? nil : "libgcrypt's AES-CCM does not give bthome.io's result"
        } catch {
            return error.description
        }
    }

    private static func describe(_ e: gcry_error_t) -> String {
        guard let s = gcry_strerror(e) else { return "error \(e)" }
        return String(cString: s)
    }
}
