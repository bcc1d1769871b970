// `beacond run`'s exits before the start, decided from what it found: 78 for a refused file, 69 for a failed crypto
// self-test its beacons need, 75 for another beacond on the device, 77 for a state directory not its own.
import BeaconCore
@testable import DaemonCore
import Testing

private func parse(_ text: String) -> BeaconConfiguration { try! BeaconConfiguration.parse(Array(text.utf8)) }
private let ibeacon = parse("[beacon]\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 1\nminor = 1\n")
private let eid = parse("[beacon]\nformat = \"eddystone-eid\"\nidentity_key_file = \"k.key\"\n")

@Suite("StartupExit: why run ends before its start")
struct StartupExitTests {
    @Test("a refused file: 78, one journal line per error with its file and line, STATUS with the summary")
    func config() {
        let error = ConfigError(path: "/etc/beacond/beacond.conf",
                                diagnostics: [ConfigDiagnostic("unknown key 'x'", at: BeaconCore.SourceLocation(line: 3, column: 1)), ConfigDiagnostic("no file", at: nil)])
        let e = StartupExit.decide(.configRefused(error))
        #expect(e?.code == .config && e?.code.rawValue == 78)
        #expect(e?.lines.map(\.fields) == [["CONFIG_FILE=/etc/beacond/beacond.conf", "CONFIG_LINE=3"], ["CONFIG_FILE=/etc/beacond/beacond.conf"]])
        #expect(e?.lines.map(\.message) == error.diagnostics.map { $0.formatted(path: error.path) })
        #expect(e?.notify == ["STATUS=Invalid configuration: \(error.summary)", "EXIT_STATUS=78"])
    }

    @Test("a failed self-test matters only to a config that needs it: 69")
    func selfTests() {
        #expect(StartupExit.decide(.selfTests(ibeacon, aes128: "broken", ccm: "broken")) == nil)
        #expect(StartupExit.decide(.selfTests(eid, aes128: nil, ccm: "broken")) == nil)
        let e = StartupExit.decide(.selfTests(eid, aes128: "libgcrypt's AES-128 does not give FIPS-197's result", ccm: nil))
        #expect(e == StartupExit(code: .unavailable, lines: [.init(message: "Cannot compute Eddystone-EID identifiers: libgcrypt's AES-128 does not give FIPS-197's result", fields: [])],
                                 notify: ["STATUS=Cannot compute Eddystone-EID identifiers: libgcrypt's AES-128 does not give FIPS-197's result", "EXIT_STATUS=69"]))
    }

    @Test("the device's lock: 75 when another beacond holds it (the unit retries), 77 when the directory is not this user's")
    func lock() {
        let busy = StartupExit.decide(.stateLock(busy: true, problem: "another beacond (pid 7) is running on hci0"))
        #expect(busy == StartupExit(code: .temporaryFailure, lines: [.init(message: "Cannot run: another beacond (pid 7) is running on hci0", fields: [])],
                                    notify: ["STATUS=Cannot run: another beacond (pid 7) is running on hci0", "EXIT_STATUS=75"]))
        #expect(StartupExit.decide(.stateLock(busy: false, problem: "not yours"))?.code == .noPermission)
    }
}
