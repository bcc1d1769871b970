// The standard-library text searches that stand in for _StringProcessing's (Package.swift says why).
import BluetoothHCI
import Testing

@Suite("text searches without the regex engine")
struct TextTests {
    @Test("includes, replacingEvery and pieces agree with what the String methods they replace did")
    func searches() {
        #expect("cannot be opened: EACCES".includes("be opened") && !"permission".includes("permissions"))
        #expect("x".includes("") && !"".includes("x"))
        #expect("at 0 m, for {format}; {format}".replacingEvery("{format}", with: "eddystone-uid") == "at 0 m, for eddystone-uid; eddystone-uid")
        #expect("ünïcode {f}".replacingEvery("{f}", with: "ß") == "ünïcode ß")
        #expect("a\n\nb\n\n\nc".pieces(separatedBy: "\n\n") == ["a", "b", "\nc"])
        #expect("".pieces(separatedBy: "\n\n") == [""] && "\n\n".pieces(separatedBy: "\n\n") == ["", ""])
    }

    @Test("hexString: two digits a byte, either case, with or without a separator; a UUID in its 8-4-4-4-12 form")
    func hex() {
        #expect(hexString([0x0A, 0xFF, 0x00, 0x9B]) == "0aff009b")
        #expect(hexString([0x0A, 0xFF, 0x00, 0x9B], separator: ":", uppercase: true) == "0A:FF:00:9B")
        #expect(hexString([UInt8]()) == "" && hexString([0x01], separator: "::") == "01")
        #expect(hexString(Array(UInt8.min...UInt8.max)).count == 512)
        #expect(hex16(0x2008) == "0x2008")
    }
}
