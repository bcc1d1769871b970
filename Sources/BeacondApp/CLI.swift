// The command line: parsing, help texts and usage errors, in the manner of swift-argument-parser.
import BeaconCore
import BluetoothHCI
import DaemonCore
let defaultConfigPath = "/etc/beacond/beacond.conf"

/// What the user asked for.
enum Invocation: Equatable {
    case help(String?)  // nil = top level
    case version
    case run(RunOptions)
    case checkConfig(configPath: String, keys: String?)
    case configSchema
    case payload(configPath: String, format: PayloadFormat, time: UInt32?)
    case genKey(path: String)
    case irk(configPath: String, beacon: String?)
    case genUUID(count: Int, lowercase: Bool, setPath: String?, replace: Bool)
    case scan(ScanOptions)
    case status(StatusOptions)
    case reload(ReloadOptions)
}

struct RunOptions: Equatable {
    var configPath = defaultConfigPath
    var device: DeviceSpec?
    var logLevel: LogLevel?
}

enum PayloadFormat: String, Equatable, CaseIterable, Sendable {
    case hex, hcitool, json

    /// "hex, hcitool or json".
    static let namesText = proseList(allCases.map(\.rawValue), "or")
}

/// A mistake on the command line: the message and the usage line of the command concerned.
struct UsageError: Error, Equatable {
    var message: String
    var command: String?

    /// `Error: …`, the usage line, and where to read more (stderr; exit 64).
    var rendered: String {
        "Error: \(message)\nUsage: \(CLI.usage(command))\n  See 'beacond --help' for more information.\n"
    }
}

/// One option, declared once: its names, the name of its value (nil for a flag), its help line, and what it does
/// to the command's options. The OPTIONS text of the help is made from these. Help texts are made when shown, not
/// at every start (a daemon's start made every command's, in ~0.6 ms: docs/benchmarks.md).
struct Option<Options>: Sendable {
    let names: [String]
    let value: String?
    let help: @Sendable () -> String
    /// Applies the option: the options so far, the parser (for more arguments), the name as typed, and the value
    /// ("" for a flag).
    let apply: @Sendable (inout Options, inout OptionParser, String, String) throws(UsageError) -> Void

    init(_ names: [String], _ value: String? = nil, _ help: @autoclosure @escaping @Sendable () -> String,
         _ apply: @escaping @Sendable (inout Options, inout OptionParser, String, String) throws(UsageError) -> Void) {
        self.names = names
        self.value = value
        self.help = help
        self.apply = apply
    }

    /// "-c, --config PATH".
    var flags: String { names.joined(separator: ", ") + (value.map { " " + $0 } ?? "") }
}

/// One command: its name, what it does, its usage line, its options and exit status, and how it parses. The one
/// table of commands (`CLI.commands`) is all that help, usage errors, parsing, `beacond --help` and the man page read.
struct Command: Sendable {
    let name: String
    /// One line, for `beacond --help` and the help's OVERVIEW.
    let abstract: String
    let usage: String
    /// Paragraphs between OVERVIEW and USAGE, separated by blank lines (wrapped when shown).
    let description: @Sendable () -> String
    /// (flags, help) of each option, in the order declared, `--help` last: made when asked for, as the options
    /// themselves are when this command is parsed (not every command's at every start).
    let options: @Sendable () -> [(flags: String, help: @Sendable () -> String)]
    /// What a signal does (run only).
    let signals: @Sendable () -> String
    let exitStatus: @Sendable () -> String
    /// Parses the options after the command name.
    let parse: @Sendable (inout OptionParser) throws(UsageError) -> Invocation

    static let helpLine: (flags: String, help: @Sendable () -> String) = ("-h, --help", { "Show help information." })

    /// A command whose arguments are all declared options: each is applied in turn to `start`, and `finish` makes
    /// the invocation (and refuses combinations that make no sense).
    init<Options>(_ name: String, abstract: String, usage: String, description: @autoclosure @escaping @Sendable () -> String,
                  options: @autoclosure @escaping @Sendable () -> [Option<Options>], signals: @autoclosure @escaping @Sendable () -> String = "",
                  exitStatus: @autoclosure @escaping @Sendable () -> String = "", start: Options,
                  finish: @escaping @Sendable (Options) throws(UsageError) -> Invocation) where Options: Sendable {
        self.name = name
        self.abstract = abstract
        self.usage = usage
        self.description = description
        self.options = { options().map { ($0.flags, $0.help) } + [Self.helpLine] }
        self.signals = signals
        self.exitStatus = exitStatus
        self.parse = { p throws(UsageError) in
            var o = start
            let options = options()
            while let typed = try p.nextOption() {
                if typed == "-h" || typed == "--help" { return .help(name) }
                guard let option = options.first(where: { $0.names.contains(typed) }) else { throw p.unknown(typed) }
                let value = option.value == nil ? "" : try p.value(for: typed)
                try option.apply(&o, &p, typed, value)
            }
            return try finish(o)
        }
    }

    /// A command that reads its own arguments (positional ones).
    init(_ name: String, abstract: String, usage: String, description: @autoclosure @escaping @Sendable () -> String,
         exitStatus: @autoclosure @escaping @Sendable () -> String = "", parse: @escaping @Sendable (inout OptionParser) throws(UsageError) -> Invocation) {
        self.name = name
        self.abstract = abstract
        self.usage = usage
        self.description = description
        self.options = { [Self.helpLine] }
        self.signals = { "" }
        self.exitStatus = exitStatus
        self.parse = parse
    }
}

private struct CheckConfigOptions: Sendable {
    var path = defaultConfigPath
    var keys: String?
    var schema = false
}

private struct PayloadOptions: Sendable {
    var path = defaultConfigPath
    var format = PayloadFormat.hex
    var time: UInt32?
}

private struct GenUUIDOptions: Sendable {
    var count = 1
    var countGiven = false
    var lower = false
    var set: String?
    var replace = false
}

enum CLI {
    /// The options several commands share, each declared once.
    // Each takes a setter, not a key path: a key path is instantiated at run time, and the table is made at every
    // start (docs/benchmarks.md).
    private static func configOption<O>(_ set: @escaping @Sendable (inout O, String) -> Void) -> Option<O> {
        Option(["-c", "--config"], "PATH", "Config file (default: \(defaultConfigPath)).") { o, _, _, v in set(&o, v) }
    }
    private static func selectDevice<O>(_ help: @autoclosure @escaping @Sendable () -> String,
                                        _ set: @escaping @Sendable (inout O, String) -> Void) -> Option<O> {
        Option(["-d", "--device"], "SPEC", help()) { o, p, typed, v throws(UsageError) in set(&o, try p.device(typed, v).description) }
    }
    private static func selectConfig<O>(_ help: @autoclosure @escaping @Sendable () -> String,
                                        _ set: @escaping @Sendable (inout O, String) -> Void) -> Option<O> {
        Option(["-c", "--config"], "PATH", help()) { o, _, _, v in set(&o, v) }
    }
    private static func seconds(_ p: OptionParser, _ typed: String, _ v: String, max: Double, expected: String) throws(UsageError) -> Double {
        guard let d = Double(v), d > 0, d <= max else { throw p.invalid(typed, v, expected: expected) }
        return d
    }

    static let commands: [Command] = [
        Command(
            "run", abstract: "Advertise the configured beacons until stopped (the daemon).",
            usage: "beacond run [--config PATH] [--device SPEC] [--log-level LEVEL]",
            description: """
                Reads the config, drives the controller and keeps the beacons (\(BeaconFormat.names("or"))) on the \
                air in the foreground.
                """,
            options: [
                configOption { $0.configPath = $1 },
                Option(["-d", "--device"], "SPEC", "Controller, overriding [controller] device: \(DeviceSpec.formsText).") {
                    o, p, typed, v throws(UsageError) in o.device = try p.device(typed, v)
                },
                Option(["--log-level"], "LEVEL",
                       "Lowest priority logged: \(LogLevel.commonNames) (default: info, or [daemon] log_level).") {
                    o, p, typed, v throws(UsageError) in
                    guard let l = LogLevel(name: v) else { throw p.invalid(typed, v, expected: LogLevel.validNames) }
                    o.logLevel = l
                },
            ],
            signals: """
                SIGHUP reloads the config: a file with errors is refused and the current beacons stay on the air; \
                new data is put on the air without a gap. SIGTERM or SIGINT takes the beacons off the air and exits 0.
                """,
            exitStatus: """
                0 stopped by a signal, 1 internal failure (the event loop could not be set up or run; systemd restarts \
                it), 64 usage error, 69 controller unusable, 75 another beacond runs on the device whatever its \
                state directory (systemd restarts it), 77 missing privilege or a state directory (or lock) that is not this \
                user's own, 78 config error.
                """,
            start: RunOptions(), finish: { o in .run(o) }),
        Command(
            "check-config", abstract: "Validate the config file and print the beacons it describes.",
            usage: "beacond check-config [--config PATH] [--keys DIR]\n       beacond check-config --schema",
            description: "Every mistake is reported at once as PATH:LINE:COL: error: MESSAGE.",
            options: [
                configOption { $0.path = $1 },
                Option(["--keys"], "DIR", """
                    Where a relative identity_key_file is (default: the keys directory beside the config): for a file \
                    checked before it is put in place.
                    """) { o, _, _, v in o.keys = v },
                Option(["--schema"], nil, "Print every key the config takes (table, formats, type, range, default, meaning) as JSON.") {
                    o, _, _, _ in o.schema = true
                },
            ],
            exitStatus: "0 the file is valid, 78 it has errors.",
            start: CheckConfigOptions(),
            finish: { o throws(UsageError) in
                guard o.schema else { return .checkConfig(configPath: o.path, keys: o.keys) }
                guard o.path == defaultConfigPath, o.keys == nil else {
                    throw UsageError(message: "'--schema' prints every key the config takes; it reads no file ('--config', '--keys')", command: "check-config")
                }
                return .configSchema
            }),
        Command(
            "payload", abstract: "Print the advertising bytes as hex, hcitool commands or JSON.",
            usage: "beacond payload [--config PATH] [--format \(PayloadFormat.allCases.map { $0.rawValue }.joined(separator: "|"))] [--time T]",
            description: """
                hex prints the advertising data bytes, a line per beacon (30 for an iBeacon, 31 for an AltBeacon or \
                an Eddystone-UID, 25 for an Eddystone-TLM, 21 for an Eddystone-EID); hcitool prints the \
                'hcitool cmd' lines (parameters, data, enable) that produce the same advertising; json prints the \
                fields and the hex.
                """,
            options: [
                configOption { $0.path = $1 },
                Option(["-f", "--format"], "FORMAT", "\(PayloadFormat.namesText) (default: hex).") { o, p, typed, v throws(UsageError) in
                    guard let f = PayloadFormat(rawValue: v) else { throw p.invalid(typed, v, expected: PayloadFormat.namesText) }
                    o.format = f
                },
                Option(["--time"], "T", """
                    Eddystone-EID beacons: the frame for time counter T (seconds since the Unix epoch, modulo 2^32; \
                    default: now), to check a beacon against a resolver.
                    """) { o, p, typed, v throws(UsageError) in
                    guard let t = UInt32(v) else { throw p.invalid(typed, v, expected: "a time counter from 0 to 4294967295") }
                    o.time = t
                },
            ],
            start: PayloadOptions(), finish: { o in .payload(configPath: o.path, format: o.format, time: o.time) }),
        Command(
            "gen-key", abstract: "Write a fresh key (Eddystone-EID, BTHome) into a new file.",
            usage: "beacond gen-key FILE",
            description: """
                128 bits from the kernel's random number generator, as 32 hex digits, in a new file of mode 0600 \
                (identity_key_file in the config, the same file for the resolver; or bindkey_file, the bindkey Home \
                Assistant asks for). An existing file is never replaced.
                """,
            parse: { p throws(UsageError) in
                var file: String?
                while !p.args.isEmpty {
                    let a = p.args.removeFirst()
                    if a == "-h" || a == "--help" { return .help("gen-key") }
                    if a.hasPrefix("-") && a != "-" { throw p.unknown(a) }
                    guard file == nil else { throw UsageError(message: "unexpected argument '\(a)'", command: "gen-key") }
                    file = a
                }
                guard let file else { throw UsageError(message: "missing FILE: where to write the new key", command: "gen-key") }
                return .genKey(path: file)
            }),
        irkCommand,
        Command(
            "gen-uuid", abstract: "Generate random (version 4) UUIDs, or write one into a config.",
            usage: "beacond gen-uuid [--count N] [--lower] [--set PATH [--replace]]",
            description: """
                UUIDs come from the kernel's random number generator, uppercase and hyphenated like macOS uuidgen. \
                With --set, every iBeacon and AltBeacon table without a uuid gets the same one: a fresh one, or the \
                one the file's other beacons share (a site shares one UUID); every other byte of the file stays as it \
                was, and the file is replaced atomically. A uuid that is there is kept unless --replace is given, \
                which gives every beacon of the file one fresh UUID. A file that does not parse is left untouched.
                """,
            options: [
                Option(["-n", "--count"], "N", "How many UUIDs to print (default: 1).") { o, p, typed, v throws(UsageError) in
                    guard let n = Int(v), n >= 1, n <= 10_000_000 else { throw p.invalid(typed, v, expected: "a whole number from 1 to 10000000") }
                    o.count = n
                    o.countGiven = true
                },
                Option(["--lower"], nil, "Print lowercase hex digits.") { o, _, _, _ in o.lower = true },
                Option(["--set"], "PATH", "Give PATH's beacons without a uuid one, the same for all.") { o, _, _, v in o.set = v },
                Option(["--replace"], nil, "With --set: give every beacon one fresh UUID.") { o, _, _, _ in o.replace = true },
            ],
            start: GenUUIDOptions(),
            finish: { o throws(UsageError) in
                if o.set != nil && o.countGiven && o.count != 1 {
                    throw UsageError(message: "'--set' writes one UUID; it cannot be combined with '--count \(o.count)'", command: "gen-uuid")
                }
                if o.replace && o.set == nil {
                    throw UsageError(message: "'--replace' replaces the uuid '--set' writes; it needs '--set PATH'", command: "gen-uuid")
                }
                return .genUUID(count: o.count, lowercase: o.lower, setPath: o.set, replace: o.replace)
            }),
        Command(
            "scan", abstract: "List the beacons around, ranged the way iOS ranges them.",
            usage: "beacond scan [--device SPEC] [--duration SECONDS | --calibrate SECONDS] [--uuid UUID] [--major N] [--minor N] [--eid-keys FILE [--eid-window N]] [--json] [--all]\n       beacond scan [--device SPEC] --expect FILE... [--timeout SECONDS] [--metrics FILE] [--json]",
            description: """
                Passive LE scanning (legacy or extended, whichever the controller supports) on the same devices as \
                'run', for \(BeaconFormat.scannedNames("and")) frames. Per beacon: last and smoothed RSSI (trimmed mean of \
                the last 10 s), measured power, estimated distance (the Android Beacon Library curve), proximity \
                (under 0.5 m immediate, under 4 m near, else far; no RSSI unknown), packets, address. A live table on \
                a terminal; JSON lines (one per beacon each second it was seen, and a final line per beacon) with \
                --json or when stdout is not a terminal.

                With --expect, checks beacond configs against the air: it listens until every beacon in the files \
                was heard (or --timeout passes) and prints each one as heard, missing or mismatch (its identity with \
                another measured power, format or address), with the RSSI, address and fields heard.
                """,
            options: [
                Option(["-d", "--device"], "SPEC", "\(DeviceSpec.formsText) (default: hci0).") { o, p, typed, v throws(UsageError) in
                    o.device = try p.device(typed, v)
                },
                Option(["--duration"], "SECONDS", "Stop after this long (default: until Ctrl-C).") { o, p, typed, v throws(UsageError) in
                    let d = try seconds(p, typed, v, max: 86400 * 365, expected: "seconds, e.g. 10 or 2.5")
                    if o.calibrate {
                        throw UsageError(message: "'--calibrate' listens for as long as it says; give '--duration' or '--calibrate', not both", command: "scan")
                    }
                    o.duration = d
                },
                Option(["--calibrate"], "SECONDS", """
                    Listen this long with the receiver 1 m from the beacons, then print per beacon the median RSSI and \
                    the sample count: the value for measured_power (Eddystone's at 0 m: the median + 41 dB).
                    """) { o, p, typed, v throws(UsageError) in
                    let d = try seconds(p, typed, v, max: 86400 * 365, expected: "seconds, e.g. 10 or 2.5")
                    if o.duration != nil && !o.calibrate {
                        throw UsageError(message: "'--calibrate' listens for as long as it says; give '--duration' or '--calibrate', not both", command: "scan")
                    }
                    o.duration = d
                    o.calibrate = true
                },
                Option(["--uuid"], "UUID", """
                    Only iBeacons and AltBeacons with this UUID (also for --major and --minor: Eddystone frames then go).
                    """) { o, _, _, v throws(UsageError) in
                    do throws(BeaconUUID.ParseError) { o.uuid = try BeaconUUID(parsing: v) } catch {
                        throw UsageError(message: "invalid value for '--uuid': \(error.message)", command: "scan")
                    }
                },
                Option(["--major"], "N", "Only beacons with this major.") { o, p, typed, v throws(UsageError) in
                    guard let n = UInt16(v) else { throw p.invalid(typed, v, expected: "0 to 65535") }
                    o.major = n
                },
                Option(["--minor"], "N", "Only beacons with this minor.") { o, p, typed, v throws(UsageError) in
                    guard let n = UInt16(v) else { throw p.invalid(typed, v, expected: "0 to 65535") }
                    o.minor = n
                },
                Option(["--eid-keys"], "FILE", """
                    Resolve Eddystone-EID frames with the keys in FILE ([[beacon]] tables: name, identity_key or \
                    identity_key_file, rotation_exponent): a resolved one shows as its name with the time counter it \
                    matched.
                    """) { o, _, _, v in o.eidKeys = v },
                Option(["--eid-window"], "N", "Accept EIDs of N periods either side of now, for clock drift (default: 2).") {
                    o, p, typed, v throws(UsageError) in
                    guard let n = Int(v), (0...1000).contains(n) else { throw p.invalid(typed, v, expected: "0 to 1000 periods") }
                    o.eidWindow = n
                },
                Option(["--json"], nil, "JSON lines even on a terminal.") { o, _, _, _ in o.json = true },
                Option(["--all"], nil, "Also show other advertisements and malformed iBeacons.") { o, _, _, _ in o.all = true },
                Option(["--expect"], "FILE...", """
                    beacond config files (or directories: every *.conf in them) whose beacons must be on the air.
                    """) { o, p, _, v in
                    o.expect.append(v)
                    // FILE...: every argument up to the next option.
                    while let next = p.args.first, !next.hasPrefix("-") || next == "-" { o.expect.append(p.args.removeFirst()) }
                },
                Option(["--timeout"], "SECONDS", "With --expect: give up after this long (default: 30).") { o, p, typed, v throws(UsageError) in
                    o.timeout = try seconds(p, typed, v, max: 86400, expected: "seconds, e.g. 30 or 2.5")
                },
                Option(["--metrics"], "FILE", """
                    With --expect: write the result to FILE, replaced atomically, in Prometheus' text format (for \
                    node_exporter's textfile collector).
                    """) { o, _, _, v in o.metrics = v },
            ],
            exitStatus: """
                0 success (with --expect: every beacon heard as configured), 2 a beacon was not heard (--expect), 3 a \
                beacon was heard with other content than its config's (--expect), 64 usage error, 69 controller \
                unusable, 77 missing privilege, 78 config error.
                """,
            start: ScanOptions(),
            finish: { o throws(UsageError) in
                if o.expect.isEmpty {
                    for (given, name) in [(o.timeout != nil, "--timeout"), (o.metrics != nil, "--metrics")] where given {
                        throw UsageError(message: "'\(name)' belongs to '--expect FILE...'", command: "scan")
                    }
                } else {
                    let clash = [(o.duration != nil, o.calibrate ? "--calibrate" : "--duration"), (o.uuid != nil, "--uuid"),
                                 (o.major != nil, "--major"), (o.minor != nil, "--minor"), (o.all, "--all"), (o.eidKeys != nil, "--eid-keys")]
                    if let (_, name) = clash.first(where: { $0.0 }) {
                        throw UsageError(message: "'\(name)' cannot be combined with '--expect': the configs say what to listen for (and for how long: '--timeout')", command: "scan")
                    }
                }
                return .scan(o)
            }),
        Command(
            "status", abstract: "Show what each beacond has on the air, and what is wrong.",
            usage: "beacond status [--json] [--device SPEC] [--config PATH] [--expect-sha256 SHA256]\n       beacond status --check [--json] [--device SPEC] [--config PATH]",
            description: """
                Reads the state each running beacond keeps in its runtime directory (the units' /run/beacond and \
                /run/beacond-hciN; readable by every user): per daemon its phase, controller and config, one line per \
                beacon (format, identity, address, interval, on the air since when, warnings), and each problem with \
                what to do. With --json, one object with the fields the README's output vocabulary lists.

                With --check, looks at the adapter before anything goes on the air: the controllers, rfkill blocks, \
                whether bluetoothd runs, what the kernel's management interface and the controller say (advertising \
                instances, sets, TX power; the controller's LE answers need root), and what 'run' would do with the \
                config there: backend, command family, sets or time slices, addresses.
                """,
            options: [
                Option(["--json"], nil, """
                    One JSON object: ok, problems, daemons (with --check: ok, problems, controllers, bluetoothd, mgmt, \
                    hci, run).
                    """) { o, _, _, _ in o.json = true },
                Option(["--check"], nil, """
                    Check the adapter and the config instead (the config: --config, else \(defaultConfigPath)).
                    """) { o, _, _, _ in o.check = true },
                selectDevice("Only the beacond on this controller.") { $0.device = $1 },
                selectConfig("Only the beacond that runs this config file.") { $0.configPath = $1 },
                Option(["--expect-sha256"], "SHA256", """
                    Also a problem: a beacond shown whose running config is not the file with this SHA-256 (64 hex \
                    digits, as sha256sum prints it): what a deployment waits on (the Ansible role does).
                    """) { o, p, typed, v throws(UsageError) in
                    guard v.count == 64, v.allSatisfy(\.isHexDigit) else { throw p.invalid(typed, v, expected: "64 hex digits, as sha256sum prints them") }
                    o.expectSHA256 = v.lowercased()
                },
            ],
            exitStatus: """
                0 every beacon of every beacond shown is on the air (--check: run would put every beacon on the air), \
                1 something is wrong (the problems say what), 3 no beacond is running, 64 usage error, 78 --check: \
                the config has errors.
                """,
            start: StatusOptions(), finish: { o in .status(o) }),
        Command(
            "reload", abstract: "Reload a running beacond's config, and wait for its answer.",
            usage: "beacond reload [--device SPEC] [--config PATH] [--pid PID] [--timeout SECONDS]",
            description: """
                Sends SIGHUP and waits until beacond has taken the file and put it on the air, or refused it (the \
                errors are printed; the previous beacons stay on the air). The units' ExecReload runs it, so \
                'systemctl reload beacond' tells the truth.
                """,
            options: [
                selectDevice("The beacond on this controller.") { $0.device = $1 },
                selectConfig("The beacond that runs this config file.") { $0.configPath = $1 },
                Option(["--pid"], "PID", "The beacond with this pid (the units pass $MAINPID).") { o, p, typed, v throws(UsageError) in
                    guard let n = Int32(v), n > 0 else { throw p.invalid(typed, v, expected: "a process id") }
                    o.pid = n
                },
                Option(["--timeout"], "SECONDS", "Give up after this long (default: 60).") { o, p, typed, v throws(UsageError) in
                    o.timeout = try seconds(p, typed, v, max: 3600, expected: "seconds, at most 3600")
                },
            ],
            exitStatus: """
                0 the new config is on the air, 1 it was taken but is not on the air (the controller is missing or \
                refused it), beacond stopped, or the wait timed out, 3 no beacond is running, 64 usage error, 77 not \
                allowed to signal it, 78 the file was refused.
                """,
            start: ReloadOptions(), finish: { o in .reload(o) }),
        Command(
            "help", abstract: "Show help for a command.", usage: "beacond help [COMMAND]", description: "",
            parse: { p throws(UsageError) in
                guard let name = p.args.first else { return .help(nil) }
                guard p.args.count == 1 else { throw UsageError(message: "unexpected argument '\(p.args[1])'", command: "help") }
                guard CLI.command(name) != nil else { throw UsageError(message: "unknown command '\(name)'", command: "help") }
                return .help(name)
            }),
    ]

    static func command(_ name: String) -> Command? { commands.first { $0.name == name } }

    static func usage(_ command: String?) -> String {
        command.flatMap(Self.command)?.usage ?? "beacond <command> [options]"
    }

    /// Help text is wrapped to this many columns.
    static let width = 80
    /// Where an option's help starts.
    static let helpColumn = 26

    static func help(_ name: String?) -> String {
        guard let c = name.flatMap(command) else {
            let commandLines = commands.map { "  " + pad($0.name, 14) + $0.abstract }.joined(separator: "\n")
            return [
                wrap("OVERVIEW: beacond keeps Bluetooth LE beacons (\(BeaconFormat.names("and"))) on the air.", indent: 0),
                "USAGE: \(usage(nil))",
                "COMMANDS:\n" + commandLines,
                "OPTIONS:\n" + (optionLines(Command.helpLine) + optionLines(("--version", { "Show the version." }))).dropLast(),
                "  See 'beacond help <command>' for detailed help.",
            ].joined(separator: "\n\n") + "\n"
        }
        var sections = ["OVERVIEW: \(c.abstract)"]
        sections += c.description().pieces(separatedBy: "\n\n").filter { !$0.isEmpty }.map { wrap($0, indent: 0) }
        sections.append("USAGE: \(c.usage)")
        if c.name != "help" { sections.append("OPTIONS:\n" + c.options().map(optionLines).joined().dropLast()) }
        let (signals, exitStatus) = (c.signals(), c.exitStatus())
        if !signals.isEmpty { sections.append("SIGNALS:\n" + wrap(signals, indent: 2)) }
        if !exitStatus.isEmpty { sections.append("EXIT STATUS:\n" + wrap(exitStatus, indent: 2)) }
        return sections.joined(separator: "\n\n") + "\n"
    }

    /// "  -c, --config PATH       Config file …", the help wrapped under itself.
    static func optionLines(_ o: (flags: String, help: @Sendable () -> String)) -> String {
        let lead = "  " + o.flags
        let body = wrap(o.help(), indent: helpColumn)
        return lead.count < helpColumn - 1 ? pad(lead, helpColumn) + body.dropFirst(helpColumn) + "\n" : lead + "\n" + body + "\n"
    }

    /// `text` (its lines joined) wrapped at word boundaries to `width` columns, every line indented by `indent`.
    static func wrap(_ text: String, indent: Int) -> String {
        let pad = String(repeating: " ", count: indent)
        var lines: [String] = []
        var line = ""
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            if !line.isEmpty && indent + line.count + 1 + word.count > width {
                lines.append(pad + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(pad + line) }
        return lines.joined(separator: "\n")
    }

    /// Parses the arguments after the program name.
    static func parse(_ args: [String]) throws(UsageError) -> Invocation {
        guard let first = args.first else { return .help(nil) }
        switch first {
        case "-h", "--help": return .help(nil)
        case "--version": return .version
        default: break
        }
        guard let c = command(first) else {
            if first.hasPrefix("-") { throw UsageError(message: "unknown option '\(first)'", command: nil) }
            throw UsageError(message: "unknown command '\(first)'", command: nil)
        }
        var p = OptionParser(command: first, args: Array(args.dropFirst()))
        return try c.parse(&p)
    }
}

/// Walks `--name value`, `--name=value` and `-x value` forms; anything else is a usage error.
struct OptionParser {
    let command: String
    var args: [String]
    var inlineValue: String?

    init(command: String, args: [String]) {
        self.command = command
        self.args = args
    }

    mutating func nextOption() throws(UsageError) -> String? {
        if let v = inlineValue { throw UsageError(message: "unexpected value '\(v)'", command: command) }
        guard !args.isEmpty else { return nil }
        let a = args.removeFirst()
        guard a.hasPrefix("-"), a != "-" else { throw UsageError(message: "unexpected argument '\(a)'", command: command) }
        if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
            inlineValue = String(a[a.index(after: eq)...])
            return String(a[..<eq])
        }
        return a
    }

    mutating func value(for option: String) throws(UsageError) -> String {
        if let v = inlineValue {
            inlineValue = nil
            return v
        }
        guard let v = args.first, !v.hasPrefix("-") || v == "-" else {
            throw UsageError(message: "missing value for '\(option)'", command: command)
        }
        args.removeFirst()
        return v
    }

    func unknown(_ option: String) -> UsageError { UsageError(message: "unknown option '\(option)'", command: command) }

    func invalid(_ option: String, _ value: String, expected: String) -> UsageError {
        UsageError(message: "invalid value for '\(option)': '\(value)' (expected \(expected))", command: command)
    }

    /// The value of a --device option, parsed.
    func device(_ option: String, _ value: String) throws(UsageError) -> DeviceSpec {
        do { return try DeviceSpec(parsing: value) } catch {
            throw UsageError(message: "invalid value for '\(option)': \(error.message)", command: command)
        }
    }
}
