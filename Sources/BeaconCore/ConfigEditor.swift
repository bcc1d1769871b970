// Edits a config file in place of its uuid values, keeping every other byte (comments, layout) as it was.
import BluetoothHCI

public enum ConfigEditor {
    /// What `settingUUIDs` did, for the line `gen-uuid --set` prints.
    public struct UUIDEdit: Sendable, Hashable {
        public var bytes: [UInt8]
        /// The UUID written: `fresh`, or the one the file's other beacons already share.
        public var uuid: BeaconUUID
        /// The labels of the beacons that got it ("[beacon]", "[[beacon]] #2").
        public var filled: [String]
        /// The UUID came from the file's other beacons (a beacon added to a provisioned site), not `fresh`.
        public var reusedSiteUUID: Bool
    }

    /// The file with every iBeacon and AltBeacon table that has no `uuid` given one, the same for all: `fresh`, or
    /// the UUID the file's other beacons share (a beacon added to a site joins its region). A `uuid = …` line goes
    /// right after each such table's header; nothing else changes. With `replacing`, every such table gets `fresh`,
    /// whether it had a uuid or not (a new region on purpose).
    ///
    /// Refuses (throws the diagnostics) a file with syntax errors, a file whose beacons all have their uuid already
    /// (a fleet shares one UUID: a --set run on every machine must not give each its own region), a file whose
    /// beacons carry several UUIDs (which one a new beacon joins is the user's to say), and a result that would not
    /// be a valid config.
    public static func settingUUIDs(_ fresh: BeaconUUID, in bytes: [UInt8], replacing: Bool = false) throws(ConfigDiagnostics) -> UUIDEdit {
        if let fileProblem = ConfigFile.check(bytes) { throw ConfigDiagnostics([fileProblem]) }
        let (document, syntax) = TOMLSubset.parse(bytes)
        guard syntax.isEmpty else { throw ConfigDiagnostics(syntax) }
        let tables = document.tables("beacon")
        guard !tables.isEmpty else {
            throw ConfigDiagnostics([ConfigDiagnostic("no [beacon] table to put the UUID in", at: SourceLocation(line: 1, column: 1), key: "beacon")])
        }
        let isArray = tables[0].isArrayElement
        // The tables whose format has a uuid (ibeacon, the default, and altbeacon), with the uuid entry they have.
        let uuidFormats = ConfigSchema.rows(.beacon, "uuid").flatMap(\.formats).map(\.rawValue)
        var candidates: [(label: String, table: TOMLTable, entry: TOMLEntry?)] = []
        for (n, table) in tables.enumerated() {
            var format = BeaconFormat.ibeacon.rawValue
            if let f = table.entries.first(where: { $0.key == "format" }), case .string(let s) = f.item.value { format = s }
            guard uuidFormats.contains(format) else { continue }
            candidates.append((isArray ? "[[beacon]] #\(n + 1)" : "[beacon]", table, table.entries.first { $0.key == "uuid" }))
        }
        guard !candidates.isEmpty else {
            throw ConfigDiagnostics([ConfigDiagnostic("no beacon in this file takes a uuid: only iBeacon and AltBeacon beacons have one",
                                                      at: tables[0].location, key: "beacon.uuid")])
        }
        func valid(_ e: TOMLEntry?) -> BeaconUUID? {
            guard let e, case .string(let text) = e.item.value else { return nil }
            return try? BeaconUUID(parsing: text)
        }
        // A uuid entry that is not a valid UUID is filled like a missing one (the user started and got it wrong).
        let toFill = replacing ? candidates : candidates.filter { valid($0.entry) == nil }
        let there = candidates.compactMap { valid($0.entry) }
        let distinct = there.reduce(into: [BeaconUUID]()) { if !$0.contains($1) { $0.append($1) } }
        if toFill.isEmpty {
            let c = candidates[0]
            let what = candidates.count == 1 ? "'uuid' in \(c.label) is already \(there[0])"
                : distinct.count == 1 ? "every beacon in this file has its uuid already (\(there[0]))"
                : "every beacon in this file has its uuid already"
            throw ConfigDiagnostics([ConfigDiagnostic("\(what); a fleet shares one UUID, so --set keeps it: pass --replace to give this file a new region",
                                                      at: c.entry!.item.location, key: "uuid", showing: distinct.map(\.description))])
        }
        var uuid = fresh
        var reused = false
        if !replacing, !there.isEmpty {
            guard distinct.count == 1 else {
                let first = candidates.first { valid($0.entry) != nil }!
                throw ConfigDiagnostics([ConfigDiagnostic("the beacons in this file have \(distinct.count) different UUIDs, so which region \(proseList(toFill.map(\.label))) should join is yours to say: write its uuid yourself, or pass --replace to give every beacon one new UUID",
                                                          at: first.entry!.item.location, key: "uuid")])
            }
            (uuid, reused) = (distinct[0], true)
        }
        let quoted = Array("\"\(uuid)\"".utf8)
        // From the end of the file backwards, so the byte offsets of the edits still to make stay right.
        var out = bytes
        for c in toFill.reversed() {
            if let entry = c.entry {
                out.replaceSubrange(entry.item.byteRange, with: quoted)
            } else {
                var insertion = Array("uuid = ".utf8) + quoted + [0x0A]
                let at = c.table.headerEnd
                if at == out.count, out.last != 0x0A { insertion.insert(0x0A, at: 0) }
                out.insert(contentsOf: insertion, at: at)
            }
        }
        _ = try BeaconConfiguration.parse(out)
        return UUIDEdit(bytes: out, uuid: uuid, filled: toFill.map(\.label), reusedSiteUUID: reused)
    }
}
