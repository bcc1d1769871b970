// Reads a config file from disk (bounded, one clear error for I/O problems), validates it, and replaces it
// atomically for `gen-uuid --set` — from the one descriptor it was read through.
import AESCipher
import BeaconCore
import SystemCalls

enum ConfigLoader {
    private static func fail(_ path: String, _ message: String) -> ConfigError {
        ConfigError(path: path, diagnostics: [ConfigDiagnostic(message, at: nil)])
    }

    private static func openError(_ path: String, _ e: SystemError) -> ConfigError {
        switch e.errno {
        case .isDirectory: fail(path, "is a directory, not a config file")
        case .invalidArgument: fail(path, "is not a regular file (a FIFO, a device or a socket), not a config file")
        case .noEntry: fail(path, "no such file (copy the example from the package's config/beacond.conf, then run 'beacond gen-uuid --set \(path)')")
        case .accessDenied: fail(path, "permission denied reading the file")
        default: fail(path, "cannot open the file: \(e.errno)")
        }
    }

    /// The file's bytes, refusing anything over the size limit without reading it all.
    static func readBytes(_ path: String, limit: Int = ConfigFile.maximumSize) throws(ConfigError) -> [UInt8] {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.openRegularFile(path) } catch { throw openError(path, error) }
        do { return try fd.readAll(limit: limit) } catch { throw fail(path, "cannot read the file: \(error.errno)") }
    }

    /// `keys`: where a relative identity_key_file is (check-config --keys), instead of the usual places.
    static func load(_ path: String, keys: String? = nil) throws(ConfigError) -> BeaconConfiguration {
        var config = try parse(path).config
        try loadKeys(&config, configPath: path, keys: keys)
        return config
    }

    /// The same, with the SHA-256 of the bytes it was made from (what `beacond status` shows and `reload` compares).
    static func loadWithDigest(_ path: String, keys: String? = nil) throws(ConfigError) -> (config: BeaconConfiguration, digest: String) {
        var (config, bytes) = try parse(path)
        try loadKeys(&config, configPath: path, keys: keys)
        return (config, SHA256.hex(bytes))
    }

    /// The file read and validated, its EID keys not read yet; and its bytes.
    static func parse(_ path: String) throws(ConfigError) -> (config: BeaconConfiguration, bytes: [UInt8]) {
        let bytes = try readBytes(path)
        do { return (try BeaconConfiguration.parse(bytes), bytes) } catch {
            throw ConfigError(path: path, diagnostics: error.items)
        }
    }

    /// Opens `path` once for an edit: the bytes and the handle that replaces exactly that file later. Symlinks are
    /// followed at this open only.
    static func openForEdit(_ path: String) throws(ConfigError) -> (EditableFile, [UInt8]) {
        let file: EditableFile
        do { file = try EditableFile(opening: path) } catch {
            switch error {
            case .system(let e) where e.call.hasPrefix("open("): throw openError(path, e)
            case .notRegularFile: throw fail(path, "is not a regular file, not a config file")
            default: throw fail(path, "\(error)")
            }
        }
        do { return (file, try file.read(limit: ConfigFile.maximumSize)) } catch {
            throw fail(path, "cannot read the file: \(error.errno)")
        }
    }

    /// Replaces the file opened by `openForEdit` with `bytes` (same directory, mode and owner; synced; renamed
    /// over the very file that was read, or nothing is written).
    static func replace(_ file: EditableFile, with bytes: [UInt8], beforeRename: () -> Void = {}) throws(ConfigError) {
        do { try file.replace(with: bytes, beforeRename: beforeRename) } catch { throw fail(file.path, "\(error)") }
    }
}

// MARK: Eddystone-EID identity keys

extension ConfigLoader {
    /// The credential ID the units load the key directory under (`LoadCredential=eid:/etc/beacond/keys`): systemd
    /// names each file of a directory credential `eid_FILENAME`.
    static let keyCredential = "eid"

    /// Where a relative `identity_key_file` is looked up: under systemd, in the credentials directory (the units'
    /// key directory, each file as `eid_NAME`, or a credential of the name itself); without, in the `keys` directory
    /// beside the config file (/etc/beacond/keys, the directory the units load). An explicit `keys` directory wins
    /// (a config checked before it is put in place, from wherever it was written).
    static func keyPath(_ name: String, configPath: String, keys: String? = nil) -> String {
        if name.hasPrefix("/") { return name }
        if let keys { return (keys.hasSuffix("/") ? keys : keys + "/") + name }
        if let d = environment("CREDENTIALS_DIRECTORY"), !d.isEmpty {
            let loaded = "\(d)/\(keyCredential)_\(name)"
            return fileExists(loaded) ? loaded : "\(d)/\(name)"
        }
        let dir = configPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return (dir.isEmpty ? (configPath.hasPrefix("/") ? "" : ".") : dir) + "/keys/\(name)"
    }

    /// Reads every key file the config names (`BeaconConfiguration.keyFiles`: EID identity keys, the self-report's
    /// bindkey, resolving keys); each problem is a diagnostic at the key that names the file.
    static func loadKeys(_ config: inout BeaconConfiguration, configPath: String, keys: String? = nil) throws(ConfigError) {
        var problems: [ConfigDiagnostic] = []
        let files = config.keyFiles
        if !files.isEmpty { disableCoreDumps() }
        for ref in files {
            let path = keyPath(ref.file, configPath: configPath, keys: keys)
            switch readKey(path, kind: ref.kind) {
            case .success(let key): config.setKey(key, for: ref)
            case .failure(let why):
                problems.append(ConfigDiagnostic("'\(ref.key)' in \(config.beacons[ref.beacon].label): \(path) \(why.text)", at: ref.location,
                                                 key: "beacon.\(ref.key)"))
            }
        }
        if !problems.isEmpty { throw ConfigError(path: configPath, diagnostics: problems) }
    }

    struct KeyProblem: Error { var text: String }

    /// True for a file in $CREDENTIALS_DIRECTORY: systemd's copy, in a directory only the unit's user (and root) can
    /// enter. systemd 257 makes such files 0440, readable by the unit's own group (252 made them 0400).
    static func isCredential(_ path: String) -> Bool {
        guard let d = environment("CREDENTIALS_DIRECTORY"), !d.isEmpty else { return false }
        return path.hasPrefix(d.hasSuffix("/") ? d : d + "/")
    }

    /// A private regular file holding 32 hex digits (a trailing newline allowed): readable by its owner alone, or for
    /// a credential systemd passed, by no one else than the unit's user and group. The failure completes the sentence
    /// "PATH …"; it never contains the file's contents.
    /// `kind` names the key in the messages.
    static func readKey(_ path: String, kind: String = "an Eddystone-EID identity key") -> Result<IdentityKey, KeyProblem> {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.openRegularFile(path) } catch {
            switch error.errno {
            case .noEntry where isCredential(path):
                // The unit's credentials are a copy made at its start, read-only: a key added since is not in it.
                let name = path.split(separator: "/").last.map { String($0.hasPrefix(keyCredential + "_") ? $0.dropFirst(keyCredential.count + 1) : $0) } ?? ""
                return .failure(KeyProblem(text: "is not among the keys the unit was started with: make it with 'sudo beacond gen-key /etc/beacond/keys/\(name)' if it is new, then restart the unit (systemctl restart; a reload does not read new keys)"))
            case .noEntry: return .failure(KeyProblem(text: "does not exist (make one with 'beacond gen-key \(path)')"))
            case .isDirectory, .invalidArgument: return .failure(KeyProblem(text: "is not a regular file"))
            case .accessDenied: return .failure(KeyProblem(text: "cannot be read by beacond (permission denied)"))
            default: return .failure(KeyProblem(text: "cannot be opened: \(error.errno)"))
            }
        }
        let bytes: [UInt8]
        do {
            let st = try fd.status()
            let mode = st.st_mode & 0o777
            // Whoever owns a key file can change it (chmod, then write): only root and beacond's own user may.
            if st.st_uid != 0 && st.st_uid != processEffectiveUserID() {
                return .failure(KeyProblem(text: "is owned by user \(st.st_uid), neither root nor the user beacond runs as (\(processEffectiveUserID())): whoever owns a key can change it; chown root it"))
            }
            if isCredential(path) {
                if mode & 0o007 != 0 {
                    return .failure(KeyProblem(text: "can be read by others (mode \(String(mode, radix: 8))): a credential must be private to the unit"))
                }
            } else if mode & 0o077 != 0 {
                return .failure(KeyProblem(text: "can be read by its group or by others (mode \(String(mode, radix: 8))): a key must be private to its owner; chmod 600 it"))
            }
            bytes = try fd.readAll(limit: 4096)
        } catch {
            return .failure(KeyProblem(text: "cannot be read: \(error.errno)"))
        }
        var text = bytes
        while let last = text.last, last == 0x0A || last == 0x0D || last == 0x20 || last == 0x09 { text.removeLast() }
        if let key = IdentityKey(hex: String(decoding: text, as: UTF8.self)) { return .success(key) }
        let isHex = { (b: UInt8) in (0x30...0x39).contains(b) || (0x41...0x46).contains(b) || (0x61...0x66).contains(b) }
        if !text.isEmpty, text.allSatisfy(isHex) {
            return .failure(KeyProblem(text: "holds \(text.count) hex digits; \(kind) is 128 bits: 32 hex digits"))
        }
        if bytes.count == 16 {
            return .failure(KeyProblem(text: "holds 16 raw bytes; write the key as 32 hex digits (as 'beacond gen-key' does)"))
        }
        return .failure(KeyProblem(text: "is not \(kind == "an Eddystone-EID identity key" ? "an identity key" : kind): expected 32 hex digits (as 'beacond gen-key' writes), found \(bytes.count) bytes of something else"))
    }
}
