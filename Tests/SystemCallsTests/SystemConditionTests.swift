// SystemError in the pure modules' words (SystemError.condition), and the reads and makes that take "not there
// yet" and "there already" as answers rather than failures.
import Glibc
import SystemCalls
import SystemConditions
import Testing

private func tempDir() -> String {
    var template = Array("/tmp/beacond-cond.XXXXXX".utf8CString)
    let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    return String(cString: p!)
}

@Suite("system conditions")
struct SystemConditionTests {
    @Test("each errno the decisions tell apart has its kind, any other is other; the words are strerror's")
    func kinds() {
        #expect(Errno.noEntry.condition == SystemCondition(.notFound, "No such file or directory"))
        #expect(Errno.exists.condition.kind == .exists)
        #expect(Errno.accessDenied.condition.kind == .accessDenied)
        #expect(Errno.isDirectory.condition.kind == .isDirectory)
        #expect(Errno.invalidArgument.condition.kind == .invalidArgument)
        #expect(Errno.tooLarge.condition.kind == .tooLarge)
        #expect(Errno.notPermitted.condition == SystemCondition(.other, "Operation not permitted"))
        #expect(SystemError("open(x)", errno: .noEntry).condition.kind == .notFound)
        #expect("\(Errno.tooLarge.condition)" == "\(Errno.tooLarge)")
    }

    @Test("readFileIfPresent: nil for no file, the bytes for one, and any other failure thrown")
    func readIfPresent() throws {
        let d = tempDir()
        let dir = try FileDescriptor.openDirectory(d, creating: false)
        let absent = try dir.readFileIfPresent(named: "none", limit: 10)
        #expect(absent == nil)
        try createNewFile("\(d)/f", contents: Array("abc".utf8), mode: 0o600)
        let present = try dir.readFileIfPresent(named: "f", limit: 10)
        #expect(present == Array("abc".utf8))
        var failure: Errno?
        do { _ = try dir.readFileIfPresent(named: "f", limit: 2) } catch { failure = error.errno }
        #expect(failure == .tooLarge)
    }

    @Test("makeSubdirectoryUnlessPresent: made, then no failure the second time; a real failure still thrown")
    func makeUnlessPresent() throws {
        let d = tempDir()
        let dir = try FileDescriptor.openDirectory(d, creating: false)
        try dir.makeSubdirectoryUnlessPresent("s", mode: 0o700)
        try dir.makeSubdirectoryUnlessPresent("s", mode: 0o700)
        _ = try dir.openSubdirectory("s")
        var failure: Errno?
        do { try dir.makeSubdirectoryUnlessPresent("none/s", mode: 0o700) } catch { failure = error.errno }
        #expect(failure == .noEntry)
    }
}
