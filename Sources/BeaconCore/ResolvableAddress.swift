// Resolvable private addresses (Core Vol 6 Part B §1.3.2.2, Vol 3 Part H §2.2.2): prand (24 bits, the top two 01)
// and hash = ah(IRK, prand), the low 24 bits of AES-128 with the IRK as key over 13 zero bytes and prand. Only a
// holder of the IRK tells that an address is the beacon's; to anyone else each is a new device. Made on the host (no
// Raspberry Pi chip has LL Privacy). Pure: AES comes in as a BlockCipher, random bytes from the caller.
import BluetoothHCI

public enum ResolvableAddress {
    /// ah(IRK, prand): the three bytes of the hash, most significant first. `irk` is the key as its 32 hex digits
    /// read (most significant byte first: how Home Assistant, bluetooth-data-tools and ESPHome take it), `prand` the
    /// three bytes most significant first.
    public static func hash(irk: [UInt8], prand: [UInt8], cipher: BlockCipher) throws -> [UInt8] {
        precondition(irk.count == 16, "an IRK is 16 bytes")
        return try hash(prand: prand) { try cipher(irk, $0) }
    }

    /// ah with the IRK's cipher made already.
    public static func hash(prand: [UInt8], encrypt: KeyedBlockCipher) throws -> [UInt8] {
        precondition(prand.count == 3, "prand is 3 bytes")
        return Array(try encrypt([UInt8](repeating: 0, count: 13) + prand).suffix(3))
    }

    /// A new address from three random bytes: prand is them with its top two bits 01 (and its 22 random bits not all
    /// 0 nor all 1: nil then, draw again).
    public static func make(irk: [UInt8], random: [UInt8], cipher: BlockCipher) throws -> BluetoothAddress? {
        guard random.count >= 3 else { return nil }
        var prand = Array(random.prefix(3))
        prand[0] = (prand[0] & 0x3F) | 0x40
        let rest = (UInt32(prand[0] & 0x3F) << 16) | (UInt32(prand[1]) << 8) | UInt32(prand[2])
        guard rest != 0, rest != 0x3F_FFFF else { return nil }
        let h = try hash(irk: irk, prand: prand, cipher: cipher)
        return BluetoothAddress(wire: (prand + h).reversed())
    }

    /// Whether `address` is a resolvable private address made with `irk`.
    public static func resolves(_ address: BluetoothAddress, irk: [UInt8], cipher: BlockCipher) -> Bool {
        guard address.kind == .resolvable else { return false }
        let msb = Array(address.wire.reversed())
        guard let h = try? hash(irk: irk, prand: Array(msb[0..<3]), cipher: cipher) else { return false }
        return h == Array(msb[3..<6])
    }
}

/// AES-128 under one key already set: one block in, one out (libgcrypt's handle, keyed once).
public typealias KeyedBlockCipher = (_ block: [UInt8]) throws -> [UInt8]

/// Which key of a keyring a resolvable private address was made with (`scan --eid-keys`: the same keys, by name).
/// Each address is tried once against every key and remembered: a beacon keeps its address for minutes, and a
/// stranger's rotating ones are remembered as no one's. Each key's cipher is made once (issue #53: a new handle and
/// key schedule per AES call cost 3 ms per fresh address with 5,000 keys), and the key trials a second are capped:
/// a fresh address past the cap is not tried now, only counted, and tried when heard again with trials to spare.
public struct AddressResolver {
    private let keys: [(name: String, key: IdentityKey)]
    /// Makes a key's cipher; each is made when its key is first tried and kept (at most `cipherLimit` at once: a
    /// libgcrypt handle is about 1.5 KiB, and a keyring may hold 50,000 keys).
    private let makeCipher: (IdentityKey) throws -> KeyedBlockCipher
    private var ciphers: [Int: KeyedBlockCipher] = [:]
    public static let cipherLimit = 4096
    private var known: [BluetoothAddress: String?] = [:]
    /// How many addresses are remembered before the memory starts over.
    public static let limit = 4096
    /// The key trials (one AES block each) a second at most: about 5 % of a Raspberry Pi 4's core, which has no AES
    /// instructions; 10 fresh addresses a second with 5,000 keys, 1 with 50,000.
    public static let defaultTrialsPerSecond = 50_000
    private let trialsPerSecond: Int
    /// Trials that may be made now: refilled at `trialsPerSecond`, up to a second's worth (or one address's).
    private var budget: Int
    private var refilledAt: UInt64 = 0
    /// Key trials made, and fresh addresses (each time one was heard) left untried past the cap with their trials.
    public private(set) var keyTrials = 0
    public private(set) var skippedAddresses = 0
    public private(set) var skippedKeyTrials = 0

    /// `cipher` makes a key's cipher, once per key (while at most `cipherLimit` are kept).
    public init(keys: [(name: String, key: IdentityKey)], cipher: @escaping (IdentityKey) throws -> KeyedBlockCipher,
                trialsPerSecond: Int = Self.defaultTrialsPerSecond) {
        self.keys = keys
        makeCipher = cipher
        self.trialsPerSecond = trialsPerSecond
        budget = max(trialsPerSecond, keys.count)
    }

    /// Key `k`'s cipher, made now if it was not kept.
    private mutating func cipher(_ k: Int) -> KeyedBlockCipher? {
        if let c = ciphers[k] { return c }
        guard let c = try? makeCipher(keys[k].key) else { return nil }
        if ciphers.count >= Self.cipherLimit { ciphers.removeAll() }
        ciphers[k] = c
        return c
    }

    /// The name of the key `address` resolves under; nil for another address (a public one, a static one, an
    /// address no key of the keyring made, or one not tried yet). `now`: monotonic microseconds.
    public mutating func resolve(_ address: BluetoothAddress, at now: UInt64) -> String? {
        guard address.kind == .resolvable, !keys.isEmpty else { return nil }
        if let k = known[address] { return k }
        let capacity = max(trialsPerSecond, keys.count)
        if now > refilledAt {
            let earned = (now - refilledAt) * UInt64(trialsPerSecond) / 1_000_000
            if earned > 0 {
                budget = Int(min(UInt64(capacity), UInt64(budget) + earned))
                refilledAt = now
            }
        }
        guard budget >= keys.count else {
            skippedAddresses += 1
            skippedKeyTrials += keys.count
            return nil
        }
        if known.count >= Self.limit { known.removeAll() }
        let msb = Array(address.wire.reversed())
        var name: String?
        for k in keys.indices {
            budget -= 1
            keyTrials += 1
            guard let encrypt = cipher(k), let h = try? ResolvableAddress.hash(prand: Array(msb[0..<3]), encrypt: encrypt) else { continue }
            if h == Array(msb[3..<6]) {
                name = keys[k].name
                break
            }
        }
        known[address] = name
        return name
    }
}

/// A resolving key in the forms the gateways that resolve the addresses take (`beacond irk BEACON`).
public struct ResolvingKeyForms: Sendable, Hashable {
    /// The 32 hex digits as stored: the AES key as it stands (Home Assistant's Private BLE Device,
    /// bluetooth-data-tools, ESPHome's `irk:`).
    public let hex: String
    /// Byte-reversed, least significant byte first: Theengs Gateway's `--identities` reverses what it is given.
    public let reversed: String
    /// Base64 of the reversed bytes: Apple's keychain form, which Home Assistant also takes (it reverses base64).
    public let base64: String
    /// An identity address for Theengs Gateway to publish the beacon under (its `--identities ADDRESS IRK` pairs the
    /// two; the address plays no part in resolving): a random static address made from the key with AES, so the same
    /// key always names the same device and the address tells nothing of the key.
    public let identityAddress: BluetoothAddress

    public init(irk: [UInt8], cipher: BlockCipher) throws {
        precondition(irk.count == 16, "an IRK is 16 bytes")
        hex = hexString(irk)
        reversed = hexString(irk.reversed())
        base64 = Base64.encode(Array(irk.reversed()))
        // AES(IRK, "beacond identity"): 16 bytes no one can turn back into the key; the first six, top bits 11.
        var d = try cipher(irk, Array("beacond identity".utf8))
        var address: BluetoothAddress?
        while address == nil {
            address = BluetoothAddress.makeStatic(from: Array(d.prefix(6)))
            d = try cipher(irk, d)
        }
        identityAddress = address!
    }
}

/// RFC 4648 base64 with padding, for the one key form that needs it.
public enum Base64 {
    public static func encode(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let v = (UInt32(bytes[i]) << 16) | (n > 1 ? UInt32(bytes[i + 1]) << 8 : 0) | (n > 2 ? UInt32(bytes[i + 2]) : 0)
            out.append(table[Int(v >> 18 & 63)])
            out.append(table[Int(v >> 12 & 63)])
            out.append(n > 1 ? table[Int(v >> 6 & 63)] : UInt8(ascii: "="))
            out.append(n > 2 ? table[Int(v & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
