// A strict subset of TOML 1.0: [table] headers, key = value, comments, basic and literal strings, integers, booleans.
// Every file this accepts is valid TOML; valid TOML outside the subset gets an error that says beacond does not take it.
// The parser works on UTF-8 bytes (all syntax is ASCII) and recovers at the next line, so one pass finds every error.

/// A value beacond accepts.
public enum TOMLValue: Sendable, Hashable {
    case string(String)
    case integer(Int64)
    case boolean(Bool)

    /// "a string", "an integer", "a boolean": for "must be X, found Y" messages.
    public var kindDescription: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .boolean: "a boolean"
        }
    }
}

/// A value with where it stands in the file.
public struct TOMLItem: Sendable, Hashable {
    public var value: TOMLValue
    /// Where the value starts (the opening quote of a string).
    public var location: SourceLocation
    /// The value's bytes in the source, quotes included.
    public var byteRange: Range<Int>
    /// For strings without escapes: the column of the first character inside the quotes, so a message can point at
    /// the exact offending character. Nil when escapes make source and content columns differ.
    public var contentColumn: Int?
}

public struct TOMLEntry: Sendable, Hashable {
    public var key: String
    public var keyLocation: SourceLocation
    public var item: TOMLItem
}

public struct TOMLTable: Sendable, Hashable {
    /// Nil for the keys before the first header.
    public var name: String?
    public var location: SourceLocation
    /// Byte offset just past the header line (where a new first key may be inserted).
    public var headerEnd: Int
    /// True for a second `[name]` of the same table: reported once, its keys ignored by the schema.
    public var isDuplicate: Bool
    /// Written `[[name]]`: one element of an array of tables (each such header starts a new element).
    public var isArrayElement = false
    public var entries: [TOMLEntry]
    /// Keys whose line had a syntax error: already reported, so not "missing" as well.
    public var failedKeys: [String] = []
}

public struct TOMLDocument: Sendable, Hashable {
    public var tables: [TOMLTable]

    /// The first (non-duplicate) table with this name.
    public func table(_ name: String) -> TOMLTable? {
        tables.first { $0.name == name && !$0.isDuplicate }
    }

    /// Every (non-duplicate) table with this name: one for `[name]`, each element for `[[name]]`.
    public func tables(_ name: String) -> [TOMLTable] {
        tables.filter { $0.name == name && !$0.isDuplicate }
    }
}

public enum TOMLSubset {
    /// Parses the bytes; returns what could be read and every syntax error found.
    public static func parse(_ bytes: [UInt8]) -> (document: TOMLDocument, diagnostics: [ConfigDiagnostic]) {
        var p = Parser(bytes)
        p.parseDocument()
        return (TOMLDocument(tables: p.tables), p.diagnostics)
    }
}

enum ASCII {
    static let tab: UInt8 = 0x09, lf: UInt8 = 0x0A, cr: UInt8 = 0x0D, space: UInt8 = 0x20
    static let quote: UInt8 = 0x22, hash: UInt8 = 0x23, apostrophe: UInt8 = 0x27, plus: UInt8 = 0x2B
    static let minus: UInt8 = 0x2D, dot: UInt8 = 0x2E, equals: UInt8 = 0x3D, backslash: UInt8 = 0x5C
    static let lbracket: UInt8 = 0x5B, rbracket: UInt8 = 0x5D, lbrace: UInt8 = 0x7B, underscore: UInt8 = 0x5F

    static func isBareKey(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == minus || c == underscore
    }
    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }
}

struct Parser {
    let b: [UInt8]
    var i = 0
    var line = 1
    var lineStart = 0
    var diagnostics: [ConfigDiagnostic] = []
    var tables: [TOMLTable]
    /// The first table of each name, and the keys of the current table (each lookup one hash, not a scan: a file
    /// of 16 MiB stays linear).
    var firstTable: [String: Int] = [:]
    var currentKeys: [String: Int] = [:]

    init(_ bytes: [UInt8]) {
        b = bytes
        // A UTF-8 byte order mark (Windows editors write one) is not content.
        if b.count >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF { i = 3; lineStart = 3 }
        tables = [TOMLTable(name: nil, location: SourceLocation(line: 1, column: 1), headerEnd: 0, isDuplicate: false, entries: [])]
    }

    // MARK: positions

    func location(_ offset: Int) -> SourceLocation {
        var column = 1
        var j = lineStart
        while j < offset && j < b.count {
            if b[j] & 0xC0 != 0x80 { column += 1 }  // count scalars, not bytes
            j += 1
        }
        return SourceLocation(line: line, column: column)
    }

    var here: SourceLocation { location(i) }

    func isLineEnd(_ j: Int) -> Bool {
        j >= b.count || b[j] == ASCII.lf || (b[j] == ASCII.cr && j + 1 < b.count && b[j + 1] == ASCII.lf)
    }

    mutating func error(_ message: String, at offset: Int) {
        diagnostics.append(ConfigDiagnostic(message, at: location(offset)))
    }

    mutating func skipWhitespace() {
        while i < b.count && (b[i] == ASCII.space || b[i] == ASCII.tab) { i += 1 }
    }

    /// Moves past the next newline (or to the end).
    mutating func skipLine() {
        while i < b.count && b[i] != ASCII.lf { i += 1 }
        if i < b.count { newline() }
    }

    mutating func newline() {
        i += 1
        line += 1
        lineStart = i
    }

    /// Advances one byte, keeping line numbers right across newlines.
    mutating func step() {
        if b[i] == ASCII.lf { newline() } else { i += 1 }
    }

    /// The text from `offset` to the end of the token, for quoting in messages (at most 20 characters).
    func snippet(_ offset: Int) -> String {
        var j = offset
        while j < b.count && !isLineEnd(j) && b[j] != ASCII.space && b[j] != ASCII.tab && j - offset < 20 { j += 1 }
        if j == offset && offset < b.count { j = offset + 1 }
        return String(decoding: b[offset..<min(j, b.count)], as: UTF8.self)
    }

    // MARK: grammar

    mutating func parseDocument() {
        while i < b.count {
            skipWhitespace()
            guard i < b.count else { break }
            let c = b[i]
            if c == ASCII.lf {
                newline()
            } else if c == ASCII.cr && i + 1 < b.count && b[i + 1] == ASCII.lf {
                i += 1
                newline()
            } else if c == ASCII.hash {
                skipLine()
            } else if c == ASCII.lbracket {
                if !parseTableHeader() { skipLine() }
            } else if ASCII.isBareKey(c) {
                if !parseKeyValue() { skipLine() }
            } else if c == ASCII.quote || c == ASCII.apostrophe {
                error("quoted keys are not supported by beacond; write the key bare, e.g. uuid = \"…\"", at: i)
                skipLine()
            } else {
                error("expected a key or a [table] header, found '\(snippet(i))'", at: i)
                skipLine()
            }
        }
    }

    mutating func readBareKey() -> String? {
        let start = i
        while i < b.count && ASCII.isBareKey(b[i]) { i += 1 }
        return i > start ? String(decoding: b[start..<i], as: UTF8.self) : nil
    }

    /// Whitespace, an optional comment, then the end of the line.
    mutating func expectLineEnd(after what: String) -> Bool {
        skipWhitespace()
        if i < b.count && b[i] == ASCII.hash {
            skipLine()
            return true
        }
        if i >= b.count { return true }
        if b[i] == ASCII.lf { newline(); return true }
        if b[i] == ASCII.cr && i + 1 < b.count && b[i + 1] == ASCII.lf { i += 1; newline(); return true }
        error("unexpected text after \(what): '\(snippet(i))' (use # for a comment)", at: i)
        return false
    }

    mutating func parseTableHeader() -> Bool {
        let location = here
        let isArray = i + 1 < b.count && b[i + 1] == ASCII.lbracket
        i += isArray ? 2 : 1
        skipWhitespace()
        if i < b.count && (b[i] == ASCII.quote || b[i] == ASCII.apostrophe) {
            error("quoted table names are not supported by beacond", at: i)
            return false
        }
        guard let name = readBareKey() else {
            error(isLineEnd(i) ? "expected a table name after '['" : "expected a table name after '[', found '\(snippet(i))'", at: i)
            return false
        }
        skipWhitespace()
        if i < b.count && b[i] == ASCII.dot {
            error("dotted table names ([a.b]) are not supported by beacond", at: i)
            return false
        }
        let close = isArray ? "]]" : "]"
        guard i + close.utf8.count <= b.count, Array(b[i..<(i + close.utf8.count)]) == Array(close.utf8) else {
            error("expected '\(close)' to close the table header \(isArray ? "[[" : "[")\(name)", at: i)
            return false
        }
        i += close.utf8.count
        let ok = expectLineEnd(after: "the table header")
        let headerEnd = ok ? i : b.count
        var duplicate = false
        if let first = firstTable[name].map({ tables[$0] }) {
            if first.isArrayElement != isArray {
                // TOML: a name is either one table or an array of tables, never both.
                let message = isArray
                    ? "[[\(name)]] after the table [\(name)] at line \(first.location.line): write every one as [[\(name)]]"
                    : "[\(name)] after the array of tables [[\(name)]] at line \(first.location.line): write every one as [[\(name)]]"
                diagnostics.append(ConfigDiagnostic(message, at: location, key: name))
                duplicate = true
            } else if !isArray {
                diagnostics.append(ConfigDiagnostic(
                    "duplicate table [\(name)] (first defined at line \(first.location.line))", at: location, key: name))
                duplicate = true
            }
        }
        var table = TOMLTable(name: name, location: location, headerEnd: headerEnd, isDuplicate: duplicate, entries: [])
        table.isArrayElement = isArray
        if firstTable[name] == nil { firstTable[name] = tables.count }
        tables.append(table)
        currentKeys = [:]
        if !ok { skipLine() }
        return true
    }

    mutating func parseKeyValue() -> Bool {
        let keyLocation = here
        guard let key = readBareKey() else { return false }
        let firstDiagnostic = diagnostics.count
        var valueStart = i, afterValue = Int.max
        defer {
            if Self.isSecret(key) {
                redactSecret(key, diagnosticsFrom: firstDiagnostic, valueStart: valueStart, strayFrom: afterValue)
            }
        }
        skipWhitespace()
        valueStart = i
        if i < b.count && b[i] == ASCII.dot {
            error("dotted keys (a.b = …) are not supported by beacond; use a [table] header", at: i)
            tables[tables.count - 1].failedKeys.append(key)
            return false
        }
        guard i < b.count && b[i] == ASCII.equals else {
            if isLineEnd(i) {
                error("expected '=' after key '\(key)'", at: i)
            } else {
                error("expected '=' after key '\(key)', found '\(snippet(i))'", at: i)
            }
            return false
        }
        i += 1
        skipWhitespace()
        valueStart = i
        let before = diagnostics.count
        let parsed = parseValue(key: key)
        afterValue = diagnostics.count
        nameKey(key, inDiagnosticsFrom: before)
        guard let item = parsed else {
            tables[tables.count - 1].failedKeys.append(key)
            return false
        }
        let table = tables.count - 1
        if let first = currentKeys[key].map({ tables[table].entries[$0] }) {
            let where_ = tables[table].name.map { " in [\($0)]" } ?? ""
            diagnostics.append(ConfigDiagnostic(
                "duplicate key '\(key)'\(where_) (first set at line \(first.keyLocation.line))", at: keyLocation, key: key))
        } else {
            currentKeys[key] = tables[table].entries.count
            tables[table].entries.append(TOMLEntry(key: key, keyLocation: keyLocation, item: item))
        }
        if !expectLineEnd(after: "the value") {
            skipLine()
        }
        return true
    }

    /// Every mistake found in a value names its key (and table), whatever the kind of mistake: "'interval_ms' in
    /// [advertising]: floating-point values are not supported …".
    mutating func nameKey(_ key: String, inDiagnosticsFrom start: Int) {
        guard start < diagnostics.count else { return }
        let table = tables[tables.count - 1].name
        let prefix = "'\(key)'" + (table.map { " in [\($0)]" } ?? "") + ": "
        for k in start..<diagnostics.count where diagnostics[k].key == nil {
            diagnostics[k].message = prefix + diagnostics[k].message
            diagnostics[k].key = table.map { "\($0).\(key)" } ?? key
        }
    }

    mutating func parseValue(key: String) -> TOMLItem? {
        let start = i
        let location = here
        guard !isLineEnd(i) else {
            error("missing value after '=' for key '\(key)'", at: i)
            return nil
        }
        let c = b[i]
        func item(_ v: TOMLValue, contentColumn: Int? = nil) -> TOMLItem {
            TOMLItem(value: v, location: location, byteRange: start..<i, contentColumn: contentColumn)
        }
        switch c {
        case ASCII.quote, ASCII.apostrophe:
            if i + 2 < b.count && b[i + 1] == c && b[i + 2] == c {
                error("multi-line strings are not supported by beacond", at: i)
                skipMultilineString(delimiter: c)
                return nil
            }
            let contentColumn = location.column + 1
            guard let (s, escaped) = c == ASCII.quote ? parseBasicString() : parseLiteralString() else { return nil }
            return item(.string(s), contentColumn: escaped ? nil : contentColumn)
        case ASCII.lbracket:
            error("arrays are not supported by beacond; it takes a single value", at: i)
            skipArray()
            return nil
        case ASCII.lbrace:
            error("inline tables are not supported by beacond; use a [table] header", at: i)
            return nil
        default:
            break
        }
        // A bare token: boolean, number, date, or a mistake such as an unquoted string.
        while i < b.count && !isLineEnd(i) && b[i] != ASCII.space && b[i] != ASCII.tab && b[i] != ASCII.hash
            && b[i] != 0x2C && b[i] != ASCII.rbracket && b[i] != 0x7D
        {
            i += 1
        }
        let token = Array(b[start..<i])
        let text = String(decoding: token, as: UTF8.self)
        if text == "true" { return item(.boolean(true)) }
        if text == "false" { return item(.boolean(false)) }
        if let first = token.first, ASCII.isDigit(first) || first == ASCII.plus || first == ASCII.minus
            || text == "inf" || text == "nan"
        {
            switch Self.integer(token) {
            case .success(let v): return item(.integer(v))
            case .failure(let e):
                error(e.message, at: start)
                return nil
            }
        }
        error("expected a value (a \"string\", an integer, true or false), found '\(snippet(start))'"
              + (text.isEmpty ? "" : "; strings must be quoted"), at: start)
        return nil
    }

    /// TOML integers: decimal with optional sign and `_` between digits, or `0x` hex. Other numbers are named.
    static func integer(_ t: [UInt8]) -> Result<Int64, NumberError> {
        let text = String(decoding: t, as: UTF8.self)
        if isDateOrTime(t) { return .failure("dates and times are not supported by beacond") }
        var digits = t[...]
        var negative = false
        if let s = digits.first, s == ASCII.plus || s == ASCII.minus {
            negative = s == ASCII.minus
            digits = digits.dropFirst()
        }
        let body = String(decoding: digits, as: UTF8.self)
        if body == "inf" || body == "nan" {
            return .failure("floating-point values are not supported by beacond; expected an integer, found '\(text)'")
        }
        if body.hasPrefix("0x") || body.hasPrefix("0X") {
            if t.first == ASCII.plus || t.first == ASCII.minus {
                return .failure("a sign is not allowed on a hex integer: '\(text)'")
            }
            if body.hasPrefix("0X") { return .failure("hex integers start with a lowercase 0x: '\(text)'") }
            return accumulate(digits.dropFirst(2), radix: 16, negative: false, text: text)
        }
        if body.hasPrefix("0o") || body.hasPrefix("0b") {
            return .failure("octal and binary integers are not supported by beacond; use decimal or 0x hex: '\(text)'")
        }
        if digits.contains(where: { $0 == ASCII.dot || $0 == 0x65 || $0 == 0x45 }) {
            return .failure("floating-point values are not supported by beacond; expected an integer, found '\(text)'")
        }
        if digits.count > 1 && digits.first == 0x30 {
            return .failure("leading zeros are not allowed in integers: '\(text)'")
        }
        return accumulate(digits, radix: 10, negative: negative, text: text)
    }

    static func accumulate(_ digits: ArraySlice<UInt8>, radix: Int64, negative: Bool, text: String) -> Result<Int64, NumberError> {
        guard !digits.isEmpty else { return .failure("expected digits in '\(text)'") }
        var value: Int64 = 0
        var previousWasDigit = false
        for c in digits {
            if c == ASCII.underscore {
                guard previousWasDigit else { return .failure("an underscore in a number must stand between digits: '\(text)'") }
                previousWasDigit = false
                continue
            }
            let d: UInt8? = radix == 16 ? ASCII.hexValue(c) : (ASCII.isDigit(c) ? c - 0x30 : nil)
            guard let d else { return .failure("'\(text)' is not a valid integer") }
            // Accumulate negatively so Int64.min parses too.
            let (m, o1) = value.multipliedReportingOverflow(by: radix)
            let (s, o2) = m.subtractingReportingOverflow(Int64(d))
            guard !o1 && !o2 else { return .failure("integer '\(text)' does not fit in 64 bits") }
            value = s
            previousWasDigit = true
        }
        guard previousWasDigit else { return .failure("an underscore in a number must stand between digits: '\(text)'") }
        if negative { return .success(value) }
        guard value != Int64.min else { return .failure("integer '\(text)' does not fit in 64 bits") }
        return .success(-value)
    }

    static func isDateOrTime(_ t: [UInt8]) -> Bool {
        func digitsAt(_ r: Range<Int>) -> Bool { r.upperBound <= t.count && t[r].allSatisfy(ASCII.isDigit) }
        if digitsAt(0..<4) && t.count > 4 && t[4] == ASCII.minus && digitsAt(5..<7) { return true }
        if digitsAt(0..<2) && t.count > 2 && t[2] == 0x3A { return true }
        return false
    }

    /// A basic string: escapes as TOML defines them. Returns the content and whether it had escapes.
    mutating func parseBasicString() -> (String, Bool)? {
        let open = i
        i += 1
        var out: [UInt8] = []
        var escaped = false
        while true {
            guard !isLineEnd(i) else {
                error("unterminated string (missing closing \")", at: open)
                return nil
            }
            let c = b[i]
            if c == ASCII.quote { i += 1; break }
            if c == ASCII.backslash {
                escaped = true
                let at = i
                i += 1
                // A backslash ending the line (TOML's line-ending escape exists in multi-line strings only): the
                // string ends unterminated here, and the next line stays a line of its own.
                guard !isLineEnd(i) else {
                    error("unterminated string (missing closing \")", at: open)
                    return nil
                }
                let e = b[i]
                i += 1
                switch e {
                case 0x62: out.append(0x08)  // \b
                case 0x74: out.append(0x09)  // \t
                case 0x6E: out.append(0x0A)  // \n
                case 0x66: out.append(0x0C)  // \f
                case 0x72: out.append(0x0D)  // \r
                case ASCII.quote: out.append(ASCII.quote)
                case ASCII.backslash: out.append(ASCII.backslash)
                case 0x75, 0x55:  // \uXXXX, \UXXXXXXXX
                    let n = e == 0x75 ? 4 : 8
                    var v: UInt32 = 0
                    var good = i + n <= b.count
                    if good {
                        for k in 0..<n {
                            guard let h = ASCII.hexValue(b[i + k]) else { good = false; break }
                            v = v << 4 | UInt32(h)
                        }
                    }
                    guard good, let scalar = Unicode.Scalar(v) else {
                        error("invalid \\\(e == 0x75 ? "u" : "U") escape: expected \(n) hex digits naming a Unicode scalar value", at: at)
                        return nil
                    }
                    i += n
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    error("invalid escape sequence '\\\(String(decoding: [e], as: UTF8.self))' in string"
                          + " (valid: \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX)", at: at)
                    return nil
                }
                continue
            }
            if (c < 0x20 && c != ASCII.tab) || c == 0x7F {
                error("control characters must be escaped in strings", at: i)
                return nil
            }
            out.append(c)
            i += 1
        }
        return (String(decoding: out, as: UTF8.self), escaped)
    }

    /// A literal string: no escapes at all.
    mutating func parseLiteralString() -> (String, Bool)? {
        let open = i
        i += 1
        let start = i
        while !isLineEnd(i) && b[i] != ASCII.apostrophe {
            if (b[i] < 0x20 && b[i] != ASCII.tab) || b[i] == 0x7F {
                error("control characters are not allowed in strings", at: i)
                return nil
            }
            i += 1
        }
        guard i < b.count && b[i] == ASCII.apostrophe else {
            error("unterminated string (missing closing ')", at: open)
            return nil
        }
        let s = String(decoding: b[start..<i], as: UTF8.self)
        i += 1
        return (s, false)
    }

    /// Skips to just past the closing triple delimiter so the lines inside do not produce errors of their own.
    mutating func skipMultilineString(delimiter: UInt8) {
        i += 3
        while i < b.count {
            if b[i] == delimiter && i + 2 < b.count && b[i + 1] == delimiter && b[i + 2] == delimiter {
                i += 3
                return
            }
            if delimiter == ASCII.quote && b[i] == ASCII.backslash && i + 1 < b.count && b[i + 1] != ASCII.lf {
                i += 2
                continue
            }
            step()
        }
    }

    /// Skips a (possibly multi-line) array, honouring strings and comments inside it.
    mutating func skipArray() {
        var depth = 0
        while i < b.count {
            let c = b[i]
            if c == ASCII.lbracket {
                depth += 1
            } else if c == ASCII.rbracket {
                depth -= 1
                if depth == 0 { i += 1; return }
            } else if c == ASCII.quote || c == ASCII.apostrophe {
                i += 1
                while !isLineEnd(i) && b[i] != c {
                    if c == ASCII.quote && b[i] == ASCII.backslash && !isLineEnd(i + 1) { i += 1 }
                    i += 1
                }
                if i < b.count && b[i] == c { i += 1 }
                continue
            } else if c == ASCII.hash {
                while !isLineEnd(i) { i += 1 }
                continue
            }
            step()
        }
    }
}

/// Why a number token is not an integer beacond accepts.
struct NumberError: Error, ExpressibleByStringInterpolation {
    let message: String
    init(stringLiteral value: String) { message = value }
}
