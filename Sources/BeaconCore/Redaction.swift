// What may reach a log, STATUS or the state file never carries an Eddystone-EID identity key: every run of 16 or more
// hex digits (64 bits or more: a whole key, or enough of one to matter) becomes its length. One place, so that a key
// pasted wherever a config has room for text (a misspelled key name, the next line, a file name) is covered too.

public enum Redaction {
    /// The shortest run of hex digits that is taken out.
    public static let shortestRun = 16

    /// `text` with each run of `shortestRun` or more hex digits replaced by `[N hex digits, not shown]`.
    public static func apply(_ text: String) -> String {
        guard longestRun(text) >= shortestRun else { return text }
        var out = String.UnicodeScalarView()
        var run = String.UnicodeScalarView()
        func flush() {
            if run.count >= shortestRun {
                out.append(contentsOf: "[\(run.count) hex digits, not shown]".unicodeScalars)
            } else {
                out.append(contentsOf: run)
            }
            run.removeAll()
        }
        for c in text.unicodeScalars {
            if c.properties.isASCIIHexDigit { run.append(c) } else {
                flush()
                out.append(c)
            }
        }
        flush()
        return String(out)
    }

    /// The longest run of hex digits in `text`.
    public static func longestRun(_ text: String) -> Int {
        var longest = 0, run = 0
        for c in text.unicodeScalars {
            run = c.properties.isASCIIHexDigit ? run + 1 : 0
            longest = max(longest, run)
        }
        return longest
    }
}
