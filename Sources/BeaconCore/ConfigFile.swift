// Whole-file checks made before parsing: size, UTF-8, control characters. Each gives one clear error.
import BluetoothHCI
import SystemConditions

public enum ConfigFile {
    /// A beacond config is a few lines; anything this large is the wrong file.
    public static let maximumSize = 64 * 1024
    /// The documented example config as the package installs it (scripts/install.sh's $DOCDIR/beacond.conf.example
    /// with PREFIX=/usr; test_messages holds the two together).
    public static let example = "/usr/share/doc/beacond/beacond.conf.example"

    /// The one problem that stops the file from being read as text, or nil when it can be parsed.
    public static func check(_ bytes: [UInt8], maximumSize: Int = maximumSize, what: String = "a config") -> ConfigDiagnostic? {
        if bytes.count > maximumSize {
            return ConfigDiagnostic("file is \(bytes.count) bytes, more than the \(maximumSize / 1024) KiB \(what) may have; is this the right file?",
                                    at: nil)
        }
        var line = 1
        var column = 1
        var i = 0
        while i < bytes.count {
            let c = bytes[i]
            if c < 0x80 {
                // TOML allows tab, LF and CR before LF; every other control character (NUL first of all) is a mistake.
                let isCRLF = c == 0x0D && i + 1 < bytes.count && bytes[i + 1] == 0x0A
                if (c < 0x20 && c != 0x09 && c != 0x0A && !isCRLF) || c == 0x7F {
                    let name = c == 0 ? "NUL byte" : "control character \(hex8(c))"
                    return ConfigDiagnostic("file contains a \(name); a config must be plain text", at: SourceLocation(line: line, column: column))
                }
                if c == 0x0A { line += 1; column = 1 } else if !isCRLF { column += 1 }
                i += 1
                continue
            }
            let length = utf8SequenceLength(bytes, at: i)
            guard length > 0 else {
                return ConfigDiagnostic("file is not valid UTF-8 (byte \(hex8(c)))", at: SourceLocation(line: line, column: column))
            }
            i += length
            column += 1
        }
        return nil
    }

    /// Length of a well-formed UTF-8 sequence at `i` (Unicode Table 3-7), or 0.
    static func utf8SequenceLength(_ b: [UInt8], at i: Int) -> Int {
        func cont(_ k: Int, _ lo: UInt8 = 0x80, _ hi: UInt8 = 0xBF) -> Bool { k < b.count && b[k] >= lo && b[k] <= hi }
        let c = b[i]
        switch c {
        case 0xC2...0xDF: return cont(i + 1) ? 2 : 0
        case 0xE0: return cont(i + 1, 0xA0) && cont(i + 2) ? 3 : 0
        case 0xE1...0xEC, 0xEE...0xEF: return cont(i + 1) && cont(i + 2) ? 3 : 0
        case 0xED: return cont(i + 1, 0x80, 0x9F) && cont(i + 2) ? 3 : 0
        case 0xF0: return cont(i + 1, 0x90) && cont(i + 2) && cont(i + 3) ? 4 : 0
        case 0xF1...0xF3: return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0
        case 0xF4: return cont(i + 1, 0x80, 0x8F) && cont(i + 2) && cont(i + 3) ? 4 : 0
        default: return 0
        }
    }
}

extension ConfigError {
    /// Why the config file at `path` cannot be opened, as the one diagnostic of its error: what it is instead, or
    /// what to do when there is none.
    public init(opening path: String, _ c: SystemCondition) {
        let message = switch c.kind {
        case .isDirectory: "is a directory, not a config file"
        case .invalidArgument: "is not a regular file (a FIFO, a device or a socket), not a config file"
        case .notFound: "no such file (copy the example \(ConfigFile.example), then run 'beacond gen-uuid --set \(path)')"
        case .accessDenied: "permission denied reading the file"
        default: "cannot open the file: \(c)"
        }
        self.init(path: path, diagnostics: [ConfigDiagnostic(message, at: nil)])
    }

    /// `path` could not be opened for an edit (`gen-uuid --set`).
    public init(editing path: String, _ r: EditRefusal) {
        switch r {
        case .opening(let c): self.init(opening: path, c)
        case .notRegularFile: self.init(path: path, diagnostics: [ConfigDiagnostic("is not a regular file, not a config file", at: nil)])
        case .other(let text): self.init(path: path, diagnostics: [ConfigDiagnostic(text, at: nil)])
        }
    }
}
