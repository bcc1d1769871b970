// AES-128 from libgcrypt, one 16-byte block at a time (ECB on a single block is the raw block cipher, which is all
// Eddystone-EID uses). Never written by hand: the cipher is the library's.
import CGcrypt

public final class AES128 {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    private var handle: gcry_cipher_hd_t?

    /// libgcrypt's one-time initialization, done on first use.
    private static let initialized: Bool = beacond_gcrypt_initialize() == 0
    /// libgcrypt initialized (its one-time setup, done on first use by any of its users here).
    static var libraryReady: Bool { initialized }

    /// A cipher keyed with `key` (16 bytes).
    public init(key: [UInt8]) throws(Failure) {
        guard key.count == 16 else { throw Failure(description: "an AES-128 key is 16 bytes, not \(key.count)") }
        guard Self.initialized else { throw Failure(description: "libgcrypt is older than 1.8 or could not be initialized") }
        var h: gcry_cipher_hd_t?
        let opened = gcry_cipher_open(&h, Int32(GCRY_CIPHER_AES.rawValue), Int32(GCRY_CIPHER_MODE_ECB.rawValue), 0)
        guard opened == 0, let h else { throw Failure(description: "gcry_cipher_open(AES128, ECB) failed: \(Self.describe(opened))") }
        let set = key.withUnsafeBytes { gcry_cipher_setkey(h, $0.baseAddress, 16) }
        guard set == 0 else {
            gcry_cipher_close(h)
            throw Failure(description: "gcry_cipher_setkey failed: \(Self.describe(set))")
        }
        handle = h
    }

    deinit {
        // Closing wipes the key schedule (libgcrypt clears a context before freeing it).
        if let handle { gcry_cipher_close(handle) }
    }

    /// The encryption of one 16-byte block.
    public func encrypt(_ block: [UInt8]) throws(Failure) -> [UInt8] {
        guard block.count == 16 else { throw Failure(description: "an AES block is 16 bytes, not \(block.count)") }
        var out = [UInt8](repeating: 0, count: 16)
        let e = out.withUnsafeMutableBytes { o in block.withUnsafeBytes { i in gcry_cipher_encrypt(handle, o.baseAddress, 16, i.baseAddress, 16) } }
        guard e == 0 else { throw Failure(description: "gcry_cipher_encrypt failed: \(Self.describe(e))") }
        return out
    }

    /// One block with a key used once (the cipher is made and dropped).
    public static func encrypt(_ block: [UInt8], key: [UInt8]) throws(Failure) -> [UInt8] {
        try AES128(key: key).encrypt(block)
    }

    /// Nil when the library encrypts FIPS-197 Appendix C.1's example correctly; otherwise what went wrong.
    public static var selfTestFailure: String? {
        let key: [UInt8] = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F]
        let plain: [UInt8] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF]
        let cipher: [UInt8] = [0x69, 0xC4, 0xE0, 0xD8, 0x6A, 0x7B, 0x04, 0x30, 0xD8, 0xCD, 0xB7, 0x80, 0x70, 0xB4, 0xC5, 0x5A]
        do {
            return try encrypt(plain, key: key) == cipher ? nil : "libgcrypt's AES-128 does not give FIPS-197's result"
        } catch {
            return error.description
        }
    }

    private static func describe(_ e: gcry_error_t) -> String {
        guard let s = gcry_strerror(e) else { return "error \(e)" }
        return String(cString: s)
    }
}
