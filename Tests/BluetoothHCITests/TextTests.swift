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
}
