// Atomic replacement from one descriptor: mode and owner kept, and a symlink swapped in at the worst moment
// (after the read, just before the rename) makes the edit fail with nothing else written.
import Glibc
@testable import SystemCalls
import SystemConditions
import Testing

private func tempDir() -> String {
    var template = Array("/tmp/beacond-edit.XXXXXX".utf8CString)
    let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    return String(cString: p!)
}

private func write(_ path: String, _ text: String, mode: mode_t = 0o640) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
    _ = text.utf8CString.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress, $0.count - 1) }
    fchmod(fd, mode)
    close(fd)
}

private func read(_ path: String) -> String {
    guard let fd = try? FileDescriptor.open(path, O_RDONLY), let b = try? fd.readAll(limit: 1 << 16) else { return "<none>" }
    return String(decoding: b, as: UTF8.self)
}

@Suite("editable file")
struct EditableFileTests {
    @Test("replace keeps the mode, leaves no temporary file, and writes through a symlink given at open")
    func replace() throws {
        let d = tempDir()
        write("\(d)/real.conf", "old\n", mode: 0o640)
        symlink("\(d)/real.conf", "\(d)/link.conf")
        let f = try EditableFile(opening: "\(d)/link.conf")
        #expect(String(decoding: try f.read(limit: 100), as: UTF8.self) == "old\n")
        try f.replace(with: Array("new\n".utf8))
        #expect(read("\(d)/real.conf") == "new\n")
        var st = stat()
        lstat("\(d)/link.conf", &st)
        #expect(st.st_mode & S_IFMT == S_IFLNK)  // the link is still a link
        stat("\(d)/real.conf", &st)
        #expect(st.st_mode & 0o7777 == 0o640)
        let entries = try listing(d)
        #expect(entries.sorted() == ["link.conf", "real.conf"])
    }

    @Test("a file swapped for a symlink to another file just before the rename: refused, nothing written anywhere")
    func swapBeforeRename() throws {
        let d = tempDir()
        write("\(d)/beacond.conf", "mine\n")
        write("\(d)/victim", "do not touch\n", mode: 0o600)
        let f = try EditableFile(opening: "\(d)/beacond.conf")
        _ = try f.read(limit: 100)
        #expect(throws: EditableFile.Failure.replacedMeanwhile("\(d)/beacond.conf")) {
            try f.replace(with: Array("written\n".utf8)) {
                // The attacker's moment: the name now points somewhere else.
                rename("\(d)/beacond.conf", "\(d)/moved.conf")
                symlink("\(d)/victim", "\(d)/beacond.conf")
            }
        }
        #expect(read("\(d)/victim") == "do not touch\n")
        #expect(read("\(d)/moved.conf") == "mine\n")
        #expect(try listing(d).sorted() == ["beacond.conf", "moved.conf", "victim"])  // the temporary file is gone
    }

    @Test("opening a directory or a missing file fails with the call and errno")
    func failures() {
        let d = tempDir()
        #expect(throws: EditableFile.Failure.notRegularFile(d)) { try EditableFile(opening: d) }
        #expect(throws: EditableFile.Failure.system(SystemError("open(\(d)/nope)", errno: .noEntry))) { try EditableFile(opening: "\(d)/nope") }
    }

    @Test("a durable file: made with its directory, never replaced unless asked, then replaced whole")
    func durableFile() throws {
        let d = tempDir() + "/state"
        try createFileDurably(named: "owned", in: d, contents: Array("one\n".utf8))
        #expect(read("\(d)/owned") == "one\n")
        #expect(throws: SystemError("linkat(owned)", errno: Errno(rawValue: EEXIST))) {
            try createFileDurably(named: "owned", in: d, contents: Array("two\n".utf8))
        }
        #expect(read("\(d)/owned") == "one\n")
        try createFileDurably(named: "owned", in: d, contents: Array("two\n".utf8), replacing: true)
        #expect(read("\(d)/owned") == "two\n")
        #expect(try listing(d) == ["owned"])
    }

    @Test("bug: a file over readFile's limit was returned cut (limit + 1 bytes); now it is an error (EFBIG)")
    func readFileOverItsLimit() throws {
        let d = tempDir()
        write("\(d)/f", "0123456789")
        #expect(try FileDescriptor.readFile("\(d)/f", limit: 10) == Array("0123456789".utf8))
        #expect(throws: SystemError("read(\(d)/f): over 9 bytes", errno: .tooLarge)) { try FileDescriptor.readFile("\(d)/f", limit: 9) }
    }

    @Test("bug: opening a FIFO where a file belongs waited for a writer forever; only regular files open, at once")
    func onlyRegularFilesOpen() throws {
        let d = tempDir()
        #expect(mkfifo("\(d)/fifo", 0o600) == 0)
        #expect(throws: SystemError("open(\(d)/fifo): not a regular file", errno: .invalidArgument)) { try FileDescriptor.readFile("\(d)/fifo", limit: 9) }
        #expect(throws: SystemError("open(\(d)): not a regular file", errno: .isDirectory)) { try FileDescriptor.readFile(d, limit: 9) }
        #expect(throws: EditableFile.Failure.notRegularFile("\(d)/fifo")) { try EditableFile(opening: "\(d)/fifo") }
        // The descriptor of a regular file blocks again for its reads.
        write("\(d)/f", "x")
        let fd = try FileDescriptor.openRegularFile("\(d)/f")
        #expect(fcntl(fd.rawValue, F_GETFL) & O_NONBLOCK == 0)
    }

    /// The verifier runs as root and writes into node_exporter's directory, which sits in the prometheus user's home:
    /// a symlink there made root write wherever it pointed.
    @Test("bug: a privileged writer followed a symlinked directory; a trusted directory is opened without following one, and must be root's")
    func trustedDirectory() throws {
        let d = tempDir()
        #expect(mkdir("\(d)/target", 0o755) == 0 && symlink("\(d)/target", "\(d)/link") == 0)
        #expect(throws: SystemError("open(\(d)/link/sub): \(d)/link is a symbolic link (or not a directory), which is not followed", errno: Errno(rawValue: ENOTDIR))) {
            try FileDescriptor.openTrustedDirectory("\(d)/link/sub")
        }
        #expect(throws: SystemError("open(\(d)/link): \(d)/link is a symbolic link (or not a directory), which is not followed", errno: Errno(rawValue: ENOTDIR))) {
            try FileDescriptor.openTrustedDirectory("\(d)/link")
        }
        // The last component is made when missing, and written through the descriptor.
        let made = try FileDescriptor.openTrustedDirectory("\(d)/textfile")
        try createFileDurably(named: "m.prom", in: made, contents: Array("x 1\n".utf8), exactMode: true, replacing: true)
        #expect(try FileDescriptor.readFile("\(d)/textfile/m.prom", limit: 10) == Array("x 1\n".utf8))
        #expect(access("\(d)/target/m.prom", F_OK) != 0)
        // Writable by its group: refused; sticky (as /tmp): taken.
        #expect(mkdir("\(d)/shared", 0o775) == 0 && chmod("\(d)/shared", 0o775) == 0)
        #expect(throws: SystemError("open(\(d)/shared): the directory belongs to user \(geteuid()) with mode 775: only a directory of root's (or this user's) that no one else may write is written to", errno: .notPermitted)) {
            try FileDescriptor.openTrustedDirectory("\(d)/shared")
        }
        #expect(chmod("\(d)/shared", 0o1777) == 0)
        _ = try FileDescriptor.openTrustedDirectory("\(d)/shared")
        // Another user's directory (root only can give it away).
        if geteuid() == 0 {
            #expect(mkdir("\(d)/theirs", 0o755) == 0 && chmod("\(d)/theirs", 0o755) == 0 && chown("\(d)/theirs", 65534, 65534) == 0)
            #expect(throws: SystemError("open(\(d)/theirs): the directory belongs to user 65534 with mode 755: only a directory of root's (or this user's) that no one else may write is written to", errno: .notPermitted)) {
                try FileDescriptor.openTrustedDirectory("\(d)/theirs")
            }
        }
    }

    @Test("an atomic replace without sync (the runtime directory's state file): the new contents whole, the exact mode whatever the umask, no temporary file left")
    func atomicReplaceUnsynced() throws {
        let d = tempDir()
        let dir = try FileDescriptor.openTrustedDirectory(d)
        write("\(d)/state.json", "{\"old\":1}", mode: 0o600)
        let old = umask(0o077)
        defer { umask(old) }
        try replaceFileAtomically(named: "state.json", in: dir, contents: Array("{\"new\":2}".utf8), mode: 0o644, exactMode: true)
        #expect(read("\(d)/state.json") == "{\"new\":2}")
        var st = stat()
        #expect(stat("\(d)/state.json", &st) == 0 && st.st_mode & 0o7777 == 0o644)
        #expect(try listing(d) == ["state.json"])
    }

    /// Two beacond processes (the service and a hand-run `beacond run` on the same state directory) write the same
    /// record. With one fixed temporary name (NAME.new) the second deleted the first's temporary file mid-write, and the
    /// first then renamed the second's half-written file into place.
    @Test("bug: a durable write took over another writer's temporary file; each now writes its own")
    func durableWritersKeepTheirOwnTemporaryFiles() throws {
        let d = tempDir()
        for (name, replacing) in [("owned", true), ("addresses", false)] {
            // Another writer, between its write and its rename, under the name the old code always used.
            write("\(d)/\(name).new", "half of anoth", mode: 0o644)
            try createFileDurably(named: name, in: d, contents: Array("whole\n".utf8), replacing: replacing)
            #expect(read("\(d)/\(name)") == "whole\n")
            #expect(read("\(d)/\(name).new") == "half of anoth", "the other writer's file was taken")
        }
        #expect(try listing(d).sorted() == ["addresses", "addresses.new", "owned", "owned.new"])
    }
}

private func listing(_ d: String) throws -> [String] {
    guard let dir = opendir(d) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let e = readdir(dir) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

@Suite("editable file: what a failure means")
struct EditRefusalTests {
    @Test("the open's errno as a condition, a non-regular file, and anything else in its own words")
    func refusal() throws {
        let d = tempDir()
        var missing: EditableFile.Failure?
        do { _ = try EditableFile(opening: "\(d)/none.conf") } catch { missing = error }
        guard case .opening(let c)? = missing?.refusal else { Issue.record("not an open's refusal: \(String(describing: missing))"); return }
        #expect(c.kind == .notFound)
        #expect(EditableFile.Failure.notRegularFile("\(d)").refusal == .notRegularFile)
        let swapped = EditableFile.Failure.replacedMeanwhile("\(d)/b.conf")
        #expect(swapped.refusal == .other(swapped.description))
    }
}
