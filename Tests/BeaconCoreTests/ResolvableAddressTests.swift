// Resolvable private addresses against the Core specification's sample data (Vol 3 Part H Appendix D.7: ah with
// IRK ec0234a357c8ad05341010a60a397d9b and prand 708194 gives 0dfbaa) on libgcrypt's AES, so that a key or byte order
// mistake cannot pass; and what resolves and what does not.
import AESCipher
import BeaconCore
import BluetoothHCI
import Testing

private func hex(_ s: String) -> [UInt8] {
    let d = Array(s.utf8)
    return stride(from: 0, to: d.count, by: 2).map { UInt8(String(decoding: d[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

private let aes: BlockCipher = { key, block in try AES128.encrypt(block, key: key) }
private let irk = hex("ec0234a357c8ad05341010a60a397d9b")

@Suite("resolvable private addresses")
struct ResolvableAddressTests {
    @Test("ah() on the specification's sample: prand 70:81:94 gives the address 70:81:94:0D:FB:AA")
    func sample() throws {
        #expect(try ResolvableAddress.hash(irk: irk, prand: [0x70, 0x81, 0x94], cipher: aes) == [0x0D, 0xFB, 0xAA])
        let a = try #require(try ResolvableAddress.make(irk: irk, random: [0x70, 0x81, 0x94], cipher: aes))
        #expect(a.description == "70:81:94:0D:FB:AA" && a.kind == .resolvable)
        #expect(ResolvableAddress.resolves(a, irk: irk, cipher: aes))
    }

    @Test("prand gets its top bits 01 whatever the random bytes; 22 random bits all 0 or all 1 are drawn again")
    func prand() throws {
        for first: UInt8 in [0x00, 0x3F, 0x80, 0xC0, 0xFF] {
            let a = try ResolvableAddress.make(irk: irk, random: [first, 0x12, 0x34], cipher: aes)
            #expect(a?.kind == .resolvable && a.map { ResolvableAddress.resolves($0, irk: irk, cipher: aes) } == true)
        }
        #expect(try ResolvableAddress.make(irk: irk, random: [0x00, 0x00, 0x00], cipher: aes) == nil)
        #expect(try ResolvableAddress.make(irk: irk, random: [0xFF, 0xFF, 0xFF], cipher: aes) == nil)
    }

    @Test("another key, another kind of address, a changed hash: none resolves")
    func others() throws {
        let a = try #require(try ResolvableAddress.make(irk: irk, random: [0x70, 0x81, 0x94], cipher: aes))
        var other = irk
        other[15] ^= 1
        #expect(!ResolvableAddress.resolves(a, irk: other, cipher: aes))
        #expect(!ResolvableAddress.resolves(BluetoothAddress(parsing: "70:81:94:0D:FB:AB")!, irk: irk, cipher: aes))
        // The same six bytes as a static or non-resolvable address: its top bits say it is no RPA.
        #expect(!ResolvableAddress.resolves(BluetoothAddress(parsing: "F0:81:94:0D:FB:AA")!, irk: irk, cipher: aes))
        #expect(!ResolvableAddress.resolves(BluetoothAddress(parsing: "30:81:94:0D:FB:AA")!, irk: irk, cipher: aes))
    }
}

@Suite("a resolving key in the gateways' forms")
struct ResolvingKeyFormsTests {
    @Test("hex as it stands, reversed, base64 of the reversed bytes (checked with Python's base64 by hand: below), and a stable identity address")
    func forms() throws {
        let f = try ResolvingKeyForms(irk: irk, cipher: aes)
        #expect(f.hex == "ec0234a357c8ad05341010a60a397d9b")
        #expect(f.reversed == "9b7d390aa6101034 05adc857a33402ec".replacingEvery(" ", with: ""))
        // python3 -c "import base64; print(base64.b64encode(bytes.fromhex('ec0234a357c8ad05341010a60a397d9b')[::-1]).decode())"
        #expect(f.base64 == "m305CqYQEDQFrchXozQC7A==")
        let again = try ResolvingKeyForms(irk: irk, cipher: aes)
        #expect(f.identityAddress.isStatic && f.identityAddress == again.identityAddress)
        #expect(Base64.encode([]) == "" && Base64.encode([0x66]) == "Zg==" && Base64.encode([0x66, 0x6F]) == "Zm8=" && Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
    }
}
