// A config value under a key-like name is never quoted in a parse error: it may be a key pasted where a path or a
// quoted key belongs. Its messages say the value's kind and length only.

extension Parser {
    /// Keys whose values may be secrets, a key pasted where a path or a quoted key belongs: any name with "key" in it, spelt right or not: identity_key, identity_key_file, resolving_key_file,
    /// bindkey_file, a misspelling of one (`resolving-key-file`), or a name beacond does not know (issue #53: only
    /// identity_key* was covered, and a resolving key's base64 reached the journal).
    static func isSecret(_ key: String) -> Bool {
        let k = Array(key.lowercased().utf8), word = Array("key".utf8)
        return k.count >= word.count && (0...(k.count - word.count)).contains { Array(k[$0..<($0 + word.count)]) == word }
    }

    /// A mistake in a secret's value never quotes it: its messages reach stderr, the journal, STATUS and Ansible's
    /// output. Each becomes one message with the value's kind and length only (and any stray text after it).
    mutating func redactSecret(_ key: String, diagnosticsFrom first: Int, valueStart: Int, strayFrom stray: Int) {
        guard first < diagnostics.count else { return }
        var end = valueStart
        var start = valueStart
        if end < b.count && (b[end] == ASCII.quote || b[end] == ASCII.apostrophe) {
            let q = b[end]
            start += 1
            end += 1
            while end < b.count && !isLineEnd(end) && b[end] != q { end += b[end] == ASCII.backslash && q == ASCII.quote ? 2 : 1 }
            end = min(end, b.count)
        } else {
            while end < b.count && !isLineEnd(end) && b[end] != ASCII.space && b[end] != ASCII.tab && b[end] != ASCII.hash { end += 1 }
        }
        let value = b[start..<end]
        let kind = !value.isEmpty && value.allSatisfy({ ASCII.hexValue($0) != nil })
            ? "\(value.count) hex digits" : "\(value.count) characters"
        let table = tables[tables.count - 1].name
        let prefix = "'\(key)'" + (table.map { " in [\($0)]" } ?? "") + ": "
        let hint = key == "identity_key"
            ? "write the key as a quoted string of 32 hex digits: identity_key = \"…\""
            : key.hasSuffix("file")
            ? "write a quoted path: \(key) = \"/etc/beacond/keys/…\" (the key itself goes into that file)"
            : "write the value as a quoted string"
        for k in first..<diagnostics.count {
            let what = k >= stray ? "the value (\(kind)) is followed by other text" : "the value (\(kind)) is not valid here"
            diagnostics[k].message = prefix + what + "; it is not shown, since it may be a key; " + hint
            diagnostics[k].key = table.map { "\($0).\(key)" } ?? key
        }
    }
}
