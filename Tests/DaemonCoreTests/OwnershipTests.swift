// The state directory's record of what beacond put on its controllers.
import DaemonCore
import Testing

@Suite("ownership record")
struct OwnershipTests {
    @Test("written and read back: per device and kind, empty entries dropped")
    func roundTrip() {
        var r = OwnershipRecord()
        r["hci0", .mgmtInstances] = [5, 4, 3]
        r["hci0", .hciSets] = [0, 1]
        r["hci1", .mgmtInstances] = [5]
        r["hci2", .hciSets] = []
        #expect(r.text.hasSuffix("hci0 hci-sets 0 1\nhci0 mgmt-instances 3 4 5\nhci1 mgmt-instances 5\n"))
        let back = OwnershipRecord(parsing: r.text)
        #expect(back == r)
        #expect(back["hci0", .mgmtInstances] == [5, 4, 3])
        #expect(back["hci1", .hciSets] == [])
        #expect(back.skippedLines == 0)
    }

    @Test("lines it does not understand are skipped and counted, the rest kept", arguments: [
        "hci0 mgmt-instances 5 x", "hci0 sets 1", "hci0", "hci0\u{1B} hci-sets 1", "hci0 mgmt-instances 256",
    ])
    func damaged(line: String) {
        let r = OwnershipRecord(parsing: "# comment\n\(line)\nhci1 hci-sets 2\n")
        #expect(r.skippedLines == 1)
        #expect(r["hci1", .hciSets] == [2])
        #expect(r["hci0", .mgmtInstances] == [])
    }
}
