// `scan --eid-keys` against a flood of fresh resolvable addresses (issue #53): each key's cipher is made once, not
// per AES call, and the key trials a second are capped, what is skipped counted, so that a flood costs about what a
// flood of static addresses does.
import AESCipher
import BeaconCore
import BluetoothHCI
import Testing

/// A counting factory of keyed ciphers: how many were made, how many blocks they encrypted.
private final class Counted: @unchecked Sendable {
    var made = 0, blocks = 0
    func cipher(_ key: IdentityKey) throws -> KeyedBlockCipher {
        made += 1
        let aes = try AES128(key: key.bytes)
        return { block in
            self.blocks += 1
            return try aes.encrypt(block)
        }
    }
}

private func keys(_ n: Int) -> [(name: String, key: IdentityKey)] {
    (0..<n).map { k in ("key \(k)", IdentityKey((0..<16).map { UInt8((k * 31 + $0 * 7) & 0xFF) })!) }
}

/// A resolvable address from three bytes of prand that no key here made (its hash is all zeros).
private func stranger(_ n: Int) -> BluetoothAddress {
    BluetoothAddress(parsing: String(format3: 0x40 | ((n >> 16) & 0x3F), (n >> 8) & 0xFF, n & 0xFF) + ":00:00:00")!
}

private extension String {
    init(format3 a: Int, _ b: Int, _ c: Int) {
        func h(_ x: Int) -> String { (x < 16 ? "0" : "") + String(x, radix: 16, uppercase: true) }
        self = "\(h(a)):\(h(b)):\(h(c))"
    }
}

@Suite("resolvable addresses against a keyring")
struct AddressResolverTests {
    @Test("bug: every AES call made a new cipher; each key's is made once, however many addresses are tried")
    func oneCipherPerKey() throws {
        let count = Counted()
        var r = AddressResolver(keys: keys(20), cipher: count.cipher, trialsPerSecond: 1_000_000)
        for n in 1...50 { _ = r.resolve(stranger(n), at: 0) }
        #expect(count.made == 20)
        #expect(count.blocks == 50 * 20 && r.keyTrials == 1000)
    }

    @Test("bug: every fresh address was tried against every key; past the cap a second they are skipped and counted")
    func capped() throws {
        let count = Counted()
        let ring = keys(100)
        var r = AddressResolver(keys: ring, cipher: count.cipher, trialsPerSecond: 1000)
        // 50 fresh addresses at once: 10 of them fit in a second's 1,000 trials, the other 40 are not tried.
        for n in 1...50 { #expect(r.resolve(stranger(n), at: 0) == nil) }
        #expect(count.blocks == 1000 && r.keyTrials == 1000)
        #expect(r.skippedAddresses == 40 && r.skippedKeyTrials == 4000)
        // One tried is remembered: no trials again. Half a second later, 500 trials more: 5 addresses.
        #expect(r.resolve(stranger(1), at: 0) == nil && count.blocks == 1000)
        for n in 11...20 { _ = r.resolve(stranger(n), at: 500_000) }
        #expect(count.blocks == 1500 && r.skippedAddresses == 45)
        // The beacon's own address, skipped in the flood, resolves when its turn comes (it goes on sending).
        let shop = try #require(try ResolvableAddress.make(irk: ring[99].key.bytes, random: [0x12, 0x34, 0x56],
                                                           cipher: { k, b in try AES128.encrypt(b, key: k) }))
        #expect(r.resolve(shop, at: 500_000) == nil)
        #expect(r.resolve(shop, at: 1_500_000) == "key 99")
        #expect(r.resolve(shop, at: 1_500_000) == "key 99")
    }

    @Test("a static or public address costs no trial")
    func notResolvable() throws {
        let count = Counted()
        var r = AddressResolver(keys: keys(10), cipher: count.cipher, trialsPerSecond: 1000)
        #expect(r.resolve(BluetoothAddress(parsing: "C6:12:34:56:78:9A")!, at: 0) == nil)
        #expect(count.blocks == 0 && r.keyTrials == 0 && r.skippedAddresses == 0)
    }
}
