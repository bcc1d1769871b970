// Reads a config file from disk (bounded, one clear error for I/O problems), validates it, and replaces it
// atomically for `gen-uuid --set` — from the one descriptor it was read through.
import AESCipher
import BeaconCore
import SystemCalls
import SystemConditions

enum ConfigLoader {
    private static func fail(_ path: String, _ message: String) -> ConfigError {
        ConfigError(path: path, diagnostics: [ConfigDiagnostic(message, at: nil)])
    }

    /// The file's bytes, refusing anything over the size limit without reading it all.
    static func readBytes(_ path: String, limit: Int = ConfigFile.maximumSize) throws(ConfigError) -> [UInt8] {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.openRegularFile(path) } catch { throw ConfigError(opening: path, error.condition) }
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
        do { file = try EditableFile(opening: path) } catch { throw ConfigError(editing: path, error.refusal) }
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
        let dir = keyDirectory(configPath: configPath, keys: keys)
        if keys == nil, let d = environment("CREDENTIALS_DIRECTORY"), !d.isEmpty {
            let loaded = "\(d)/\(keyCredential)_\(name)"
            if fileExists(loaded) { return loaded }
        }
        return dir + "/" + name
    }

    /// The directory a relative `identity_key_file` is looked up in (keyPath).
    static func keyDirectory(configPath: String, keys: String? = nil) -> String {
        if let keys { return keys.hasSuffix("/") && keys.count > 1 ? String(keys.dropLast()) : keys }
        if let d = environment("CREDENTIALS_DIRECTORY"), !d.isEmpty { return d }
        let dir = configPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return (dir.isEmpty ? (configPath.hasPrefix("/") ? "" : ".") : dir) + "/keys"
    }

    /// Reads every key file the config names (`BeaconConfiguration.keyFiles`: EID identity keys, the self-report's
    /// bindkey, resolving keys); each problem is a diagnostic at the key that names the file.
    static func loadKeys(_ config: inout BeaconConfiguration, configPath: String, keys: String? = nil) throws(ConfigError) {
        var problems = sharedUses(config, configPath: configPath, keys: keys)
        let files = config.keyFiles
        if !files.isEmpty { disableCoreDumps() }
        for ref in files {
            switch readKey(keyPath(ref.file, configPath: configPath, keys: keys)) {
            case .success(let key): config.setKey(key, for: ref)
            case .failure(let why):
                let sentence = why.sentence(ref.file, in: keyDirectory(configPath: configPath, keys: keys), kind: ref.kind)
                problems.append(ConfigDiagnostic("'\(ref.key)' in \(config.beacons[ref.beacon].label): \(sentence)", at: ref.location,
                                                 key: "beacon.\(ref.key)"))
            }
        }
        if !problems.isEmpty { throw ConfigError(path: configPath, diagnostics: problems) }
    }

    /// One file named for two uses (an EID identity key, a resolving key, a bindkey), by whatever names reach it
    /// (compared by device and inode): each use's key goes to different hands (the resolving key to Home Assistant
    /// and its backups), so a file holds one key for one use. The same file for two beacons of one use stays
    /// allowed: two resolvable beacons with one key are one device to the gateways. Said at the later use, never
    /// with the file's name (it may be a key).
    static func sharedUses(_ config: BeaconConfiguration, configPath: String, keys: String? = nil) -> [ConfigDiagnostic] {
        let refs = config.keyFiles
        let identities = refs.map { r in FileIdentity(path: keyPath(r.file, configPath: configPath, keys: keys)).map { "\($0.device):\($0.inode)" } }
        var problems: [ConfigDiagnostic] = []
        for (k, r) in refs.enumerated() {
            guard let first = refs.indices.first(where: { j in
                j < k && refs[j].key != r.key && (refs[j].file == r.file || (identities[j] != nil && identities[j] == identities[k]))
            }) else { continue }
            let o = refs[first]
            let line = o.location.map { " (line \($0.line))" } ?? ""
            problems.append(ConfigDiagnostic(
                "'\(r.key)' in \(config.beacons[r.beacon].label): the file it names is also the \(o.key) of \(config.beacons[o.beacon].label)\(line): a file holds one key for one use; \(r.kind) and \(o.kind) go to different hands (a resolving key to the gateways), so make each its own with 'beacond gen-key'",
                at: r.location, key: "beacon.\(r.key)"))
        }
        return problems
    }

    /// What is wrong with a key file (BeaconCore decides, from what reading it found).
    typealias KeyProblem = KeyFileProblem

    /// True for a file in $CREDENTIALS_DIRECTORY: systemd's copy, in a directory only the unit's user (and root) can
    /// enter. systemd 257 makes such files 0440, readable by the unit's own group (252 made them 0400).
    static func isCredential(_ path: String) -> Bool {
        guard let d = environment("CREDENTIALS_DIRECTORY"), !d.isEmpty else { return false }
        return path.hasPrefix(d.hasSuffix("/") ? d : d + "/")
    }

    /// A private regular file holding 32 hex digits (a trailing newline allowed): readable by its owner alone, or for
    /// a credential systemd passed, by no one else than the unit's user and group. The failure never contains the
    /// file's contents or its name.
    static func readKey(_ path: String) -> Result<IdentityKey, KeyProblem> {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.openRegularFile(path) } catch {
            return .failure(KeyFileProblem(opening: error.condition, isCredential: isCredential(path)))
        }
        let bytes: [UInt8]
        do {
            let st = try fd.status()
            let mode = UInt32(st.st_mode & 0o777)
            // Whoever owns a key file can change it (chmod, then write): only root and beacond's own user may.
            if st.st_uid != 0 && st.st_uid != processEffectiveUserID() {
                return .failure(.ownedByOther(owner: st.st_uid, me: processEffectiveUserID()))
            }
            if isCredential(path) {
                if mode & 0o007 != 0 { return .failure(.credentialReadable(mode: mode)) }
            } else if mode & 0o077 != 0 {
                return .failure(.readable(mode: mode))
            }
            bytes = try fd.readAll(limit: 4096)
        } catch {
            return .failure(.cannotRead(error.condition))
        }
        var text = bytes
        while let last = text.last, last == 0x0A || last == 0x0D || last == 0x20 || last == 0x09 { text.removeLast() }
        if let key = IdentityKey(hex: String(decoding: text, as: UTF8.self)) { return .success(key) }
        let isHex = { (b: UInt8) in (0x30...0x39).contains(b) || (0x41...0x46).contains(b) || (0x61...0x66).contains(b) }
        if !text.isEmpty, text.allSatisfy(isHex) { return .failure(.hexDigits(text.count)) }
        if bytes.count == 16 { return .failure(.rawBytes) }
        return .failure(.notAKey(bytes: bytes.count))
    }
}
