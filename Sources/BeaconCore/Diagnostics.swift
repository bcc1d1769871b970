// Config diagnostics in compiler style: PATH:LINE:COL: error: MESSAGE. A message never carries a key (Redaction):
// diagnostics reach stderr, the journal, STATUS and Ansible's output.

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
    /// What is wrong, with every run of 16 or more hex digits taken out (Redaction) however it was made.
    public var message: String {
        get { text }
        set { text = Redaction.apply(newValue, showing: shown) }
    }
    private var text: String
    /// What the message may repeat though Redaction would take it out: what goes on the air anyway.
    private var shown: [String]

    /// `showing`: values the message may repeat, each one that goes on the air (a beacon's parsed UUID).
    public init(_ message: String, at location: SourceLocation?, key: String? = nil, showing: [String] = []) {
        shown = showing
        text = Redaction.apply(message, showing: showing)
        self.location = location
        self.key = key
    }

    /// `PATH:LINE:COL: error: MESSAGE`, or `PATH: error: MESSAGE` for whole-file problems.
    public func formatted(path: String) -> String {
        if let location { return Redaction.apply("\(path):\(location.line):\(location.column): error: \(message)", showing: shown) }
        return Redaction.apply("\(path): error: \(message)", showing: shown)
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

    /// How many line numbers `lines` and `summary` name at most: what a refused file leaves in STATUS and the state
    /// file stays small whatever the file holds (5,000 errors made a 5.5 MB state file, review #43).
    public static let linesKept = 20

    /// The first `linesKept` lines with an error, in order, each once.
    public var lines: [Int] {
        var out: [Int] = []
        for d in diagnostics {
            guard let l = d.location?.line, !out.contains(l) else { continue }
            out.append(l)
            if out.count == Self.linesKept { break }
        }
        return out
    }

    /// What a one-line STATUS shows of a refused file: the path, how many errors and on which lines; never their text
    /// (`/etc/beacond/beacond.conf has 2 errors, on lines 4 and 9`). The journal and `check-config` have the text.
    public var summary: String {
        let n = diagnostics.count
        var places: [String] = []
        let lines = self.lines
        if !lines.isEmpty {
            var distinct = Set<Int>()
            for d in diagnostics { if let l = d.location?.line { distinct.insert(l) } }
            let list = lines.map(String.init)
            let named = distinct.count > lines.count ? list.joined(separator: ", ") + " and more"
                : list.count == 1 ? list[0] : list.dropLast().joined(separator: ", ") + " and " + list.last!
            places.append((lines.count == 1 && distinct.count == 1 ? "on line " : "on lines ") + named)
        }
        if diagnostics.contains(where: { $0.location == nil }) { places.append("in the file as a whole") }
        return Redaction.apply("\(path) has \(n) error\(n == 1 ? "" : "s")" + (places.isEmpty ? "" : ", " + places.joined(separator: " and ")))
    }

    public var description: String { diagnostics.map { $0.formatted(path: path) }.joined(separator: "\n") }
}

/// The mistakes found in some bytes, before a path is attached.
public struct ConfigDiagnostics: Error, Sendable, Hashable {
    public var items: [ConfigDiagnostic]
    public init(_ items: [ConfigDiagnostic]) { self.items = items }
}
