// Edits a config file in place of one value, keeping every other byte (comments, layout) as it was.

public enum ConfigEditor {
    /// The file with `[beacon] uuid` set to `uuid`: the existing value replaced, or a `uuid = …` line added right
    /// after the `[beacon]` header. Refuses (returns the diagnostics) a file with syntax errors, and a result that
    /// would not be a valid config.
    /// A valid uuid that is there is kept unless `replacing`: a fleet shares one UUID, and a --set run on every
    /// machine must not give each its own region.
    public static func settingUUID(_ uuid: BeaconUUID, in bytes: [UInt8], replacing: Bool = false) throws(ConfigDiagnostics) -> [UInt8] {
        if let fileProblem = ConfigFile.check(bytes) { throw ConfigDiagnostics([fileProblem]) }
        let (document, syntax) = TOMLSubset.parse(bytes)
        guard syntax.isEmpty else { throw ConfigDiagnostics(syntax) }
        if let element = document.tables("beacon").first(where: \.isArrayElement) {
            // Which of several beacons is meant is the user's to say: do not guess.
            throw ConfigDiagnostics([ConfigDiagnostic("--set fills the uuid of a single [beacon]; this file has [[beacon]] tables: put a uuid into each yourself ('beacond gen-uuid --count N' prints N)",
                                                      at: element.location, key: "beacon")])
        }
        guard let beacon = document.table("beacon") else {
            throw ConfigDiagnostics([ConfigDiagnostic("no [beacon] table to put the UUID in", at: SourceLocation(line: 1, column: 1), key: "beacon")])
        }
        let quoted = Array("\"\(uuid)\"".utf8)
        var out = bytes
        if let entry = beacon.entries.first(where: { $0.key == "uuid" }) {
            if !replacing, case .string(let text) = entry.item.value, let there = try? BeaconUUID(parsing: text) {
                throw ConfigDiagnostics([ConfigDiagnostic("'uuid' in [beacon] is already \(there); a fleet shares one UUID, so --set keeps it: pass --replace to give this file a new region",
                                                          at: entry.item.location, key: "uuid")])
            }
            out.replaceSubrange(entry.item.byteRange, with: quoted)
        } else {
            var insertion = Array("uuid = ".utf8) + quoted + [0x0A]
            let at = beacon.headerEnd
            if at == bytes.count, bytes.last != 0x0A { insertion.insert(0x0A, at: 0) }
            out.insert(contentsOf: insertion, at: at)
        }
        _ = try BeaconConfiguration.parse(out)
        return out
    }
}
