// `beacond irk`: prints a resolving key, and only one a config names as `resolving_key_file` (issue #53: it printed
// any private file of the caller's, EID identity keys and bindkeys too). The key is read as run reads it, by a
// process that cannot be dumped or traced.
import AESCipher
import BeaconCore
import DaemonCore
import SystemCalls

extension Command {
    /// A command with declared options and positional arguments: `parse` reads both (the declared options give the
    /// help's OPTIONS).
    init(_ name: String, abstract: String, usage: String, description: @autoclosure @escaping @Sendable () -> String,
         options: @escaping @Sendable () -> [(flags: String, help: @Sendable () -> String)],
         exitStatus: @autoclosure @escaping @Sendable () -> String = "", parse: @escaping @Sendable (inout OptionParser) throws(UsageError) -> Invocation) {
        self.name = name
        self.abstract = abstract
        self.usage = usage
        self.description = description
        self.options = { options() + [Self.helpLine] }
        self.signals = { "" }
        self.exitStatus = exitStatus
        self.parse = parse
    }
}

extension CLI {
    static let irkCommand = Command(
        "irk", abstract: "Print a beacon's resolving key in the forms the gateways take.",
        usage: "beacond irk [--config PATH] [BEACON]",
        description: """
            The resolving key (IRK) of a beacon with address = "resolvable" (its resolving_key_file, made by beacond \
            gen-key) as Home Assistant's Private BLE Device and ESPHome take it (the hex as stored), as Theengs \
            Gateway's --identities takes it (byte-reversed, with an identity address to publish the beacon under), \
            and in base64 (Apple's keychain form, which Home Assistant also takes). Whoever holds the key can tell \
            the beacon's rotating addresses apart from everyone else's: give it to your gateways only.

            BEACON is the beacon's name, or its resolving_key_file as the config writes it or as a path; without it, \
            the config's one resolving key. Only a key the config names as resolving_key_file is printed: an \
            Eddystone-EID identity key, a bindkey or any other file is refused. The file is checked as run checks \
            it (a private regular file of 32 hex digits).
            """,
        options: { [("-c, --config PATH", { "Config file that names the key (default: \(defaultConfigPath))." })] },
        exitStatus: "0 printed, 64 usage error (or several resolving keys and no BEACON), 78 config error or not a resolving key of the config.",
        parse: { p throws(UsageError) in
            var path = defaultConfigPath
            var beacon: String?
            while !p.args.isEmpty {
                let a = p.args.removeFirst()
                if a == "-h" || a == "--help" { return .help("irk") }
                if a == "-c" || a == "--config" || a.hasPrefix("--config=") {
                    if let eq = a.firstIndex(of: "=") { path = String(a[a.index(after: eq)...]) } else { path = try p.value(for: a) }
                    continue
                }
                if a.hasPrefix("-") && a != "-" { throw p.unknown(a) }
                guard beacon == nil else { throw UsageError(message: "unexpected argument '\(a)'", command: "irk") }
                beacon = a
            }
            return .irk(configPath: path, beacon: beacon)
        })
}

enum ResolvingKeyCommand {
    /// `irk [--config PATH] [BEACON]`.
    static func run(configPath: String, beacon which: String?) -> ExitCode {
        disableCoreDumps()  // before any key is read, as run's loader does
        let config: BeaconConfiguration
        do { config = try ConfigLoader.parse(configPath).config } catch { return Tools.report(error) }
        // A file that is also another use's key is never printed (the loader refuses such a config too).
        let shared = ConfigLoader.sharedUses(config, configPath: configPath)
        if !shared.isEmpty { return Tools.report(ConfigError(path: configPath, diagnostics: shared)) }
        let ref: KeyFileReference
        switch choose(which, in: config, configPath: configPath) {
        case .success(let r): ref = r
        case .failure(let refusal):
            if refusal.usage {
                Output.err(UsageError(message: refusal.message, command: "irk").rendered)
                return .usage
            }
            Output.err("Error: \(refusal.message)\n")
            return .config
        }
        let key: IdentityKey
        switch ConfigLoader.readKey(ConfigLoader.keyPath(ref.file, configPath: configPath)) {
        case .success(let k): key = k
        case .failure(let why):
            let sentence = why.sentence(ref.file, in: ConfigLoader.keyDirectory(configPath: configPath), kind: ref.kind)
            let d = ConfigDiagnostic("'\(ref.key)' in \(config.beacons[ref.beacon].label): \(sentence)", at: ref.location)
            Output.err(d.formatted(path: configPath) + "\n")
            return .config
        }
        let f: ResolvingKeyForms
        do { f = try ResolvingKeyForms(irk: key.bytes, cipher: { k, block in try AES128.encrypt(block, key: k) }) } catch {
            Output.err("Error: AES-128 failed: \(error)\n")
            return .failure
        }
        Output.out("""
            The resolving key of \(describe(ref.beacon, config)) in \(configPath), for the gateways that are to resolve \
            the beacon's addresses (give it to them only):
              Home Assistant, Private BLE Device (IRK)   \(f.hex)
              ESPHome (irk:)                             \(f.hex)
              Theengs Gateway (--identities ADDR IRK)    --identities \(f.identityAddress) \(f.reversed)
              base64 (Apple's keychain form; Home Assistant takes it too)   \(f.base64)

            """)
        return .success
    }

    struct Refusal: Error, Equatable {
        var message: String
        /// A usage error (exit 64) rather than a config one (78).
        var usage = false
    }

    /// `[[beacon]] #2 (shelf)`.
    static func describe(_ beacon: Int, _ config: BeaconConfiguration) -> String {
        let b = config.beacons[beacon]
        return b.label + (b.name.map { " (\($0))" } ?? "")
    }

    /// The resolving key `which` names in the config: a beacon's name, a resolving_key_file as written, or a path to
    /// the same file (symlinks followed). A file the config names for another use is refused even when it is also
    /// a resolving key (the loader refuses such a config anyway).
    static func choose(_ which: String?, in config: BeaconConfiguration, configPath: String) -> Result<KeyFileReference, Refusal> {
        let refs = config.keyFiles
        let resolving = refs.filter { $0.key == "resolving_key_file" }
        func path(_ r: KeyFileReference) -> String { ConfigLoader.keyPath(r.file, configPath: configPath) }
        guard let which else {
            var distinct: [KeyFileReference] = []
            for r in resolving where !distinct.contains(where: { path($0) == path(r) }) { distinct.append(r) }
            guard distinct.count <= 1 else {
                let names = distinct.compactMap { config.beacons[$0.beacon].name }
                let byName = names.isEmpty ? "" : "by its beacon's name (\(names.joined(separator: ", "))) or "
                return .failure(Refusal(message: "\(configPath) names \(distinct.count) resolving keys: say which, \(byName)its file (\(distinct.map { Redaction.apply($0.file) }.joined(separator: ", ")))",
                                        usage: true))
            }
            guard let only = distinct.first else {
                return .failure(Refusal(message: "\(configPath) names no resolving key: a beacon with address = \"resolvable\" has one (resolving_key_file)"))
            }
            return .success(only)
        }
        if let k = config.beacons.firstIndex(where: { $0.name == which }) {
            if let r = resolving.first(where: { $0.beacon == k }) { return .success(r) }
            return .failure(Refusal(message: "'\(which)' is \(describe(k, config)), which has no resolving key (address = \"resolvable\" gives a beacon one)"))
        }
        let identity = FileIdentity(path: which)
        func names(_ r: KeyFileReference) -> Bool {
            if r.file == which { return true }
            guard let identity, let other = FileIdentity(path: path(r)) else { return false }
            return identity.device == other.device && identity.inode == other.inode
        }
        let shown = Redaction.apply(which)
        if let other = refs.first(where: { $0.key != "resolving_key_file" && names($0) }) {
            return .failure(Refusal(message: "\(shown) is the \(other.key) of \(describe(other.beacon, config)): \(other.kind), never printed"))
        }
        if let r = resolving.first(where: names) { return .success(r) }
        return .failure(Refusal(message: "\(shown) is not a resolving key of \(configPath): irk prints only a key the config names as resolving_key_file (by its beacon's name, the file as the config writes it, or its path)"))
    }
}
