// The scan table: bounded, least recently heard out first, first-heard order for display.
@testable import BeaconCore
import Testing

@Suite("scan table")
struct ScanTableTests {
    @Test("a full table drops the least recently heard entry and counts it")
    func evictsLeastRecentlyHeard() {
        var t = ScanTable<Int>(capacity: 3)
        for k in ["a", "b", "c"] { t.record(k, make: { 0 }) { $0 += 1 } }
        t.record("a", make: { 0 }) { $0 += 1 }  // a is heard again: b is now the oldest
        t.record("d", make: { 0 }) { $0 += 10 }
        #expect(t.count == 3 && t.evicted == 1)
        t.record("b", make: { 100 }) { $0 += 0 }  // b was dropped: it comes back as new, and c goes
        #expect(t.entries == [2, 10, 100])  // a, d, b in the order first heard (b's second life counts)
        #expect(t.evicted == 2)
    }

    @Test("a flood of new keys keeps the table at its capacity; the entries heard all along stay")
    func flood() {
        var t = ScanTable<String>(capacity: 50)
        for i in 0..<10_000 {
            t.record("flood-\(i)", make: { "f\(i)" }) { _ in }
            if i % 10 == 0 { t.record("steady", make: { "steady" }) { _ in } }
        }
        #expect(t.count == 50 && t.evicted == 10_000 + 1 - 50)
        #expect(t.entries.contains("steady"))
    }
}
