// What a key file's or a config file's failed open means (BeaconCore decides from SystemCondition; the loader only
// opens), and what gen-key says when it cannot write.
import BeaconCore
import SystemConditions
import Testing

@Suite("file failures")
struct KeyFileProblemTests {
    @Test("a key file's failed open: missing (or not among a unit's credentials), not a regular file, denied, or as it is")
    func keyFileOpening() {
        #expect(KeyFileProblem(opening: SystemCondition(.notFound, "x"), isCredential: false) == .missing)
        #expect(KeyFileProblem(opening: SystemCondition(.notFound, "x"), isCredential: true) == .notACredential)
        #expect(KeyFileProblem(opening: SystemCondition(.isDirectory, "x"), isCredential: false) == .notRegularFile)
        #expect(KeyFileProblem(opening: SystemCondition(.invalidArgument, "x"), isCredential: true) == .notRegularFile)
        #expect(KeyFileProblem(opening: SystemCondition(.accessDenied, "x"), isCredential: false) == .permissionDenied)
        let other = SystemCondition(.other, "Too many levels of symbolic links")
        #expect(KeyFileProblem(opening: other, isCredential: false) == .cannotOpen(other))
        #expect(KeyFileProblem.cannotOpen(other).predicate("k", in: "/d") == "cannot be opened: Too many levels of symbolic links")
        #expect(KeyFileProblem.cannotRead(SystemCondition(.tooLarge, "File too large")).predicate("k", in: "/d") == "cannot be read: File too large")
    }

    @Test("a config file's failed open: one diagnostic, saying what the file is instead or what to do")
    func configOpening() {
        func message(_ kind: SystemCondition.Kind, _ text: String = "x") -> String? {
            ConfigError(opening: "/etc/b.conf", SystemCondition(kind, text)).diagnostics.map(\.message).first
        }
        #expect(ConfigError(opening: "/etc/b.conf", SystemCondition(.notFound, "x")).diagnostics.count == 1)
        // Opened for an edit (gen-uuid --set): the open's condition as above, or the refusal's own words.
        #expect(ConfigError(editing: "/etc/b.conf", .opening(SystemCondition(.accessDenied, "x"))) == ConfigError(opening: "/etc/b.conf", SystemCondition(.accessDenied, "x")))
        #expect(ConfigError(editing: "/etc/b.conf", .notRegularFile).diagnostics.map(\.message) == ["is not a regular file, not a config file"])
        #expect(ConfigError(editing: "/etc/b.conf", .other("/etc/b.conf was replaced")).diagnostics.map(\.message) == ["/etc/b.conf was replaced"])
        #expect(message(.isDirectory) == "is a directory, not a config file")
        #expect(message(.invalidArgument) == "is not a regular file (a FIFO, a device or a socket), not a config file")
        #expect(message(.notFound) == "no such file (copy the example /usr/share/doc/beacond/beacond.conf.example, then run 'beacond gen-uuid --set /etc/b.conf')")
        #expect(message(.accessDenied) == "permission denied reading the file")
        #expect(message(.other, "Input/output error") == "cannot open the file: Input/output error")
    }

    @Test("gen-key never replaces a file, and says so; any other failure is said as it is")
    func genKeyRefusal() {
        #expect(KeyFileWriting.refusal("/k", SystemCondition(.exists, "File exists"))
                == "/k exists: gen-key never replaces a key (the beacon's EIDs and every resolver's copy depend on it); remove it first if you mean to")
        #expect(KeyFileWriting.refusal("/k", SystemCondition(.accessDenied, "Permission denied")) == "cannot write /k: Permission denied")
    }
}
