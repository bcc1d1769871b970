// Which address the controller is told: the kept static address, the fall back when none can be kept, and the
// rotating address per period.
import BeaconCore
import BluetoothHCI
@testable import DaemonCore
import Testing

private let kept: [UInt8] = [0x9A, 0x78, 0x56, 0x34, 0x12, 0xC6]

@Suite("address choice")
struct AddressChoiceTests {
    @Test("static: loaded once and kept; public needs nothing")
    func staticAddress() throws {
        var c = AddressChoice()
        var loads = 0
        let load = { () -> Result<[UInt8], AddressChoice.StaticFailure> in loads += 1; return .success(kept) }
        #expect(try c.choose(.static, generation: 0, loadStatic: load, randomBytes: { nil }).get().address == .random(kept))
        #expect(try c.choose(nil, generation: 0, loadStatic: load, randomBytes: { nil }).get().address == .random(kept))
        #expect(loads == 1)
        #expect(try c.choose(.public, generation: 0, loadStatic: load, randomBytes: { nil }).get().address == .public)
    }

    @Test("no state directory: the default falls back to public with one warning and tries no more; explicit static is an error")
    func fallBack() throws {
        var c = AddressChoice()
        var loads = 0
        let none = { () -> Result<[UInt8], AddressChoice.StaticFailure> in loads += 1; return .failure(.unavailable("Cannot keep a static address: mkdir /var/lib/beacond: EACCES")) }
        let first = try c.choose(nil, generation: 0, loadStatic: none, randomBytes: { nil }).get()
        #expect(first.address == .public && first.warning?.hasSuffix("advertising from the controller's public address until it can be kept") == true)
        let second = try c.choose(nil, generation: 0, loadStatic: none, randomBytes: { nil }).get()
        #expect(second == AddressChoice.Choice(address: .public, warning: nil) && loads == 1)
        var d = AddressChoice()
        #expect(throws: AddressChoice.Refusal(message: "Cannot keep a static address: mkdir /var/lib/beacond: EACCES")) {
            try d.choose(.static, generation: 0, loadStatic: none, randomBytes: { nil }).get()
        }
    }

    @Test("a damaged file is an error even for the default: never a silently new identity")
    func damaged() {
        var c = AddressChoice()
        let broken = { () -> Result<[UInt8], AddressChoice.StaticFailure> in .failure(.damaged("/var/lib/beacond/static-address does not hold a random static address")) }
        #expect(throws: AddressChoice.Refusal.self) { try c.choose(nil, generation: 0, loadStatic: broken, randomBytes: { nil }).get() }
    }

    @Test("rotating: one non-resolvable address per period; bytes that make none are drawn again")
    func rotating() throws {
        var c = AddressChoice()
        var draws: [[UInt8]] = [[0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]
        let random = { () -> [UInt8]? in draws.isEmpty ? nil : draws.removeFirst() }
        let load = { () -> Result<[UInt8], AddressChoice.StaticFailure> in .success(kept) }
        let a = try c.choose(.rotating, generation: 1, loadStatic: load, randomBytes: random).get().address
        #expect(try c.choose(.rotating, generation: 1, loadStatic: load, randomBytes: random).get().address == a)
        let b = try c.choose(.rotating, generation: 2, loadStatic: load, randomBytes: random).get().address
        #expect(a != b)
        guard case .random(let bytes) = b else { Issue.record("not random"); return }
        #expect(bytes[5] & 0xC0 == 0)  // non-resolvable private: the top two bits 00
        #expect(throws: AddressChoice.Refusal.self) { try c.choose(.rotating, generation: 3, loadStatic: load, randomBytes: random).get() }
    }
}
