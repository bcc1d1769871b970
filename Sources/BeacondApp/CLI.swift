// The command line: parsing, help texts and usage errors, in the manner of swift-argument-parser.
import BeaconCore
import DaemonCore
import HCITransport
let defaultConfigPath = "/etc/beacond/beacond.conf"

/// What the user asked for.
enum Invocation: Equatable {
    case help(String?)  // nil = top level
    case version
    case run(RunOptions)
    case checkConfig(configPath: String)
    case payload(configPath: String, format: PayloadFormat)
    case genUUID(count: Int, lowercase: Bool, setPath: String?)
    case scan(ScanOptions)
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

enum CLI {
    static let commands: [(name: String, abstract: String)] = [
        ("run", "Advertise the configured beacon until stopped (the daemon)."),
        ("check-config", "Validate the config file and print the beacon it describes."),
        ("payload", "Print the advertising bytes as hex, hcitool commands or JSON."),
        ("gen-uuid", "Generate random (version 4) UUIDs, or write one into a config file."),
        ("scan", "Show the beacons around, with distance and proximity as iOS ranges them."),
        ("help", "Show help for a command."),
    ]

    static func usage(_ command: String?) -> String {
        switch command {
        case "run": "beacond run [--config PATH] [--device SPEC] [--log-level LEVEL]"
        case "check-config": "beacond check-config [--config PATH]"
        case "payload": "beacond payload [--config PATH] [--format hex|hcitool|json]"
        case "gen-uuid": "beacond gen-uuid [--count N] [--lower] [--set PATH]"
        case "scan": "beacond scan [--device SPEC] [--duration SECONDS] [--uuid UUID] [--major N] [--minor N] [--json] [--all]"
        case "help": "beacond help [COMMAND]"
        default: "beacond <command> [options]"
        }
    }

    static func help(_ command: String?) -> String {
        let configOption = "  -c, --config PATH       Config file (default: \(defaultConfigPath)).\n"
        let helpOption = "  -h, --help              Show help information.\n"
        switch command {
        case "run":
            return """
                OVERVIEW: Advertise the configured beacon until stopped (the daemon).

                Reads the config, drives the controller and keeps the beacon (iBeacon, AltBeacon
                or Eddystone-UID) on the air in the foreground. SIGHUP reloads the config (a broken file keeps the current beacon on
                the air); SIGTERM or SIGINT disables advertising and exits 0.

                USAGE: \(usage("run"))

                OPTIONS:
                \(configOption)  -d, --device SPEC       Controller, overriding [controller] device: hciN,
                                          tcp:HOST:PORT, unix:PATH or serial:PATH[:BAUD].
                  --log-level LEVEL       Lowest priority logged: err, warning, notice, info
                                          or debug (default: info, or [daemon] log_level).
                \(helpOption)
                EXIT STATUS:
                  0 stopped by a signal, 64 usage error, 69 controller unusable,
                  77 missing privilege, 78 config error.

                """
        case "check-config":
            return """
                OVERVIEW: Validate the config file and print the beacon it describes.

                Every mistake is reported at once as PATH:LINE:COL: error: MESSAGE.

                USAGE: \(usage("check-config"))

                OPTIONS:
                \(configOption)\(helpOption)
                EXIT STATUS:
                  0 the file is valid, 78 it has errors.

                """
        case "payload":
            return """
                OVERVIEW: Print the advertising bytes as hex, hcitool commands or JSON.

                hex prints the advertising data bytes (30 for an iBeacon, 31 for an
                AltBeacon or an Eddystone-UID); hcitool prints the three 'hcitool cmd'
                lines (parameters, data, enable) that produce the same advertising; json
                prints the fields and the hex.

                USAGE: \(usage("payload"))

                OPTIONS:
                \(configOption)  -f, --format FORMAT     hex, hcitool or json (default: hex).
                \(helpOption)
                """
        case "gen-uuid":
            return """
                OVERVIEW: Generate random (version 4) UUIDs, or write one into a config file.

                UUIDs come from the kernel's random number generator, uppercase and
                hyphenated like macOS uuidgen. With --set, the uuid key of [beacon] in the
                file gets a fresh UUID; every other byte of the file stays as it was, and the
                file is replaced atomically. A file that does not parse is left untouched.

                USAGE: \(usage("gen-uuid"))

                OPTIONS:
                  -n, --count N           How many UUIDs to print (default: 1).
                  --lower                 Print lowercase hex digits.
                  --set PATH              Write a fresh UUID into PATH's [beacon] uuid.
                \(helpOption)
                """
        case "scan":
            return """
                OVERVIEW: Show the beacons around, with distance and proximity as iOS ranges them.

                Passive LE scanning (legacy or extended, whichever the controller supports) on
                the same devices as 'run', for iBeacon, AltBeacon and Eddystone UID and TLM
                frames. Per beacon: last and smoothed RSSI (trimmed mean of
                the last 10 s), measured power, estimated distance (the Android Beacon Library
                curve), proximity (under 0.5 m immediate, under 4 m near, else far; no RSSI
                unknown), packets, address. A live table on a terminal; JSON lines (one per
                beacon each second it was seen, and a final line per beacon) with --json or when
                stdout is not a terminal.

                USAGE: \(usage("scan"))

                OPTIONS:
                  -d, --device SPEC       hciN, tcp:HOST:PORT, unix:PATH or serial:PATH[:BAUD]
                                          (default: hci0).
                  --duration SECONDS      Stop after this long (default: until Ctrl-C).
                  --uuid UUID             Only iBeacons and AltBeacons with this UUID (also for
                                          --major and --minor: Eddystone frames then go).
                  --major N               Only beacons with this major.
                  --minor N               Only beacons with this minor.
                  --json                  JSON lines even on a terminal.
                  --all                   Also show other advertisements and malformed iBeacons.
                \(helpOption)
                """
        case "help":
            return """
                OVERVIEW: Show help for a command.

                USAGE: \(usage("help"))

                """
        default:
            var s = """
                OVERVIEW: beacond advertises this machine as an Apple iBeacon.

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
    }

    /// Parses the arguments after the program name.
    static func parse(_ args: [String]) throws(UsageError) -> Invocation {
        guard let first = args.first else { return .help(nil) }
        switch first {
        case "-h", "--help": return .help(nil)
        case "--version": return .version
        case "help":
            guard args.count <= 2 else { throw UsageError(message: "unexpected argument '\(args[2])'", command: "help") }
            if args.count == 2 {
                guard commands.contains(where: { $0.name == args[1] }) else {
                    throw UsageError(message: "unknown command '\(args[1])'", command: "help")
                }
                return .help(args[1])
            }
            return .help(nil)
        default: break
        }
        guard commands.contains(where: { $0.name == first }) else {
            if first.hasPrefix("-") { throw UsageError(message: "unknown option '\(first)'", command: nil) }
            throw UsageError(message: "unknown command '\(first)'", command: nil)
        }
        var p = OptionParser(command: first, args: Array(args.dropFirst()))
        switch first {
        case "run":
            var o = RunOptions()
            while let opt = try p.nextOption() {
                switch opt {
                case "-c", "--config": o.configPath = try p.value(for: opt)
                case "-d", "--device":
                    let v = try p.value(for: opt)
                    do { o.device = try DeviceSpec(parsing: v) } catch {
                        throw UsageError(message: "invalid value for '\(opt)': \(error.message)", command: first)
                    }
                case "--log-level":
                    let v = try p.value(for: opt)
                    guard let l = LogLevel(name: v) else {
                        throw UsageError(message: "invalid value for '--log-level': '\(v)' (expected \(LogLevel.validNames))", command: first)
                    }
                    o.logLevel = l
                case "-h", "--help": return .help(first)
                default: throw p.unknown(opt)
                }
            }
            return .run(o)
        case "check-config":
            var path = defaultConfigPath
            while let opt = try p.nextOption() {
                switch opt {
                case "-c", "--config": path = try p.value(for: opt)
                case "-h", "--help": return .help(first)
                default: throw p.unknown(opt)
                }
            }
            return .checkConfig(configPath: path)
        case "payload":
            var path = defaultConfigPath
            var format = PayloadFormat.hex
            while let opt = try p.nextOption() {
                switch opt {
                case "-c", "--config": path = try p.value(for: opt)
                case "-f", "--format":
                    let v = try p.value(for: opt)
                    guard let f = PayloadFormat(rawValue: v) else {
                        throw UsageError(message: "invalid value for '\(opt)': '\(v)' (expected hex, hcitool or json)", command: first)
                    }
                    format = f
                case "-h", "--help": return .help(first)
                default: throw p.unknown(opt)
                }
            }
            return .payload(configPath: path, format: format)
        case "gen-uuid":
            var count = 1
            var countGiven = false
            var lower = false
            var set: String?
            while let opt = try p.nextOption() {
                switch opt {
                case "-n", "--count":
                    let v = try p.value(for: opt)
                    guard let n = Int(v), n >= 1, n <= 10_000_000 else {
                        throw UsageError(message: "invalid value for '\(opt)': '\(v)' (expected a whole number from 1 to 10000000)", command: first)
                    }
                    count = n
                    countGiven = true
                case "--lower": lower = true
                case "--set": set = try p.value(for: opt)
                case "-h", "--help": return .help(first)
                default: throw p.unknown(opt)
                }
            }
            if set != nil && countGiven && count != 1 {
                throw UsageError(message: "'--set' writes one UUID; it cannot be combined with '--count \(count)'", command: first)
            }
            return .genUUID(count: count, lowercase: lower, setPath: set)
        case "scan":
            var o = ScanOptions()
            while let opt = try p.nextOption() {
                switch opt {
                case "-d", "--device":
                    let v = try p.value(for: opt)
                    do { o.device = try DeviceSpec(parsing: v) } catch {
                        throw UsageError(message: "invalid value for '\(opt)': \(error.message)", command: first)
                    }
                case "--duration":
                    let v = try p.value(for: opt)
                    guard let d = Double(v), d > 0, d <= 86400 * 365 else {
                        throw UsageError(message: "invalid value for '--duration': '\(v)' (expected seconds, e.g. 10 or 2.5)", command: first)
                    }
                    o.duration = d
                case "--uuid":
                    let v = try p.value(for: opt)
                    do { o.uuid = try BeaconUUID(parsing: v) } catch {
                        throw UsageError(message: "invalid value for '--uuid': \(error.message)", command: first)
                    }
                case "--major", "--minor":
                    let v = try p.value(for: opt)
                    guard let n = UInt16(v) else {
                        throw UsageError(message: "invalid value for '\(opt)': '\(v)' (expected 0 to 65535)", command: first)
                    }
                    if opt == "--major" { o.major = n } else { o.minor = n }
                case "--json": o.json = true
                case "--all": o.all = true
                case "-h", "--help": return .help(first)
                default: throw p.unknown(opt)
                }
            }
            return .scan(o)
        default:
            preconditionFailure("command list and parser disagree about '\(first)'")
        }
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
}

extension String {
    func padding(to width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
