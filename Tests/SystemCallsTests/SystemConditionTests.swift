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

@Suite("lock failures")
struct LockFailureTests {
    @Test("each FileLock failure in the pure modules' words, a failed call with its condition and its own text")
    func refusal() {
        #expect(FileLock.Failure.held(by: 42).refusal == .held(by: 42))
        #expect(FileLock.Failure.held(by: nil).refusal == .held(by: nil))
        #expect(FileLock.Failure.notRegularFile.refusal == .notRegularFile)
        #expect(FileLock.Failure.links(2).refusal == .links(2))
        #expect(FileLock.Failure.owner(1000).refusal == .owner(1000))
        let e = SystemError("openat(lock.records)", errno: .accessDenied)
        #expect(FileLock.Failure.system(e).refusal == .system(e.condition, text: "openat(lock.records): Permission denied"))
    }

    @Test("as one SystemError: held is EWOULDBLOCK naming the holder, no lock of this user's EPERM, a call's own as it is")
    func systemError() {
        #expect(FileLock.Failure.held(by: 42).systemError("/run/b/lock") == SystemError("flock(/run/b/lock): held by pid 42", errno: .wouldBlock))
        #expect(FileLock.Failure.held(by: nil).systemError("/run/b/lock") == SystemError("flock(/run/b/lock): held by another process", errno: .wouldBlock))
        for f in [FileLock.Failure.notRegularFile, .links(2), .owner(7)] {
            #expect(f.systemError("/run/b/lock") == SystemError("open(/run/b/lock): not a lock file of this user's", errno: .notPermitted))
        }
        let e = SystemError("openat(lock)", errno: .accessDenied)
        #expect(FileLock.Failure.system(e).systemError("/run/b/lock") == e)
    }
}
