// The command line: parsing, help texts and usage errors, in the manner of swift-argument-parser.
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCITransport
let defaultConfigPath = "/etc/beacond/beacond.conf"

/// What the user asked for.
enum Invocation: Equatable {
    case help(String?)  // nil = top level
    case version
    case run(RunOptions)
    case checkConfig(configPath: String, keys: String?)
    case payload(configPath: String, format: PayloadFormat, time: UInt32?)
    case genKey(path: String)
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

enum PayloadFormat: String, Equatable, CaseIterable {
    case hex, hcitool, json
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

/// One command: its name, what it does, its usage line and help, and how its options parse. The one table of
/// commands (`CLI.commands`) is all that help, usage errors, parsing and `beacond --help` read.
struct Command: Sendable {
    let name: String
    /// One line, for `beacond --help` and the help's OVERVIEW.
    let abstract: String
    let usage: String
    /// The help between OVERVIEW and USAGE (empty: none).
    let description: String
    /// The help after USAGE: options and exit status.
    let options: String
    /// Parses the options after the command name.
    let parse: @Sendable (inout OptionParser) throws(UsageError) -> Invocation
}

enum CLI {
    private static let configOption = "  -c, --config PATH       Config file (default: \(defaultConfigPath)).\n"
    private static let helpOption = "  -h, --help              Show help information.\n"

    static let commands: [Command] = [
        Command(
            name: "run", abstract: "Advertise the configured beacons until stopped (the daemon).",
            usage: "beacond run [--config PATH] [--device SPEC] [--log-level LEVEL]",
            description: """
                Reads the config, drives the controller and keeps the beacons (iBeacon, AltBeacon,
                Eddystone-UID or -TLM) on the air in the foreground. SIGHUP reloads the config (a
                broken file keeps the current beacons on the air); SIGTERM or SIGINT disables
                advertising and exits 0.
                """,
            options: """
                OPTIONS:
                \(configOption)  -d, --device SPEC       Controller, overriding [controller] device: hciN,
                                          tcp:HOST:PORT, unix:PATH or serial:PATH[:BAUD].
                  --log-level LEVEL       Lowest priority logged: err, warning, notice, info
                                          or debug (default: info, or [daemon] log_level).
                \(helpOption)
                EXIT STATUS:
                  0 stopped by a signal, 1 internal failure (the event loop could not be set
                  up or run; systemd restarts it), 64 usage error, 69 controller unusable,
                  75 another beacond runs on the device with this state directory (systemd
                  restarts it), 77 missing privilege, 78 config error.

                """,
            parse: { p throws(UsageError) in
                var o = RunOptions()
                while let opt = try p.nextOption() {
                    switch opt {
                    case "-c", "--config": o.configPath = try p.value(for: opt)
                    case "-d", "--device": o.device = try p.device(for: opt)
                    case "--log-level":
                        let v = try p.value(for: opt)
                        guard let l = LogLevel(name: v) else { throw p.invalid(opt, v, expected: LogLevel.validNames) }
                        o.logLevel = l
                    case "-h", "--help": return .help("run")
                    default: throw p.unknown(opt)
                    }
                }
                return .run(o)
            }),
        Command(
            name: "check-config", abstract: "Validate the config file and print the beacons it describes.",
            usage: "beacond check-config [--config PATH] [--keys DIR]",
            description: "Every mistake is reported at once as PATH:LINE:COL: error: MESSAGE.",
            options: """
                OPTIONS:
                \(configOption)  --keys DIR              Where a relative identity_key_file is (default: the
                                          keys directory beside the config): for a file checked
                                          before it is put in place.
                \(helpOption)
                EXIT STATUS:
                  0 the file is valid, 78 it has errors.

                """,
            parse: { p throws(UsageError) in
                var path = defaultConfigPath
                var keys: String?
                while let opt = try p.nextOption() {
                    switch opt {
                    case "-c", "--config": path = try p.value(for: opt)
                    case "--keys": keys = try p.value(for: opt)
                    case "-h", "--help": return .help("check-config")
                    default: throw p.unknown(opt)
                    }
                }
                return .checkConfig(configPath: path, keys: keys)
            }),
        Command(
            name: "payload", abstract: "Print the advertising bytes as hex, hcitool commands or JSON.",
            usage: "beacond payload [--config PATH] [--format hex|hcitool|json] [--time T]",
            description: """
                hex prints the advertising data bytes (30 for an iBeacon, 31 for an
                AltBeacon or an Eddystone-UID), a line per beacon; hcitool prints the
                'hcitool cmd' lines (parameters, data, enable) that produce the same
                advertising; json prints the fields and the hex.
                """,
            options: """
                OPTIONS:
                \(configOption)  -f, --format FORMAT     hex, hcitool or json (default: hex).
                  --time T                Eddystone-EID beacons: the frame for time counter T
                                          (seconds since the Unix epoch, modulo 2^32; default:
                                          now), to check a beacon against a resolver.
                \(helpOption)
                """,
            parse: { p throws(UsageError) in
                var path = defaultConfigPath
                var format = PayloadFormat.hex
                var time: UInt32?
                while let opt = try p.nextOption() {
                    switch opt {
                    case "--time":
                        let v = try p.value(for: opt)
                        guard let t = UInt32(v) else { throw p.invalid(opt, v, expected: "a time counter from 0 to 4294967295") }
                        time = t
                    case "-c", "--config": path = try p.value(for: opt)
                    case "-f", "--format":
                        let v = try p.value(for: opt)
                        guard let f = PayloadFormat(rawValue: v) else { throw p.invalid(opt, v, expected: "hex, hcitool or json") }
                        format = f
                    case "-h", "--help": return .help("payload")
                    default: throw p.unknown(opt)
                    }
                }
                return .payload(configPath: path, format: format, time: time)
            }),
        Command(
            name: "gen-key", abstract: "Write a fresh Eddystone-EID identity key into a new file.",
            usage: "beacond gen-key FILE",
            description: """
                128 bits from the kernel's random number generator, as 32 hex digits, in a new
                file of mode 0600 (identity_key_file in the config; the same file for the
                resolver). An existing file is never replaced.
                """,
            options: """
                OPTIONS:
                \(helpOption)
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
        Command(
            name: "gen-uuid", abstract: "Generate random (version 4) UUIDs, or write one into a config file.",
            usage: "beacond gen-uuid [--count N] [--lower] [--set PATH [--replace]]",
            description: """
                UUIDs come from the kernel's random number generator, uppercase and
                hyphenated like macOS uuidgen. With --set, a [beacon] without a uuid gets a
                fresh one; every other byte of the file stays as it was, and the file is
                replaced atomically. A uuid that is there is kept (a fleet shares one UUID)
                unless --replace is given. A file that does not parse is left untouched.
                """,
            options: """
                OPTIONS:
                  -n, --count N           How many UUIDs to print (default: 1).
                  --lower                 Print lowercase hex digits.
                  --set PATH              Write a fresh UUID into PATH's [beacon] uuid.
                  --replace               With --set: replace a uuid that is there.
                \(helpOption)
                """,
            parse: { p throws(UsageError) in
                var count = 1
                var countGiven = false
                var lower = false
                var set: String?
                var replace = false
                while let opt = try p.nextOption() {
                    switch opt {
                    case "-n", "--count":
                        let v = try p.value(for: opt)
                        guard let n = Int(v), n >= 1, n <= 10_000_000 else { throw p.invalid(opt, v, expected: "a whole number from 1 to 10000000") }
                        count = n
                        countGiven = true
                    case "--lower": lower = true
                    case "--set": set = try p.value(for: opt)
                    case "--replace": replace = true
                    case "-h", "--help": return .help("gen-uuid")
                    default: throw p.unknown(opt)
                    }
                }
                if set != nil && countGiven && count != 1 {
                    throw UsageError(message: "'--set' writes one UUID; it cannot be combined with '--count \(count)'", command: "gen-uuid")
                }
                if replace && set == nil {
                    throw UsageError(message: "'--replace' replaces the uuid '--set' writes; it needs '--set PATH'", command: "gen-uuid")
                }
                return .genUUID(count: count, lowercase: lower, setPath: set, replace: replace)
            }),
        Command(
            name: "scan", abstract: "Show the beacons around, with distance and proximity as iOS ranges them.",
            usage: "beacond scan [--device SPEC] [--duration SECONDS | --calibrate SECONDS] [--uuid UUID] [--major N] [--minor N] [--eid-keys FILE [--eid-window N]] [--json] [--all]\n       beacond scan [--device SPEC] --expect FILE... [--timeout SECONDS] [--metrics FILE] [--json]",
            description: """
                Passive LE scanning (legacy or extended, whichever the controller supports) on
                the same devices as 'run', for iBeacon, AltBeacon and Eddystone UID and TLM
                frames. Per beacon: last and smoothed RSSI (trimmed mean of
                the last 10 s), measured power, estimated distance (the Android Beacon Library
                curve), proximity (under 0.5 m immediate, under 4 m near, else far; no RSSI
                unknown), packets, address. A live table on a terminal; JSON lines (one per
                beacon each second it was seen, and a final line per beacon) with --json or when
                stdout is not a terminal.

                With --expect, checks beacond configs against the air: it listens until every
                beacon in the files was heard (or --timeout passes) and prints each one as
                heard, missing or mismatch (its identity with another measured power, format
                or address), with the RSSI, address and fields heard.
                """,
            options: """
                OPTIONS:
                  -d, --device SPEC       hciN, tcp:HOST:PORT, unix:PATH or serial:PATH[:BAUD]
                                          (default: hci0).
                  --duration SECONDS      Stop after this long (default: until Ctrl-C).
                  --calibrate SECONDS     Listen this long with the receiver 1 m from the
                                          beacons, then print per beacon the median RSSI and
                                          the sample count: the value for measured_power
                                          (Eddystone-UID's at 0 m: the median + 41 dB).
                  --uuid UUID             Only iBeacons and AltBeacons with this UUID (also for
                                          --major and --minor: Eddystone frames then go).
                  --major N               Only beacons with this major.
                  --minor N               Only beacons with this minor.
                  --eid-keys FILE         Resolve Eddystone-EID frames with the keys in FILE
                                          ([[beacon]] tables: name, identity_key or
                                          identity_key_file, rotation_exponent): a resolved one
                                          shows as its name with the time counter it matched.
                  --eid-window N          Accept EIDs of N periods either side of now, for clock
                                          drift (default: 2).
                  --json                  JSON lines even on a terminal.
                  --all                   Also show other advertisements and malformed iBeacons.
                  --expect FILE...        beacond config files (or directories: every *.conf in
                                          them) whose beacons must be on the air.
                  --timeout SECONDS       With --expect: give up after this long (default: 30).
                  --metrics FILE          With --expect: write the result to FILE, replaced
                                          atomically, in Prometheus' text format (for
                                          node_exporter's textfile collector).
                \(helpOption)
                EXIT STATUS:
                  0 success (with --expect: every beacon heard as configured), 2 a beacon was
                  not heard (--expect), 3 a beacon was heard with other content than its
                  config's (--expect), 64 usage error, 69 controller unusable, 77 missing
                  privilege, 78 config error.

                """,
            parse: { p throws(UsageError) in
                var o = ScanOptions()
                while let opt = try p.nextOption() {
                    switch opt {
                    case "-d", "--device": o.device = try p.device(for: opt)
                    case "--duration", "--calibrate":
                        let v = try p.value(for: opt)
                        guard let d = Double(v), d > 0, d <= 86400 * 365 else { throw p.invalid(opt, v, expected: "seconds, e.g. 10 or 2.5") }
                        if (opt == "--calibrate" && o.duration != nil && !o.calibrate) || (opt == "--duration" && o.calibrate) {
                            throw UsageError(message: "'--calibrate' listens for as long as it says; give '--duration' or '--calibrate', not both", command: "scan")
                        }
                        o.duration = d
                        if opt == "--calibrate" { o.calibrate = true }
                    case "--uuid":
                        let v = try p.value(for: opt)
                        do throws(BeaconUUID.ParseError) { o.uuid = try BeaconUUID(parsing: v) } catch {
                            throw UsageError(message: "invalid value for '--uuid': \(error.message)", command: "scan")
                        }
                    case "--major", "--minor":
                        let v = try p.value(for: opt)
                        guard let n = UInt16(v) else { throw p.invalid(opt, v, expected: "0 to 65535") }
                        if opt == "--major" { o.major = n } else { o.minor = n }
                    case "--eid-keys": o.eidKeys = try p.value(for: opt)
                    case "--eid-window":
                        let v = try p.value(for: opt)
                        guard let n = Int(v), (0...1000).contains(n) else { throw p.invalid(opt, v, expected: "0 to 1000 periods") }
                        o.eidWindow = n
                    case "--json": o.json = true
                    case "--all": o.all = true
                    case "--expect":
                        o.expect.append(try p.value(for: opt))
                        // FILE...: every argument up to the next option.
                        while let next = p.args.first, !next.hasPrefix("-") || next == "-" { o.expect.append(p.args.removeFirst()) }
                    case "--timeout":
                        let v = try p.value(for: opt)
                        guard let d = Double(v), d > 0, d <= 86400 else { throw p.invalid(opt, v, expected: "seconds, e.g. 30 or 2.5") }
                        o.timeout = d
                    case "--metrics": o.metrics = try p.value(for: opt)
                    case "-h", "--help": return .help("scan")
                    default: throw p.unknown(opt)
                    }
                }
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
            name: "status", abstract: "Show what every running beacond has on the air, and what is wrong.",
            usage: "beacond status [--json] [--device SPEC] [--config PATH]\n       beacond status --check [--json] [--device SPEC] [--config PATH]",
            description: """
                Reads the state each running beacond keeps in its runtime directory (the units'
                /run/beacond and /run/beacond-hciN; readable by every user): per daemon its
                phase, controller and config, one line per beacon (format, identity, address,
                interval, on the air since when, warnings), and each problem with what to do.
                With --json, one object with the fields the README's output vocabulary lists.

                With --check, looks at the adapter before anything goes on the air: the
                controllers, rfkill blocks, whether bluetoothd runs, what the kernel's management
                interface and the controller say (advertising instances, sets, TX power; the
                controller's LE answers need root), and what 'run' would do with the config
                there: backend, command family, sets or time slices, addresses.
                """,
            options: """
                OPTIONS:
                  --json                  One JSON object: ok, problems, daemons (with --check:
                                          ok, problems, controllers, bluetoothd, mgmt, hci, run).
                  --check                 Check the adapter and the config instead (the config:
                                          --config, else /etc/beacond/beacond.conf).
                  -d, --device SPEC       Only the beacond on this controller.
                  -c, --config PATH       Only the beacond that runs this config file.
                \(helpOption)
                EXIT STATUS:
                  0 every beacon of every beacond shown is on the air (--check: run would put
                  every beacon on the air), 1 something is wrong (the problems say what), 3 no
                  beacond is running, 64 usage error, 78 --check: the config has errors.

                """,
            parse: { p throws(UsageError) in
                var o = StatusOptions()
                while let opt = try p.nextOption() {
                    switch opt {
                    case "--json": o.json = true
                    case "--check": o.check = true
                    case "-d", "--device": o.device = try p.device(for: opt).description
                    case "-c", "--config": o.configPath = try p.value(for: opt)
                    case "-h", "--help": return .help("status")
                    default: throw p.unknown(opt)
                    }
                }
                return .status(o)
            }),
        Command(
            name: "reload", abstract: "Make a running beacond read its config again, and wait for its answer.",
            usage: "beacond reload [--device SPEC] [--config PATH] [--pid PID] [--timeout SECONDS]",
            description: """
                Sends SIGHUP and waits until beacond has taken the file and put it on the air,
                or refused it (the errors are printed; the previous beacons stay on the air).
                The units' ExecReload runs it, so 'systemctl reload beacond' tells the truth.
                """,
            options: """
                OPTIONS:
                  -d, --device SPEC       The beacond on this controller.
                  -c, --config PATH       The beacond that runs this config file.
                  --pid PID               The beacond with this pid (the units pass $MAINPID).
                  --timeout SECONDS       Give up after this long (default: 60).
                \(helpOption)
                EXIT STATUS:
                  0 the new config is on the air, 1 it was taken but is not on the air (the
                  controller is missing or refused it), beacond stopped, or the wait timed out,
                  3 no beacond is running, 64 usage error, 77 not allowed to signal it, 78 the
                  file was refused.

                """,
            parse: { p throws(UsageError) in
                var o = ReloadOptions()
                while let opt = try p.nextOption() {
                    switch opt {
                    case "-d", "--device": o.device = try p.device(for: opt).description
                    case "-c", "--config": o.configPath = try p.value(for: opt)
                    case "--pid":
                        let v = try p.value(for: opt)
                        guard let n = Int32(v), n > 0 else { throw p.invalid(opt, v, expected: "a process id") }
                        o.pid = n
                    case "--timeout":
                        let v = try p.value(for: opt)
                        guard let d = Double(v), d > 0, d <= 3600 else { throw p.invalid(opt, v, expected: "seconds, at most 3600") }
                        o.timeout = d
                    case "-h", "--help": return .help("reload")
                    default: throw p.unknown(opt)
                    }
                }
                return .reload(o)
            }),
        Command(
            name: "help", abstract: "Show help for a command.", usage: "beacond help [COMMAND]", description: "", options: "",
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

    static func help(_ name: String?) -> String {
        if let c = name.flatMap(command) {
            return "OVERVIEW: \(c.abstract)\n\n" + (c.description.isEmpty ? "" : c.description + "\n\n")
                + "USAGE: \(c.usage)\n" + (c.options.isEmpty ? "" : "\n" + c.options)
        }
        var s = """
            OVERVIEW: beacond keeps Bluetooth LE beacons (iBeacon, AltBeacon, Eddystone) on the air.

            USAGE: \(usage(nil))

            COMMANDS:

            """
        for c in commands { s += "  " + c.name.padding(to: 14) + c.abstract + "\n" }
        s += """

            OPTIONS:
              -h, --help              Show help information.
              --version               Show the version.

              See 'beacond help <command>' for detailed help.

            """
        return s
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
    mutating func device(for option: String) throws(UsageError) -> DeviceSpec {
        let v = try value(for: option)
        do { return try DeviceSpec(parsing: v) } catch {
            throw UsageError(message: "invalid value for '\(option)': \(error.message)", command: command)
        }
    }
}

extension String {
    func padding(to width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
