// Reads a config file from disk (bounded, one clear error for I/O problems) and validates it.
import BeaconCore
import Glibc

enum ConfigLoader {
    /// The file's bytes, refusing anything over the size limit without reading it all.
    static func readBytes(_ path: String) throws(ConfigError) -> [UInt8] {
        func fail(_ message: String) -> ConfigError {
            ConfigError(path: path, diagnostics: [ConfigDiagnostic(message, at: nil)])
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let e = errno
            switch e {
            case ENOENT: throw fail("no such file (copy the example from the package's config/beacond.conf, then run 'beacond gen-uuid --set \(path)')")
            case EACCES: throw fail("permission denied reading the file")
            default: throw fail("cannot open the file: \(String(cString: strerror(e)))")
            }
        }
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { throw fail("is a directory, not a config file") }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while bytes.count <= ConfigFile.maximumSize {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw fail("cannot read the file: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }

    static func load(_ path: String) throws(ConfigError) -> BeaconConfiguration {
        let bytes = try readBytes(path)
        do {
            return try BeaconConfiguration.parse(bytes)
        } catch {
            throw ConfigError(path: path, diagnostics: error.items)
        }
    }

    /// Replaces `path` with `bytes` atomically: a temporary file in the same directory with the same mode and
    /// owner, fsync, rename over the original, fsync of the directory. Symlinks are followed to the real file.
    static func replaceAtomically(_ path: String, with bytes: [UInt8]) throws(ConfigError) {
        func fail(_ message: String) -> ConfigError {
            ConfigError(path: path, diagnostics: [ConfigDiagnostic(message, at: nil)])
        }
        func sysfail(_ call: String) -> ConfigError { fail("\(call): \(String(cString: strerror(errno)))") }
        guard let resolvedC = realpath(path, nil) else { throw sysfail("realpath") }
        let target = String(cString: resolvedC)
        free(resolvedC)
        var st = stat()
        guard stat(target, &st) == 0 else { throw sysfail("stat") }
        let dir = target.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let base = target.split(separator: "/").last.map(String.init) ?? "beacond.conf"
        var template = Array("\(dir.isEmpty ? "" : dir)/.\(base).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw sysfail("creating a temporary file in \(dir.isEmpty ? "/" : dir)") }
        let tmp = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var committed = false
        defer {
            if !committed { unlink(tmp) }
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                let e = sysfail("write")
                close(fd)
                throw e
            }
            offset += n
        }
        if fchmod(fd, st.st_mode & 0o7777) != 0 { let e = sysfail("fchmod"); close(fd); throw e }
        if fchown(fd, st.st_uid, st.st_gid) != 0 && errno != EPERM { let e = sysfail("fchown"); close(fd); throw e }
        if fsync(fd) != 0 { let e = sysfail("fsync"); close(fd); throw e }
        close(fd)
        guard rename(tmp, target) == 0 else { throw sysfail("rename") }
        committed = true
        let dfd = open(dir.isEmpty ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            _ = fsync(dfd)
            close(dfd)
        }
    }
}
