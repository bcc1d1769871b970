// Command-line parsing, usage errors and the retry backoff.
@testable import BeacondApp
import BeaconCore
import TestSupport
import Testing

/// `scan --expect a.conf dir/ c.conf --timeout 5 --metrics m.prom --json` (a global: Swift 6.0 crashes on a closure
/// in @Test's arguments).
private let expectOptions: ScanOptions = {
    var o = ScanOptions()
    o.expect = ["a.conf", "dir/", "c.conf"]
    o.timeout = 5
    o.metrics = "m.prom"
    o.json = true
    return o
}()

@Suite("command line")
struct CLITests {
    @Test("commands and options parse", arguments: [
        ([String](), Invocation.help(nil)),
        (["--help"], .help(nil)), (["-h"], .help(nil)), (["--version"], .version),
        (["help", "run"], .help("run")), (["run", "--help"], .help("run")),
        (["run"], .run(RunOptions())),
        (["run", "-c", "/x.conf", "--device=tcp:127.0.0.1:9", "--log-level", "debug"],
         .run(RunOptions(configPath: "/x.conf", device: .tcp(host: "127.0.0.1", port: 9), logLevel: .debug))),
        (["check-config", "--config", "a.conf"], .checkConfig(configPath: "a.conf", keys: nil)),
        (["check-config", "--config", "/tmp/x", "--keys", "/etc/beacond/keys"], .checkConfig(configPath: "/tmp/x", keys: "/etc/beacond/keys")),
        (["payload", "-f", "hcitool"], .payload(configPath: "/etc/beacond/beacond.conf", format: .hcitool, time: nil)),
        (["payload", "--format=json", "-c", "b"], .payload(configPath: "b", format: .json, time: nil)),
        (["payload", "--time", "4294967295"], .payload(configPath: "/etc/beacond/beacond.conf", format: .hex, time: 4_294_967_295)),
        (["gen-key", "k.key"], .genKey(path: "k.key")),
        (["gen-uuid"], .genUUID(count: 1, lowercase: false, setPath: nil, replace: false)),
        (["gen-uuid", "--count", "5", "--lower"], .genUUID(count: 5, lowercase: true, setPath: nil, replace: false)),
        (["gen-uuid", "--set", "/etc/beacond/beacond.conf"], .genUUID(count: 1, lowercase: false, setPath: "/etc/beacond/beacond.conf", replace: false)),
        (["gen-uuid", "--set", "c.conf", "--replace"], .genUUID(count: 1, lowercase: false, setPath: "c.conf", replace: true)),
        // FILE...: the arguments up to the next option; --expect again adds more.
        (["scan", "--expect", "a.conf", "dir/", "--timeout", "5", "--metrics", "m.prom", "--expect", "c.conf", "--json"],
         .scan(expectOptions)),
    ])
    func parses(args: [String], expected: Invocation) throws {
        #expect(try CLI.parse(args) == expected)
    }

    @Test("mistakes are usage errors that name the problem", arguments: [
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["--frob"], "unknown option '--frob'"),
        (["run", "--frob"], "unknown option '--frob'"),
        (["run", "extra"], "unexpected argument 'extra'"),
        (["run", "--config"], "missing value for '--config'"),
        (["run", "--device", "usb:1"], "invalid value for '--device'"),
        (["run", "--log-level", "loud"], "invalid value for '--log-level'"),
        (["payload", "--format", "xml"], "invalid value for '--format'"),
        (["gen-uuid", "--count", "0"], "invalid value for '--count'"),
        (["gen-uuid", "--count", "many"], "invalid value for '--count'"),
        (["gen-uuid", "--count", "2", "--set", "x"], "cannot be combined"),
        (["gen-uuid", "--replace"], "'--replace' replaces the uuid '--set' writes; it needs '--set PATH'"),
        (["gen-uuid", "--lower=yes"], "unexpected value 'yes'"),
        (["help", "nothing"], "unknown command 'nothing'"),
        (["scan", "--expect"], "missing value for '--expect'"),
        (["scan", "--timeout", "5"], "'--timeout' belongs to '--expect FILE...'"),
        (["scan", "--metrics", "m.prom"], "'--metrics' belongs to '--expect FILE...'"),
        (["scan", "--expect", "a.conf", "--duration", "5"], "'--duration' cannot be combined with '--expect'"),
        (["scan", "--expect", "a.conf", "--minor", "5"], "'--minor' cannot be combined with '--expect'"),
        (["scan", "--expect", "a.conf", "--timeout", "0"], "invalid value for '--timeout'"),
    ])
    func usageErrors(args: [String], message: String) {
        let e = thrown(UsageError.self) { _ = try CLI.parse(args) }
        #expect(e != nil)
        #expect(e?.message.contains(message) == true, "\(e?.message ?? "")")
        #expect(e?.rendered.hasPrefix("Error: ") == true)
        #expect(e?.rendered.hasSuffix("  See 'beacond --help' for more information.\n") == true)
    }

    /// The long option names in a text ("--config", "--expect").
    static func longOptions(_ text: String) -> Set<String> {
        var names = Set<String>()
        var rest = Substring(text)
        while let at = rest.firstRange(of: "--") {
            let name = rest[at.lowerBound...].prefix { $0 == "-" || $0.isLetter }
            if name.count > 2 { names.insert(String(name)) }
            rest = rest[name.endIndex...]
        }
        return names
    }

    @Test("each command's usage line names exactly the options it declares")
    func usageMatchesOptions() {
        for c in CLI.commands where !c.options().dropLast().isEmpty {
            let declared = Self.longOptions(c.options().map(\.flags).joined(separator: " ")).subtracting(["--help"])
            #expect(Self.longOptions(c.usage) == declared, "\(c.name)")
        }
    }

    @Test("help fits 80 columns (but the usage lines) and names every format where it lists them")
    func helpTexts() {
        for name in [nil] + CLI.commands.map(\.name) {
            let text = CLI.help(name)
            for line in text.split(separator: "\n") where !line.hasPrefix("USAGE:") && !line.hasPrefix("       beacond") {
                #expect(line.count <= 80, "\(name ?? "beacond"): \(line)")
            }
        }
        for name in [nil, "run", "scan"] {
            let text = CLI.help(name).split(whereSeparator: \.isWhitespace).joined(separator: " ")
            // scan reads every format but the BTHome self-report (Home Assistant's to read), and says so.
            for f in BeaconFormat.allCases where name != "scan" || f != .bthome {
                #expect(text.contains(f.displayName), "\(name ?? "beacond") does not name \(f.displayName)")
            }
        }
    }

    @Test("review: a bad --duration is named before its clash with --calibrate; --schema reads no file", arguments: [
        (["scan", "--calibrate", "5", "--duration", "abc"], "invalid value for '--duration': 'abc' (expected seconds, e.g. 10 or 2.5)"),
        (["check-config", "--schema", "--config", "x.conf"], "'--schema' prints every key the config takes; it reads no file ('--config', '--keys')"),
        (["check-config", "--keys", "k", "--schema"], "'--schema' prints every key the config takes; it reads no file ('--config', '--keys')"),
    ])
    func reviewed(args: [String], message: String) {
        #expect(thrown(UsageError.self) { _ = try CLI.parse(args) }?.message == message)
    }

    @Test("an option's value is checked by its own declaration", arguments: [
        (["payload", "--format", "yaml"], "invalid value for '--format': 'yaml' (expected hex, hcitool or json)"),
        (["run", "--log-level", "loud"], "invalid value for '--log-level': 'loud' (expected emerg, alert, crit, err, warning, notice, info, debug)"),
        (["status", "-d", "hcix"], "invalid value for '-d': 'hcix' is not a kernel device name; expected hciN, tcp:HOST:PORT, unix:PATH or serial:PATH[:BAUD]"),
    ])
    func optionValues(args: [String], message: String) {
        #expect(thrown(UsageError.self) { _ = try CLI.parse(args) }?.message == message)
    }
}

@Suite("number formatting")
struct DecimalTests {
    @Test("decimal is total: huge values in exponent form, NaN and infinities as null, never a trap")
    func total() {
        #expect(decimal(0.189, 2) == "0.19")
        #expect(decimal(-1.25, 1) == "-1.3")
        #expect(decimal(9.7e16, 2) == "9.7e+16")
        #expect(decimal(.nan, 2) == "null" && decimal(.infinity, 1) == "null" && decimal(-.infinity, 1) == "null")
        #expect(decimal(Double.greatestFiniteMagnitude, 2) == "\(Double.greatestFiniteMagnitude)")
        #expect(decimal(999_999_999_999.99, 2) == "999999999999.99")
    }
}
