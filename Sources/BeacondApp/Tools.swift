// The tools around the daemon: check-config, payload, gen-uuid.
import AESCipher
import BeaconCore
import BluetoothHCI
import DaemonCore
import HCIHost
import SystemCalls
import SystemConditions

enum Tools {
    /// Prints every diagnostic of a config error on stderr and returns the config exit code.
    static func report(_ error: ConfigError) -> ExitCode {
        Output.err(error.description + "\n")
        let n = error.diagnostics.count
        Output.err("\(n) error\(n == 1 ? "" : "s") in \(error.path)\n")
        return .config
    }

    static func checkConfig(path: String, keys: String? = nil) -> ExitCode {
        let config: BeaconConfiguration
        do { config = try ConfigLoader.load(path, keys: keys) } catch { return report(error) }
        guard let b = config.beacon else {
            let u = config.unprovisioned
            let which = u.count == 1 ? "\(u[0].label) at line \(u[0].location.line) has no uuid"
                : "its \(u.count) beacons (lines \(proseList(u.map { "\($0.location.line)" }))) have no uuid"
            Output.out("""
                \(path): OK, but there is no beacon yet: \(which).
                  beacond runs and advertises nothing until \(u.count == 1 ? "it has one" : "they have one"). \(u.count == 1 ? "Set a fresh one" : "Give them one fresh UUID (one per site: major and minor tell them apart)") with:
                    beacond gen-uuid --set \(path)

                """)
            return .success
        }
        let a = config.advertising
        let tx = a.txPower.map { "\($0) dBm (where the controller can set it)" } ?? "controller default"
        let beacons: String
        let addresses = addressViews(config)
        if config.beacons.count == 1 {
            var lines = beaconLines(b)
            if let own = config.beacons[0].interval { lines.append(("interval_ms", "\(own) (this beacon's own)")) }
            if let name = config.beacons[0].name { lines.append(("name", "\"\(name)\" (in a scan response: scannable)")) }
            lines.append(("address", addresses[0].text))
            if let w = config.addressPlan.identityWarning(0) { lines.append(("warning", w)) }
            lines += keyLine(config.beacons[0])
            beacons = "\(path): OK\n" + lines.map { "  " + pad($0.name, 16) + $0.value + "\n" }.joined()
        } else {
            beacons = "\(path): OK, \(config.beacons.count) beacons\n" + config.beacons.enumerated().map { k, cb in
                var lines = [("format", cb.beacon.format.rawValue)] + beaconLines(cb.beacon).filter { $0.name != "format" }
                lines.append(("interval_ms", cb.interval.map { "\($0) (this beacon's own)" } ?? "\(a.interval) (from [advertising])"))
                if let name = cb.name { lines.append(("name", "\"\(name)\" (in a scan response: scannable)")) }
                let type = cb.scanResponse != nil && !a.connectable ? LegacyAdvertisingType.scannableUndirected : a.legacyType
                lines.append(("pdu", type.pduName + (type == .scannableUndirected ? " (scannable: its name in a scan response)" : "")))
                lines.append(("address", addresses[k].text))
                if let w = config.addressPlan.identityWarning(k) { lines.append(("warning", w)) }
                lines += keyLine(cb)
                return "  beacon \(k + 1) (line \(cb.location.line))\n" + lines.map { "    " + pad($0.name, 14) + $0.value + "\n" }.joined()
            }.joined()
        }
        // Beacons still without a uuid: the others go on the air, these once they have one.
        let waiting = config.unprovisioned.isEmpty ? "" : "  not on the air yet: " + config.unprovisioned.map { "\($0.label) (line \($0.location.line))" }.joined(separator: ", ")
            + " without a uuid ('beacond gen-uuid --set \(path)' gives \(config.unprovisioned.count == 1 ? "it" : "them") the UUID the others share)\n"
        let rotation = config.addressPlan.rotates ? ", a new rotating or resolvable address every \(formatDuration(a.addressRotation))" : ""
        let address = a.address.map { "\($0.rawValue) (for beacons without their own\(rotation))" }
            ?? "static where beacond drives the controller (hci, H4), each beacon its own; the kernel's own through mgmt (default)"
        // What a controller without advertising sets (every Raspberry Pi's) does with several: one advertiser whose
        // slots the beacons take in turn (HCIHost's LegacySlicing, the same rule the advertiser follows).
        let slicing = LegacySlicing(config.beacons.map {
            AdvertisingRequest(data: $0.beacon.advertisingData, type: a.legacyType, interval: config.interval(of: $0), txPower: nil,
                               scanResponse: $0.scanResponse)
        })
        var interval = "\(a.interval) (\(a.interval.units) × 0.625 ms)"
        if config.beacons.count > 1 {
            let n = config.beacons.count
            let slot = slicing.base.interval
            interval += " for each beacon\(config.beacons.contains { $0.interval != nil } ? " without an interval_ms of its own" : "") on a controller "
                + "with advertising sets; on one without (every Raspberry Pi's), the \(n) beacons take turns in "
            // From their own addresses every slot restarts the advertiser (SliceTiming): what the slots are depends on
            // the controller's version and how fast it answers, which only a start can tell.
            if Set(config.addressPlan.wanted.map(\.setting)).count > 1 || config.addressPlan.wanted.contains(where: { $0.setting != .policy(.public) }) {
                let v5 = SliceTiming.make(configured: slot, floor: SliceTiming.floor(for: slicing.base.type, core50: true, floorForced: false), switchCost: nil)
                let v4 = SliceTiming.make(configured: slot, floor: SliceTiming.floor(for: slicing.base.type, core50: false, floorForced: false), switchCost: nil)
                interval += "\(formatDuration(v5.slot)) slots, each restarted from its beacon's address and advertising every \(v5.interval) within it: "
                    + "each every \(formatDuration(v5.slot * n)) on a Bluetooth 5.0 controller or later (\(formatDuration(v4.slot * n)) before 5.0, "
                    + "whose floor is 100 ms); a controller slow to answer gets longer slots, and 'beacond status' says what each beacon gets"
            } else {
                interval += "\(slot) slots: each every \(formatDuration(slicing.effectiveInterval(slot: slot)))"
            }
        }
        let type = slicing.base.type
        let pdu = type.pduName + (type == .scannableUndirected ? " (non-connectable; scannable: a beacon has a name)" : a.connectable ? " (connectable)" : " (non-connectable)")
        Output.out(beacons + waiting + """
              interval        \(interval)
              pdu             \(pdu)
              tx_power        \(tx)
              address         \(address)
              device          \(config.controller.device)
              backend         \(config.controller.backend.rawValue)
              log_level       \(config.daemon.logLevel.map(\.description) ?? "info (default)")

            """)
        return .success
    }

    /// What each beacon will advertise from, as the tools show it without making anything: the address when it is
    /// known (chosen, or kept in the state directory), else what it will be. With `backend` (status --check, which
    /// asked the controller) for that backend; without, for both kinds of controller where the choice depends on it
    /// (backend auto: raw HCI on one without advertising sets, such as every Raspberry Pi's; mgmt on one with sets).
    struct AddressView {
        var text: String
        /// For payload's JSON and hcitool recipe: the random address, `.public`, or nil when not known yet.
        var own: OwnAddress?
        /// The setting on a controller without advertising sets (or on the one `backend` names)…
        var setting: AddressKind
        /// … and on a controller with sets.
        var settingWithSets: AddressKind
    }

    static func addressViews(_ config: BeaconConfiguration, backend known: BackendKind? = nil) -> [AddressView] {
        let plan = config.addressPlan
        let device = config.controller.device
        let legacy = known ?? AdapterPlan.backend(for: config, device: device, advertisingSets: false) ?? (plan.beacondChooses ? .hci : .mgmt)
        let sets = known ?? AdapterPlan.backend(for: config, device: device, advertisingSets: true) ?? (plan.beacondChooses ? .hci : .mgmt)
        let file = "\(AddressStore.directory)/\(AddressStore.fileName)"
        let staticKeys = plan.wanted.filter { $0.setting == nil || $0.setting == .policy(.static) }.map(\.key)
        let kept = (legacy == .hci || sets == .hci) && !staticKeys.isEmpty ? AddressStore.peek(staticKeys) : .success([:])
        return plan.wanted.indices.map { k in
            let w = plan.wanted[k]
            func view(_ backend: BackendKind) -> (text: String, own: OwnAddress?) {
                let throughKernel = backend == .mgmt
                var known: AddressPlan.Kept?
                var own: OwnAddress?
                switch (w.setting, kept) {
                case (.chosen(let a)?, _): own = .random(a)
                case (.policy(.public)?, _): own = .public
                case (nil, _) where throughKernel, (.policy(.rotating)?, _), (.policy(.resolvable)?, _): break
                case (_, .success(let found)):
                    if let a = found[w.key] { (known, own) = (.known(a, file: file), .random(a)) } else { known = .notYet(file: file) }
                case (_, .failure(let f)): known = .unreadable("\(f)", file: file)
                }
                if plan.isEID[k] { own = nil }
                return (plan.sentence(k, throughKernel: throughKernel, kept: known), own)
            }
            let (l, s) = (view(legacy), view(sets))
            let onSets = sets == .mgmt && w.setting == nil ? AddressPlan.kernelBrief : s.text
            let text = l.text == s.text ? l.text
                : "\(l.text) on a controller without advertising sets (every Raspberry Pi's: \(legacy == .hci ? "raw HCI" : "mgmt")); \(onSets) on one with sets"
            return AddressView(text: text, own: l.own, setting: plan.settingKind(k, throughKernel: legacy == .mgmt),
                               settingWithSets: plan.settingKind(k, throughKernel: sets == .mgmt))
        }
    }

    /// check-config's line for a beacon's resolving key (none without one).
    static func keyLine(_ b: ConfiguredBeacon) -> [(name: String, value: String)] {
        b.resolvingKeyFile.map { [("resolving_key_file", "\($0) (\(b.resolvingKey == nil ? "not loaded" : "a 128-bit key, read; never printed: 'beacond irk' prints it for the gateways"))")] } ?? []
    }

    /// check-config's lines for the beacon: an iBeacon's exactly as before formats existed.
    static func beaconLines(_ beacon: Beacon) -> [(name: String, value: String)] {
        switch beacon {
        case .iBeacon(let b):
            return [("uuid", "\(b.uuid)"), ("major", "\(b.major)"), ("minor", "\(b.minor)"), ("measured_power", "\(b.measuredPower) dBm")]
        case .altBeacon(let b):
            return [("format", "altbeacon"), ("uuid", "\(b.uuid)"), ("major", "\(b.major)"), ("minor", "\(b.minor)"),
                    ("measured_power", "\(b.referenceRSSI) dBm (reference RSSI at 1 m)"),
                    ("company_id", "0x" + hexString([UInt8(b.companyID >> 8), UInt8(b.companyID & 0xFF)], uppercase: true)),
                    ("reserved", "0x" + hexString([b.reserved], uppercase: true))]
        case .eddystoneUID(let b):
            return [("format", "eddystone-uid"), ("namespace", hexString(b.namespace)), ("instance", hexString(b.instance)),
                    ("measured_power", "\(b.txPowerAt0m) dBm at 0 m (Eddystone's calibration distance; about \(b.measuredPowerAt1m) dBm at 1 m)")]
        case .eddystoneEID(let b):
            let seconds = 1 << Int(b.exponent)
            return [("format", "eddystone-eid"),
                    ("identity_key_file", "\(b.keyFile) (\(b.key == nil ? "not loaded" : "a 128-bit key, read; never printed"))"),
                    ("rotation_exponent", "\(b.exponent) (a new EID every 2^\(b.exponent) s = \(formatDuration(.seconds(seconds))), from the wall clock)"),
                    ("measured_power", "\(b.txPowerAt0m) dBm at 0 m (about \(Int(b.txPowerAt0m) - 41) dBm at 1 m)")]
        case .eddystoneTLM:
            return [("format", "eddystone-tlm"),
                    ("telemetry", "battery 0 mV (mains powered), temperature from \(ThermalZone.path) (now \(ThermalZone.read().map { celsius($0) } ?? "none: 0x8000, not supported")), advertising PDUs and time since beacond started, refreshed every \(formatDuration(Lifecycle.telemetryPeriod))")]
        case .bthome(let b):
            return [("format", "bthome"),
                    ("bindkey_file", b.bindkeyFile.map { "\($0) (\(b.bindkey == nil ? "not loaded" : "a 128-bit key, read; never printed"): AES-CCM, the counter kept in the state directory)" }
                        ?? "none: the frames go out unencrypted"),
                    ("reports", "the beacons on the air beside it (count), a problem when not every configured beacon is, beacond's uptime in seconds; a new frame with every change and every \(formatDuration(Lifecycle.selfReportPeriod))")]
        }
    }

    /// payload --format json's fields for the beacon, before the advertising settings.
    static func beaconJSON(_ beacon: Beacon) -> [(OutputKey, JSONValue)] {
        let format: [(OutputKey, JSONValue)] = [(.format, .string(beacon.format.rawValue))]
        switch beacon {
        case .iBeacon(let b): return BeaconFrame.iBeacon(b).jsonFields
        case .altBeacon(let b): return format + BeaconFrame.altBeacon(b).jsonFields
        // Eddystone-UID: the frame's fields but the 1 m value scan derives.
        case .eddystoneUID(let b): return format + Array(BeaconFrame.eddystoneUID(b).jsonFields.dropLast())
        case .eddystoneEID(let b):
            return format + [(.measuredPower0m, JSONValue(b.txPowerAt0m)), (.rotationExponent, JSONValue(b.exponent)),
                             (.periodStart, JSONValue(b.computedFor)), (.eid, .string(hexString(b.ephemeralID)))]
        case .eddystoneTLM(let b):
            return format + [(.batteryMv, JSONValue(b.batteryMillivolts)), (.temperatureC, b.celsius.map { .numeral("\($0)") } ?? .null)]
        case .bthome(let b): return format + [(.encrypted, .bool(b.encrypted))]
        }
    }

    static func payload(path: String, format: PayloadFormat, time: UInt32? = nil) -> ExitCode {
        let config: BeaconConfiguration
        do { config = try ConfigLoader.load(path) } catch { return report(error) }
        guard config.beacon != nil else {
            let at = config.unprovisioned.first.map { ":\($0.location.line):\($0.location.column)" } ?? ""
            Output.err("\(path)\(at): error: no beacon to print: \(config.uuidNeeded(path: path) ?? "the config has no beacon")\n")
            return .config
        }
        if let why = config.uuidNeeded(path: path) { Output.err("\(path): note: not printed: \(why)\n") }
        let now = Telemetry(temperature: ThermalZone.read())
        let addresses = format == .hex ? [] : addressViews(config)
        // EIDs for time counter `time`, or for now (the wall clock, as `run` computes them).
        let counter = time ?? eidTimeCounter(unixSeconds: wallClock().seconds)
        for (k, cb) in config.beacons.enumerated() {
            var beacon: Beacon
            do { beacon = try cb.beacon.withTelemetry(now).withEphemeralID(counter, cipher: { key, block in try AES128.encrypt(block, key: key) }) } catch {
                Output.err("Error: cannot compute the EID of beacon \(k + 1): \(error)\n")
                return .failure
            }
            if cb.beacon.format == .bthome {
                // The frame a start would send first: an encrypted one from its kept address, with the next counter.
                let view = addresses.isEmpty ? addressViews(config)[k] : addresses[k]
                let own: BluetoothAddress? = if case .random(let a)? = view.own { a } else { nil }
                let counter = own.flatMap { SelfReportStore.peek($0) } ?? 0
                switch SelfReport.firstServiceData(config, address: own, counter: counter,
                                                   seal: { key, nonce, plaintext in try AESCCM.seal(plaintext, key: key, nonce: nonce) }) {
                case .success(let data)?: beacon = beacon.withSelfReport(data)
                case .failure(let f)?:
                    Output.err("\(path): note: beacon \(k + 1) (line \(cb.location.line)), the BTHome self-report, not printed: \(f.message)\n")
                    continue
                case nil: break
                }
            }
            payload(beacon, interval: config.interval(of: cb), scanResponse: cb.scanResponse,
                    address: addresses.isEmpty ? nil : addresses[k], config: config, format: format,
                    header: config.beacons.count > 1 && format == .hcitool ? "# beacon \(k + 1) (line \(cb.location.line)): \(cb.beacon.summary)\n" : "")
        }
        return .success
    }

    /// One beacon's payload; with several, one line (hex, json) or one block (hcitool) each.
    private static func payload(_ b: Beacon, interval: AdvertisingInterval, scanResponse: AdvertisingData?, address: AddressView?,
                                config: BeaconConfiguration, format: PayloadFormat, header: String) {
        let data = b.advertisingData
        let type = scanResponse != nil && !config.advertising.connectable ? LegacyAdvertisingType.scannableUndirected : config.advertising.legacyType
        switch format {
        case .hex:
            Output.out(hexString(data.bytes) + "\n")
        case .hcitool:
            let device: String
            if case .kernel = config.controller.device { device = config.controller.device.description } else { device = "hci0" }
            // The address when it is known: a random one goes in with LE Set Random Address (while advertising is off).
            var random: [HCICommand] = []
            if case .random(let a)? = address?.own { random = [.leSetRandomAddress(a)] }
            let commands: [HCICommand] = [
                .leSetAdvertisingParameters(LEAdvertisingParameters(interval: interval, type: type, ownAddressType: random.isEmpty ? 0 : 1)),
            ] + random + [
                .leSetAdvertisingData(data),
            ] + (scanResponse.map { [.leSetScanResponseData($0)] } ?? []) + [.leSetAdvertisingEnable(true)]
            var out = header
            for c in commands {
                let ocf = hexString([UInt8(c.opcode.ocf >> 8), UInt8(c.opcode.ocf & 0xFF)])
                out += "hcitool -i \(device) cmd 0x\(hexString([c.opcode.ogf])) 0x\(ocf) \(hexString(c.parameters, separator: " "))\n"
            }
            Output.out(out)
        case .json:
            let a = config.advertising
            let intervalMs = String(interval.description.dropLast(3))
            let settings: [(OutputKey, JSONValue)] = [
                (.intervalMs, .numeral(intervalMs)), (.connectable, .bool(a.connectable)), (.pdu, .string(type.pduName)),
                (.txPower, JSONValue(a.txPower)), (.advertisingData, .string(hexString(data.bytes))),
                (.address, JSONValue(address?.own?.description)), (.addressSetting, .string((address?.setting ?? .static).rawValue)),
                (.addressSettingWithSets, .string((address?.settingWithSets ?? .static).rawValue)),
            ]
            Output.out(JSONValue(beaconJSON(b) + settings + (scanResponse.map { [(.scanResponse, .string(hexString($0.bytes)))] } ?? [])).text + "\n")
        }
    }

    static func genUUID(count: Int, lowercase: Bool, setPath: String?, replacing: Bool = false) -> ExitCode {
        func fresh() -> BeaconUUID? {
            do { return BeaconUUID.version4(random: try kernelRandomBytes(16)) } catch {
                Output.err("Error: cannot get random bytes: \(error)\n")
                return nil
            }
        }
        if let path = setPath {
            let file: EditableFile
            let bytes: [UInt8]
            do { (file, bytes) = try ConfigLoader.openForEdit(path) } catch { return report(error) }
            guard let uuid = fresh() else { return .failure }
            let edit: ConfigEditor.UUIDEdit
            do { edit = try ConfigEditor.settingUUIDs(uuid, in: bytes, replacing: replacing) } catch {
                // A valid file whose beacons have their uuid already is refused for that alone (issue #53: it was
                // said to be invalid first).
                let valid = (try? BeaconConfiguration.parse(bytes)) != nil
                Output.err("Error: not changing \(path): " + (valid ? "its uuid is kept" : "it must be a valid config before and after the change") + "\n")
                return report(ConfigError(path: path, diagnostics: error.items))
            }
            do { try ConfigLoader.replace(file, with: edit.bytes) } catch { return report(error) }
            // The UUID alone on stdout (scripts take it from there); which beacons got it, when that is news, on stderr.
            if edit.reusedSiteUUID {
                Output.err("\(path): \(proseList(edit.filled)) joined the UUID the file's other beacons share\n")
            } else if edit.filled.count > 1 {
                Output.err("\(path): \(proseList(edit.filled)) got the same new UUID (one per site; major and minor tell the beacons apart)\n")
            }
            Output.out(edit.uuid.formatted(uppercase: !lowercase) + "\n")
            return .success
        }
        var buffer = ""
        buffer.reserveCapacity(64 * 1024)
        for _ in 0..<count {
            guard let uuid = fresh() else { return .failure }
            buffer += uuid.formatted(uppercase: !lowercase)
            buffer += "\n"
            if buffer.utf8.count >= 60 * 1024 {
                Output.out(buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
        Output.out(buffer)
        return .success
    }

    /// `gen-key FILE`: a fresh 128-bit identity key from the kernel's CSPRNG, as 32 hex digits, in a new file of
    /// mode 0600. An existing file is never replaced: beacons' EIDs and every resolver's copy depend on the key.
    static func genKey(path: String) -> ExitCode {
        let key: [UInt8]
        do { key = try kernelRandomBytes(16) } catch {
            Output.err("Error: cannot get random bytes: \(error)\n")
            return .failure
        }
        do { try createNewFile(path, contents: Array((hexString(key) + "\n").utf8), mode: 0o600) } catch {
            Output.err("Error: \(KeyFileWriting.refusal(path, error.condition))\n")
            return .failure
        }
        Output.out("Wrote a new 128-bit key to \(path) (mode 0600). Name it in one use only: identity_key_file (an Eddystone-EID beacon; give the same key to its resolver), resolving_key_file (address = \"resolvable\"; 'beacond irk' prints it for the gateways) or bindkey_file (the self-report's encryption; Home Assistant asks for it).\n")
        return .success
    }

    /// `45.5 °C` from 8.8 fixed point.
    static func celsius(_ t: Int16) -> String {
        let tenths = (Int(t) * 10 + (t >= 0 ? 128 : -128)) / 256
        let a = abs(tenths)
        return "\(tenths < 0 ? "-" : "")\(a / 10).\(a % 10) °C"
    }
}
