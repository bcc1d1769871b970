// Reads a config file from disk (bounded, one clear error for I/O problems), validates it, and replaces it
// atomically for `gen-uuid --set` — from the one descriptor it was read through.
import BeaconCore
import Glibc
import SystemCalls

enum ConfigLoader {
    private static func fail(_ path: String, _ message: String) -> ConfigError {
        ConfigError(path: path, diagnostics: [ConfigDiagnostic(message, at: nil)])
    }

    private static func openError(_ path: String, _ e: SystemError) -> ConfigError {
        switch e.errno {
        case .noEntry: fail(path, "no such file (copy the example from the package's config/beacond.conf, then run 'beacond gen-uuid --set \(path)')")
        case .accessDenied: fail(path, "permission denied reading the file")
        default: fail(path, "cannot open the file: \(e.errno)")
        }
    }

    /// The file's bytes, refusing anything over the size limit without reading it all.
    static func readBytes(_ path: String) throws(ConfigError) -> [UInt8] {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, O_RDONLY) } catch { throw openError(path, error) }
        do {
            if try fd.status().st_mode & S_IFMT == S_IFDIR { throw fail(path, "is a directory, not a config file") }
            return try fd.readAll(limit: ConfigFile.maximumSize)
        } catch let e as ConfigError { throw e } catch let e as SystemError {
            throw fail(path, "cannot read the file: \(e.errno)")
        } catch { fatalError("\(error)") }
    }

    static func load(_ path: String) throws(ConfigError) -> BeaconConfiguration {
        let bytes = try readBytes(path)
        do { return try BeaconConfiguration.parse(bytes) } catch {
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
