// SHA-256 from libgcrypt, for the config digest `beacond status` and `beacond reload` compare. Never written by hand.
import CGcrypt

public enum SHA256 {
    /// The digest of `bytes` as 64 lowercase hex digits (as sha256sum prints it).
    public static func hex(_ bytes: [UInt8]) -> String {
        _ = AES128.libraryReady
        var out = [UInt8](repeating: 0, count: 32)
        out.withUnsafeMutableBytes { o in
            bytes.withUnsafeBytes { i in gcry_md_hash_buffer(Int32(GCRY_MD_SHA256.rawValue), o.baseAddress, i.baseAddress, bytes.count) }
        }
        let digits = Array("0123456789abcdef".utf8)
        var s: [UInt8] = []
        s.reserveCapacity(64)
        for b in out { s.append(digits[Int(b >> 4)]); s.append(digits[Int(b & 15)]) }
        return String(decoding: s, as: UTF8.self)
    }
}
