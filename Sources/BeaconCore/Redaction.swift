// What may reach a log, STATUS or the state file never carries a key, in whatever spelling it was pasted: a run of
// 16 or more hex digits (64 bits or more: a whole key, or enough of one to matter), written whole or in groups
// separated by ':', '-' or spaces (UUID-style, colon-separated), or with a letter mistyped among them, becomes its length; so does a run of 20 or more
// base64 characters that mixes cases and digits as random text does (the form `beacond irk` prints, or hex with a
// typo). One place, so that a key pasted wherever a config has room for text (a misspelled key name, the next line,
// a file name) is covered too.
//
// What stays: a Bluetooth address (12 hex digits), a time (mixed separators), paths and names (they read as words:
// /etc/beacond/keys/shop7--door.irk, KitchenDoorBeaconNumber2). A UUID is 32 hex digits in groups, the shape of a
// 128-bit key written UUID-style, so it is taken out too: no diagnostic needs to repeat one (it points at its line).

public enum Redaction {
    /// The fewest hex digits that are taken out, in one run or in separated groups.
    public static let shortestRun = 16
    /// The fewest base64 characters (padding aside) that are taken out when they look random.
    public static let shortestBase64Run = 20

    /// `text` with each hex run of `shortestRun` or more digits replaced by `[N hex digits, not shown]`, then each
    /// random-looking base64 run of `shortestBase64Run` or more by `[N characters, not shown]`.
    public static func apply(_ text: String) -> String {
        guard !text.isEmpty else { return text }
        let scalars = Array(text.unicodeScalars)
        let hexDone = hexRuns(scalars)
        return String(String.UnicodeScalarView(base64Runs(hexDone ?? scalars) ?? hexDone ?? scalars))
    }

    /// `apply`, with each of `shown` kept as it is: a value that goes on the air (an iBeacon UUID beacond parsed as
    /// the beacon's) is no secret, and a message about it may repeat it.
    public static func apply(_ text: String, showing shown: [String]) -> String {
        guard let first = shown.first(where: { !$0.isEmpty }) else { return apply(text) }
        let rest = shown.filter { $0 != first }
        let parts = split(text, at: first)
        return parts.map { apply($0, showing: rest) }.joined(separator: first)
    }

    static func split(_ text: String, at separator: String) -> [String] {
        let t = Array(text.unicodeScalars), s = Array(separator.unicodeScalars)
        var parts: [String] = [], start = 0, i = 0
        while i + s.count <= t.count {
            if Array(t[i..<(i + s.count)]) == s {
                parts.append(String(String.UnicodeScalarView(t[start..<i])))
                i += s.count
                start = i
            } else {
                i += 1
            }
        }
        parts.append(String(String.UnicodeScalarView(t[start...])))
        return parts
    }

    /// The longest run of hex digits in `text` (unseparated).
    public static func longestRun(_ text: String) -> Int {
        var longest = 0, run = 0
        for c in text.unicodeScalars {
            run = c.properties.isASCIIHexDigit ? run + 1 : 0
            longest = max(longest, run)
        }
        return longest
    }

    static func isHex(_ c: Unicode.Scalar) -> Bool { c.properties.isASCIIHexDigit }

    /// Hex runs taken out, or nil when there is none to take out. A run is one group of hex digits, or groups of
    /// two or more joined by one separator, the same throughout (so two addresses in a row, or a date and a time,
    /// are not one run); a later group must end where a word ends ("dead" in "deadline" is not a group).
    static func hexRuns(_ s: [Unicode.Scalar]) -> [Unicode.Scalar]? {
        func isWordCharacter(_ k: Int) -> Bool { k < s.count && s[k].isASCII && (s[k].properties.isAlphabetic || isHex(s[k]) || s[k] == "_") }
        // A group's end and its typos: one letter between hex digits is taken as a mistyped digit, so that a key
        // with one typo is not two runs of 15 (issue #53).
        func groupEnd(_ k: Int) -> (end: Int, typos: Int) {
            var g = k, typos = 0
            while g < s.count {
                if isHex(s[g]) {
                    g += 1
                } else if g > k, g + 1 < s.count, s[g].isASCII, s[g].properties.isAlphabetic, isHex(s[g - 1]), isHex(s[g + 1]) {
                    g += 1
                    typos += 1
                } else {
                    break
                }
            }
            return (g, typos)
        }
        var out: [Unicode.Scalar] = []
        var changed = false
        var i = 0
        while i < s.count {
            guard isHex(s[i]) else { out.append(s[i]); i += 1; continue }
            let (first, firstTypos) = groupEnd(i)
            var end = first, typos = firstTypos, length = first - i
            var separator: Unicode.Scalar?
            while end + 1 < s.count, first - i >= 2, ":- ".unicodeScalars.contains(s[end]), separator == nil || separator == s[end] {
                let (next, nextTypos) = groupEnd(end + 1)
                guard next - (end + 1) >= 2, !isWordCharacter(next) else { break }
                separator = s[end]
                length += next - (end + 1)
                typos += nextTypos
                end = next
            }
            if length - typos >= shortestRun {
                let label = typos == 0 ? "\(length) hex digits" : "\(length) characters"
                out.append(contentsOf: "[\(label), not shown]".unicodeScalars)
                changed = true
                i = end
            } else {
                // Not a run from here: the first group stays, and a run may still start at the next.
                out.append(contentsOf: s[i..<first])
                i = first
            }
        }
        return changed ? out : nil
    }

    static func isBase64(_ c: Unicode.Scalar) -> Bool { c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "+" || c == "/") }

    /// Random-looking base64 runs taken out, or nil when there is none. Words, names and paths split into long
    /// pieces (`Kitchen`, `Door`, `7`); random text into pieces of one or two characters. A run of 20 or more is taken
    /// out when its pieces average under four characters, a path's lower-case directories (`/etc/beacond/keys/`)
    /// left out of the count. A key's base64 (22 characters and padding) escapes that about once in 2,000 draws;
    /// one with a '/' and without its padding and any '+' is read as a path, each part judged alone; the values of
    /// keys named `*key*` are never quoted at all (TOMLSecrets).
    static func base64Runs(_ s: [Unicode.Scalar]) -> [Unicode.Scalar]? {
        var out: [Unicode.Scalar] = []
        var changed = false
        var i = 0
        while i < s.count {
            guard isBase64(s[i]) else { out.append(s[i]); i += 1; continue }
            var end = i
            while end < s.count && isBase64(s[end]) { end += 1 }
            var padded = end
            while padded < s.count && padded - end < 2 && s[padded] == "=" { padded += 1 }
            let run = s[i..<end]
            // A run with a '/' but neither '+' nor padding reads as a path (a temporary directory's random name among
            // its directories: /tmp/tmp.0u0u/Tests/…): each of its parts is judged alone.
            if run.contains("/") && padded == end && !run.contains("+") {
                for (k, part) in run.split(separator: "/", omittingEmptySubsequences: false).enumerated() {
                    if k > 0 { out.append("/") }
                    if let taken = base64Runs(Array(part)) {
                        out.append(contentsOf: taken)
                        changed = true
                    } else {
                        out.append(contentsOf: part)
                    }
                }
                i = end
                continue
            }
            let words = run.split(separator: "/", omittingEmptySubsequences: false)
                .filter { !$0.isEmpty && !$0.allSatisfy { ("a"..."z").contains($0) } }
            let (characters, pieces) = words.reduce((0, 0)) { sum, w in
                let p = Self.pieces(w)
                return (sum.0 + p.characters, sum.1 + p.pieces)
            }
            if run.count >= shortestBase64Run && characters >= 12 && characters < pieces * 4 {
                out.append(contentsOf: "[\(padded - i) characters, not shown]".unicodeScalars)
                changed = true
                i = padded
            } else {
                out.append(contentsOf: run)
                i = end
            }
        }
        return changed ? out : nil
    }

    /// A run's letters and digits, and how many pieces they make as words do: digits, lower case, upper case, or
    /// one capital and the lower case after it (`Door`); `+` and `/` end a piece.
    static func pieces(_ run: ArraySlice<Unicode.Scalar>) -> (characters: Int, pieces: Int) {
        func kind(_ c: Unicode.Scalar) -> Int? {
            if ("0"..."9").contains(c) { return 0 }
            if ("a"..."z").contains(c) { return 1 }
            if ("A"..."Z").contains(c) { return 2 }
            return nil
        }
        var last: Int?, length = 0, characters = 0, pieces = 0
        for c in run {
            guard let k = kind(c) else { last = nil; continue }
            characters += 1
            let capitalized = last == 2 && k == 1 && length == 1
            if last != k && !capitalized {
                pieces += 1
                length = 0
            }
            length += 1
            last = k
        }
        return (characters, pieces)
    }
}
