// The config file's checks: each key's value against its schema row (ConfigSchema), each beacon's table, and the
// rules between keys and beacons (addresses, keys, backends). Configuration.parse runs it; every mistake is a
// diagnostic with file:line:col and the key, never a crash.
import BluetoothHCI

/// A value that passed its schema row's type check.
enum ConfigValue {
    case integer(Int64)
    case boolean(Bool)
    case string(String)
    case bytes([UInt8])
    case uuid(BeaconUUID)
    case format(BeaconFormat)
    case logLevel(LogLevel)
    case device(DeviceSpec)
    case address(BeaconAddressSetting)
}

/// Checks a parsed TOML document against the schema's rows and the rules between keys, gathering every mistake with
/// its file:line:col and key; the configuration when there is none.
struct Validator {
    var diagnostics: [ConfigDiagnostic] = []

    mutating func fail(_ message: String, at location: SourceLocation, key: String) {
        diagnostics.append(ConfigDiagnostic(message, at: location, key: key))
    }

    /// An `interval_ms` the schema's row let through (ConfigSchema.interval is AdvertisingInterval's range, so this
    /// always succeeds); said as an error, never replaced by a default, should the two ever part.
    mutating func interval(_ ms: Int64, _ e: TOMLEntry, key: String) -> AdvertisingInterval? {
        guard let i = AdvertisingInterval(milliseconds: Int(ms)) else {
            fail("'\(e.key)' cannot be \(ms) ms: an advertising interval is \(AdvertisingInterval.millisecondRange.lowerBound) to \(AdvertisingInterval.millisecondRange.upperBound) ms", at: e.item.location, key: key)
            return nil
        }
        return i
    }

    /// What one beacon table gave.
    enum BeaconResult { case beacon(ConfiguredBeacon), unprovisioned(SourceLocation), invalid }

    /// One `[beacon]` table or `[[beacon]]` element. `label` names it in messages ("[beacon]", "[[beacon]] #2").
    mutating func validateBeacon(_ table: TOMLTable, label: String) -> BeaconResult {
        let before = diagnostics.count
        var uuid: BeaconUUID?
        var major: UInt16?
        var minor: UInt16?
        var measuredPower: Int8?
        var companyID = AltBeacon.defaultCompanyID
        var reserved: UInt8 = 0
        var namespace: [UInt8]?
        var instance: [UInt8]?
        var interval: AdvertisingInterval?
        var name: String?
        var keyFile: (String, SourceLocation)?
        var exponent = EIDBeacon.defaultExponent
        var bindkeyFile: (String, SourceLocation)?
        var resolvingKeyFile: (String, SourceLocation)?
        var address: BeaconAddressSetting?
        var addressLocation: SourceLocation?
        // The format decides which keys belong; nil when `format` itself is wrong.
        var format: BeaconFormat? = .ibeacon
        if let entry = table.entries.first(where: { $0.key == "format" }) {
            if case .format(let f)? = check(entry.item, ConfigSchema.rows(.beacon, "format")[0], "'format' in \(label)", format: nil) {
                format = f
            } else {
                format = nil
            }
        }
        for e in table.entries {
            let key = "beacon.\(e.key)"
            let what = "'\(e.key)' in \(label)"
            let rows = ConfigSchema.rows(.beacon, e.key)
            guard !rows.isEmpty else {
                unknownKey(e, in: .beacon, label: label)
                continue
            }
            guard let row = format.map({ f in rows.first { $0.formats.contains(f) } }) ?? rows.first else {
                let owners = BeaconFormat.allCases.filter { f in rows.contains { $0.formats.contains(f) } }.map { "\"\($0.rawValue)\"" }
                fail("\(what) belongs to format\(owners.count == 1 ? "" : "s") \(proseList(owners)), not to this beacon's format \"\(format!.rawValue)\"",
                     at: e.keyLocation, key: key)
                continue
            }
            if e.key == "format" { continue }  // read above
            if e.key == "address", format?.addressRule.takesAddressKey == false {
                fail("\(what) cannot be set: an Eddystone-EID beacon goes out from a new non-resolvable private address with every new EID, or the address would link its EIDs",
                     at: e.keyLocation, key: key)
                continue
            }
            guard let value = check(e.item, row, what, format: format) else { continue }
            if format?.addressRule.address == .fixed, case .address(.policy(let p)) = value, p != .static {
                fail("\(what) cannot be \"\(p.rawValue)\": Home Assistant keys a BTHome device on its address (and an encrypted frame's nonce holds it), so the self-report goes out from a fixed one; use \"static\" (its default) or a random static address",
                     at: e.item.location, key: key)
                continue
            }
            // Each key's meaning.
            switch (e.key, value) {
            case ("uuid", .uuid(let v)): uuid = v
            case ("major", .integer(let v)): major = UInt16(v)
            case ("minor", .integer(let v)): minor = UInt16(v)
            case ("measured_power", .integer(let v)): measuredPower = Int8(v)
            case ("company_id", .integer(let v)): companyID = UInt16(v)
            case ("reserved", .integer(let v)): reserved = UInt8(v)
            case ("namespace", .bytes(let v)): namespace = v
            case ("instance", .bytes(let v)): instance = v
            case ("identity_key_file", .string(let v)): keyFile = (v, e.item.location)
            case ("rotation_exponent", .integer(let v)): exponent = UInt8(v)
            case ("bindkey_file", .string(let v)): bindkeyFile = (v, e.item.location)
            case ("resolving_key_file", .string(let v)): resolvingKeyFile = (v, e.item.location)
            case ("interval_ms", .integer(let v)): interval = self.interval(v, e, key: key)
            case ("name", .string(let v)): name = v
            case ("address", .address(let v)):
                address = v
                addressLocation = e.item.location
            default: preconditionFailure("the schema lists \(key) but the validator gives it no meaning")
            }
        }

        let present = Set(table.entries.map(\.key) + table.failedKeys)
        var lacksUUID = false
        var missing: [String] = []
        if let format {
            for row in ConfigSchema.keys where row.table == .beacon && row.formats.contains(format) && !present.contains(row.name) {
                switch row.defaultValue {
                case .required: missing.append(row.name)
                // No uuid yet is a fresh install or a beacon just added, not a mistake: that beacon waits for one.
                case .provisioning: lacksUUID = true
                default: break
                }
            }
        }
        let suffix = format == .ibeacon ? "" : " (format \"\(format?.rawValue ?? "")\")"
        for key in missing {
            fail("missing required key '\(key)' in \(label)\(suffix)", at: table.location, key: "beacon.\(key)")
        }

        guard diagnostics.count == before, let format else { return .invalid }
        if lacksUUID { return .unprovisioned(table.location) }
        let beacon: Beacon
        switch format {
        case .ibeacon, .altbeacon:
            guard let major, let minor, let uuid else { return .invalid }
            let power = measuredPower ?? IBeacon.defaultMeasuredPower
            beacon = format == .ibeacon ? .iBeacon(IBeacon(uuid: uuid, major: major, minor: minor, measuredPower: power))
                : .altBeacon(AltBeacon(uuid: uuid, major: major, minor: minor, referenceRSSI: power, companyID: companyID, reserved: reserved))
        case .eddystoneUID:
            guard let namespace, let instance,
                  let uid = EddystoneUID(namespace: namespace, instance: instance, txPowerAt0m: measuredPower ?? EddystoneUID.defaultTxPowerAt0m)
            else { return .invalid }
            beacon = .eddystoneUID(uid)
        case .eddystoneTLM:
            beacon = .eddystoneTLM(EddystoneTLM(batteryMillivolts: 0, temperature: nil, advertisingCount: 0, uptimeTenths: 0))
        case .eddystoneEID:
            guard let (file, at) = keyFile else { return .invalid }
            beacon = .eddystoneEID(EIDBeacon(keyFile: file, keyFileLocation: at, exponent: exponent,
                                             txPowerAt0m: measuredPower ?? EddystoneUID.defaultTxPowerAt0m))
        case .bthome:
            beacon = .bthome(BTHomeBeacon(bindkeyFile: bindkeyFile?.0, bindkeyFileLocation: bindkeyFile?.1))
        }
        var configured = ConfiguredBeacon(beacon, interval: interval, name: name, address: address, location: table.location,
                                          addressLocation: addressLocation)
        configured.resolvingKeyFile = resolvingKeyFile?.0
        configured.resolvingKeyFileLocation = resolvingKeyFile?.1
        return .beacon(configured)
    }

    /// "[beacon], [advertising], [controller] and [daemon]".
    static let tableList = proseList(ConfigTable.allCases.map { "[\($0.rawValue)]" })

    mutating func unknownKey(_ e: TOMLEntry, in table: ConfigTable, label: String) {
        let keys = ConfigSchema.names(in: table)
        var message = "unknown key '\(e.key)' in \(label)"
        if let guess = closest(e.key, among: keys) {
            message += "; did you mean '\(guess)'?"
        } else if let home = ConfigSchema.keys.first(where: { $0.name == e.key }) {
            message += "; '\(e.key)' belongs in [\(home.table.rawValue)]"
        } else {
            message += " (known keys: \(keys.joined(separator: ", ")))"
        }
        fail(message, at: e.keyLocation, key: "\(table.rawValue).\(e.key)")
    }

    /// The value of one entry, checked against its row's type; nil after saying what is wrong with it.
    mutating func check(_ item: TOMLItem, _ row: ConfigKey, _ what: String, format: BeaconFormat?) -> ConfigValue? {
        let key = row.path
        switch row.type {
        case .integer(let range, let unit, let note):
            var said = unit.isEmpty ? "" : " \(unit)"
            if let note { said += " (\(note.replacingEvery("{format}", with: format?.rawValue ?? "")))" }
            return integer(item, what, key, range, unit: said).map { .integer($0) }
        case .boolean:
            return boolean(item, what, key).map { .boolean($0) }
        case .choice(let names):
            return string(item, what, key).flatMap { oneOf($0, names, what, at: item.location, key: key) }.map { .string($0) }
        case .format:
            return string(item, what, key).flatMap { oneOf($0, BeaconFormat.allCases.map(\.rawValue), what, at: item.location, key: key) }
                .flatMap(BeaconFormat.init(rawValue:)).map { .format($0) }
        case .logLevel:
            guard let s = string(item, what, key) else { return nil }
            if let l = LogLevel(name: s) { return .logLevel(l) }
            fail("\(what) must be one of \(LogLevel.validNames), found \"\(s)\"", at: item.location, key: key)
            return nil
        case .hex(let count):
            return hexBytes(item, what, key, count: count).map { .bytes($0) }
        case .uuid:
            guard let s = string(item, what, key) else { return nil }
            do {
                return .uuid(try BeaconUUID(parsing: s))
            } catch {
                let at = item.contentColumn.map { SourceLocation(line: item.location.line, column: $0 + error.offset) } ?? item.location
                fail("\(what) is not a valid UUID: \(error.message)", at: at, key: key)
                return nil
            }
        case .text(let maxBytes):
            guard let s = string(item, what, key) else { return nil }
            let n = s.utf8.count
            if n == 0 || n > maxBytes {
                fail("\(what) must be 1 to \(maxBytes) bytes of UTF-8 (it goes into a 31-byte scan response), found \(n)", at: item.location, key: key)
                return nil
            }
            return .string(s)
        case .keyFile:
            guard let s = string(item, what, key) else { return nil }
            if s.isEmpty {
                fail("\(what) must name a file (a relative name is looked up in $CREDENTIALS_DIRECTORY)", at: item.location, key: key)
                return nil
            }
            return .string(s)
        case .device:
            guard let s = string(item, what, key) else { return nil }
            do { return .device(try DeviceSpec(parsing: s)) } catch {
                fail("\(what) is not valid: \(error.message)", at: item.location, key: key)
                return nil
            }
        case .beaconAddress:
            guard let s = string(item, what, key) else { return nil }
            if let p = AddressPolicy(rawValue: s) { return .address(.policy(p)) }
            return chosenAddress(s, what, at: item.location, key: key).map { .address(.chosen($0)) }
        case .addressPolicy:
            guard let s = string(item, what, key) else { return nil }
            if BluetoothAddress(parsing: s) != nil {
                fail("\(what) names one address, which belongs to one beacon: put address = \"\(s)\" in that beacon's table ([beacon] or its [[beacon]])",
                     at: item.location, key: key)
                return nil
            }
            return oneOf(s, AddressPolicy.allCases.map(\.rawValue), what, at: item.location, key: key)
                .flatMap(AddressPolicy.init(rawValue:)).map { .address(.policy($0)) }
        }
    }

    /// `s` when it is one of `names`; else nil after saying so (with the nearest name, if one is near).
    mutating func oneOf(_ s: String, _ names: [String], _ what: String, at location: SourceLocation, key: String) -> String? {
        if names.contains(s) { return s }
        var message = "\(what) must be one of \(names.map { "\"\($0)\"" }.joined(separator: ", ")), found \"\(s)\""
        if let guess = closest(s, among: names) { message += "; did you mean \"\(guess)\"?" }
        fail(message, at: location, key: key)
        return nil
    }

    mutating func validate(_ doc: TOMLDocument) -> BeaconConfiguration? {
        var advertising = AdvertisingSettings()
        var controller = ControllerSettings()
        var daemon = DaemonSettings()
        var beacons: [ConfiguredBeacon] = []
        var unprovisioned: [UnprovisionedBeacon] = []
        var labels: [String] = []

        let beaconTables = doc.tables("beacon")
        let isArray = beaconTables.first?.isArrayElement == true
        for (n, table) in beaconTables.enumerated() {
            let label = isArray ? "[[beacon]] #\(n + 1)" : "[beacon]"
            switch validateBeacon(table, label: label) {
            case .beacon(var b):
                b.label = label
                beacons.append(b)
                labels.append(label)
            case .unprovisioned(let at): unprovisioned.append(UnprovisionedBeacon(label: label, location: at))
            case .invalid: break
            }
        }
        if beaconTables.isEmpty {
            fail("missing required table [beacon] with keys uuid, major and minor (or one [[beacon]] per beacon)",
                 at: SourceLocation(line: 1, column: 1), key: "beacon")
        }

        for table in doc.tables where !table.isDuplicate && table.name != "beacon" {
            guard let name = table.name else {
                for e in table.entries {
                    if let home = ConfigSchema.keys.first(where: { $0.name == e.key }) {
                        fail("key '\(e.key)' must be inside a table: put it under [\(home.table.rawValue)]", at: e.keyLocation, key: e.key)
                    } else {
                        fail("unknown key '\(e.key)' outside any table; beacond's keys live in \(Self.tableList)", at: e.keyLocation, key: e.key)
                    }
                }
                continue
            }
            guard let kind = ConfigTable(rawValue: name) else {
                var message = "unknown table [\(name)]"
                if let guess = closest(name, among: ConfigTable.allCases.map(\.rawValue)) { message += "; did you mean [\(guess)]?" }
                else { message += "; beacond knows \(Self.tableList)" }
                fail(message, at: table.location, key: name)
                continue
            }
            if table.isArrayElement {
                fail("[[\(name)]] is not an array of tables: there is one [\(name)] (only beacons come as [[beacon]])", at: table.location, key: name)
                continue
            }
            for e in table.entries {
                guard let row = ConfigSchema.rows(kind, e.key).first else {
                    unknownKey(e, in: kind, label: "[\(name)]")
                    continue
                }
                guard let value = check(e.item, row, "'\(e.key)' in [\(name)]", format: nil) else { continue }
                // Each key's meaning.
                switch (row.path, value) {
                case ("advertising.interval_ms", .integer(let v)): if let i = interval(v, e, key: row.path) { advertising.interval = i }
                case ("advertising.connectable", .boolean(let v)): advertising.connectable = v
                case ("advertising.tx_power", .integer(let v)): advertising.txPower = Int8(v)
                case ("advertising.address_rotation_s", .integer(let v)): advertising.addressRotation = .seconds(v)
                case ("advertising.address", .address(.policy(let p))):
                    advertising.address = p
                    advertising.addressLocation = e.item.location
                case ("controller.device", .device(let d)): controller.device = d
                case ("controller.backend", .string(let s)): controller.backend = ControllerBackend(rawValue: s)!
                case ("daemon.log_level", .logLevel(let l)): daemon.logLevel = l
                default: preconditionFailure("the schema lists \(row.path) but the validator gives it no meaning")
                }
            }
        }

        // The kernel's management interface advertises a non-connectable beacon from an address of its own choosing.
        let labelOf = { (k: Int) in labels[k] }
        let mgmt = controller.backend == .mgmt
        func refuseUnderMgmt(_ setting: BeaconAddressSetting, at: SourceLocation, _ label: String, key: String) {
            guard mgmt, !AddressPlan.kernelCanGive(setting, connectable: advertising.connectable) else { return }
            fail("'address' in \(label) cannot be \"\(setting)\" with backend = \"mgmt\": \(AddressPlan.kernelRule); use backend = \"hci\" or \"auto\" (which then uses raw HCI commands)",
                 at: at, key: key)
        }
        if let a = advertising.address, let at = advertising.addressLocation { refuseUnderMgmt(.policy(a), at: at, "[advertising]", key: "advertising.address") }
        if mgmt, let k = beacons.firstIndex(where: { $0.beacon.format == .eddystoneEID }) {
            fail("\(labelOf(k)) is an Eddystone-EID beacon, which cannot use backend = \"mgmt\": its address must change with every EID, and the kernel changes its own on its own schedule; use backend = \"hci\" or \"auto\" (which then uses raw HCI commands)",
                 at: beacons[k].location, key: "controller.backend")
        }
        let selfReports = beacons.indices.filter { beacons[$0].beacon.format == .bthome }
        if mgmt, let k = selfReports.first {
            fail("\(labelOf(k)) is a BTHome self-report, which cannot use backend = \"mgmt\": it goes out from a fixed address, and the kernel advertises from one it rotates; use backend = \"hci\" or \"auto\" (which then uses raw HCI commands)",
                 at: beacons[k].location, key: "controller.backend")
        }
        for k in selfReports.dropFirst() {
            fail("\(labelOf(k)) is a second BTHome self-report, beside \(labelOf(selfReports[0])) (line \(beacons[selfReports[0]].location.line)): beacond reports its health once",
                 at: beacons[k].location, key: "beacon.format")
        }
        checkResolvingKeys(beacons, advertising)
        var chosenBy: [BluetoothAddress: Int] = [:]
        for (k, b) in beacons.enumerated() {
            guard let a = b.address, let at = b.addressLocation else { continue }
            if case .chosen(let chosen) = a {
                if let first = chosenBy[chosen] {
                    fail("'address' in \(labelOf(k)) is \(a), the same as in \(labelOf(first)) (line \(beacons[first].addressLocation!.line)): gateways would take the two for one device; give each beacon its own address",
                         at: at, key: "beacon.address")
                } else {
                    chosenBy[chosen] = k
                }
            }
            refuseUnderMgmt(a, at: at, labelOf(k), key: "beacon.address")
        }

        guard diagnostics.isEmpty, !beacons.isEmpty || !unprovisioned.isEmpty else { return nil }
        return BeaconConfiguration(beacons: beacons, unprovisioned: unprovisioned, advertising: advertising, controller: controller,
                                   daemon: daemon)
    }

    /// A resolvable address needs its key, and a key is for a resolvable address: `address = "resolvable"` (the
    /// beacon's own or [advertising]'s) without `resolving_key_file` and the other way round are mistakes. The
    /// formats that cannot take it (an EID beacon's address follows its EID, the self-report's is fixed) are refused
    /// by the schema rows and the address checks before this.
    mutating func checkResolvingKeys(_ beacons: [ConfiguredBeacon], _ advertising: AdvertisingSettings) {
        for b in beacons {
            let takesOwn = b.beacon.format.addressRule.takesPrivateAddress
            let own = b.address == .policy(.resolvable)
            let inherited = b.address == nil && advertising.address == .resolvable && takesOwn
                && !(b.beacon.format.addressRule.address == .itsUIDs && beacons.contains { $0.beacon.format == .eddystoneUID })
            if (own || inherited) && b.resolvingKeyFile == nil {
                let from = own ? "'address' in \(b.label) is \"resolvable\""
                    : "\(b.label) takes address = \"resolvable\" from [advertising] (line \(advertising.addressLocation!.line))"
                fail("\(from), which needs its key: add resolving_key_file = \"NAME\" (32 hex digits in /etc/beacond/keys, made with 'beacond gen-key'), or choose another address",
                     at: own ? b.addressLocation! : b.location, key: "beacon.resolving_key_file")
            } else if !(own || inherited), let file = b.resolvingKeyFile, let at = b.resolvingKeyFileLocation {
                let address = b.address.map { "address = \"\($0)\"" } ?? advertising.address.map { "[advertising]'s address = \"\($0.rawValue)\"" }
                    ?? "its default address"
                let why = b.beacon.format.addressRule.address == .itsUIDs && b.address == nil ? "this Eddystone-TLM beacon goes out from its Eddystone-UID beacon's address" : "the beacon has \(address)"
                fail("'resolving_key_file' in \(b.label) names \"\(file)\", but \(why): a resolving key is for address = \"resolvable\"; set that too, or remove the key",
                     at: at, key: "beacon.resolving_key_file")
            }
        }
    }

    /// A random static address written as people write addresses ("C6:12:34:56:78:9A"); nil after saying what is
    /// wrong with it.
    mutating func chosenAddress(_ s: String, _ what: String, at location: SourceLocation, key: String) -> BluetoothAddress? {
        guard let a = BluetoothAddress(parsing: s) else {
            var message = "\(what) must be \(AddressPolicy.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")) or a random static address like \"C6:12:34:56:78:9A\", found \"\(s)\""
            if let guess = closest(s, among: AddressPolicy.allCases.map(\.rawValue)) { message += "; did you mean \"\(guess)\"?" }
            fail(message, at: location, key: key)
            return nil
        }
        guard a.kind == .staticRandom else {
            fail("\(what) is not a random static address: its two top bits must be 11 (a first digit of C, D, E or F), found \"\(s)\"; a public or private address cannot be chosen here",
                 at: location, key: key)
            return nil
        }
        guard a.isStatic else {
            fail("\(what) is not a random static address: the 46 bits after the top two must not be all 0 or all 1, found \"\(s)\"",
                 at: location, key: key)
            return nil
        }
        return a
    }

    /// Exactly `count` bytes written as 2 × count hex digits.
    mutating func hexBytes(_ item: TOMLItem, _ what: String, _ key: String, count: Int) -> [UInt8]? {
        guard let s = string(item, what, key) else { return nil }
        let digits = Array(s.unicodeScalars)
        let kind = "\(2 * count) hex digits (\(count) bytes)"
        if let bad = digits.firstIndex(where: { !$0.properties.isASCIIHexDigit }) {
            fail("\(what) must be \(kind): '\(digits[bad])' at character \(bad + 1) is not a hex digit", at: item.location, key: key)
            return nil
        }
        guard digits.count == 2 * count else {
            fail("\(what) must be \(kind), found \(digits.count)", at: item.location, key: key)
            return nil
        }
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0]) + String(digits[$0 + 1]), radix: 16)! }
    }

    /// Every string value: escapes may put control characters into it (`\n`, `\u0000`), and strings reach sd_notify
    /// datagrams, the journal and paths, where a newline starts a new assignment and a NUL ends a path. Refused before
    /// any other check, so no message repeats them.
    mutating func string(_ item: TOMLItem, _ what: String, _ key: String) -> String? {
        if case .string(let s) = item.value {
            if let (k, c) = s.unicodeScalars.enumerated().first(where: { $0.element.properties.generalCategory == .control }) {
                let code = String(c.value, radix: 16, uppercase: true)
                fail("\(what) must not contain control characters (found U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code) at character \(k + 1))",
                     at: item.location, key: key)
                return nil
            }
            return s
        }
        fail("\(what) must be a string, found \(item.value.kindDescription)", at: item.location, key: key)
        return nil
    }

    mutating func boolean(_ item: TOMLItem, _ what: String, _ key: String) -> Bool? {
        if case .boolean(let v) = item.value { return v }
        fail("\(what) must be true or false, found \(item.value.kindDescription)", at: item.location, key: key)
        return nil
    }

    mutating func integer(_ item: TOMLItem, _ what: String, _ key: String, _ range: ClosedRange<Int64>, unit: String = "") -> Int64? {
        guard case .integer(let v) = item.value else {
            fail("\(what) must be an integer, found \(item.value.kindDescription)", at: item.location, key: key)
            return nil
        }
        guard range.contains(v) else {
            fail("\(what) must be from \(range.lowerBound) to \(range.upperBound)\(unit), found \(v)", at: item.location, key: key)
            return nil
        }
        return v
    }
}

/// The candidate within edit distance 2 (or a third of the word's length, if larger), nearest first.
func closest(_ word: String, among candidates: [String]) -> String? {
    let limit = max(2, word.count / 3)
    let scored = candidates.map { ($0, editDistance(word.lowercased(), $0)) }.filter { $0.1 <= limit }
    return scored.min { $0.1 < $1.1 }?.0
}

/// Levenshtein distance over characters.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
