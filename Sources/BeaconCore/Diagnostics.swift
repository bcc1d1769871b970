// Config diagnostics in compiler style: PATH:LINE:COL: error: MESSAGE.

/// A 1-based line and column (columns count Unicode scalars, as editors do).
public struct SourceLocation: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
    public static func < (a: Self, b: Self) -> Bool { (a.line, a.column) < (b.line, b.column) }
    public var description: String { "\(line):\(column)" }
}

/// One mistake in a config file.
public struct ConfigDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// Where; nil for problems with the file as a whole (missing, too large, not UTF-8).
    public var location: SourceLocation?
    /// The key concerned, as `table.key`, when there is one.
    public var key: String?
    public var message: String

    public init(_ message: String, at location: SourceLocation?, key: String? = nil) {
        self.message = message
        self.location = location
        self.key = key
    }

    /// `PATH:LINE:COL: error: MESSAGE`, or `PATH: error: MESSAGE` for whole-file problems.
    public func formatted(path: String) -> String {
        if let location { return "\(path):\(location.line):\(location.column): error: \(message)" }
        return "\(path): error: \(message)"
    }

    public var description: String { formatted(path: "<config>") }
}

/// All the mistakes of one file, in file order.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var diagnostics: [ConfigDiagnostic]

    public init(path: String, diagnostics: [ConfigDiagnostic]) {
        self.path = path
        self.diagnostics = diagnostics
    }

    /// The first diagnostic, formatted: what a one-line STATUS can show.
    public var summary: String {
        guard let first = diagnostics.first else { return "\(path): error" }
        let more = diagnostics.count > 1 ? " (and \(diagnostics.count - 1) more)" : ""
        return first.formatted(path: path) + more
    }

    public var description: String { diagnostics.map { $0.formatted(path: path) }.joined(separator: "\n") }
}

/// The mistakes found in some bytes, before a path is attached.
public struct ConfigDiagnostics: Error, Sendable, Hashable {
    public var items: [ConfigDiagnostic]
    public init(_ items: [ConfigDiagnostic]) { self.items = items }
}
