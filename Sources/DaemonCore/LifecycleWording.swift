// The lifecycle's sentences about the beacons: the start line's summary, the advertising STATUS, the journal lines
// of a confirmed apply (one per beacon, the kernel's interval, the TX power beside measured_power). The lifecycle
// decides when they are said; this value words them, and remembers which measured-power warnings were given.
import BeaconCore
import BluetoothHCI

struct LifecycleWording: Sendable {
    /// Measured-power warnings already given (beacon, TX power, measured power): said once, not at every apply.
    private var measuredPowerWarned: Set<String> = []

    /// The journal fields of the beacon(s) on `device`.
    static func beaconFields(_ config: BeaconConfiguration, device: DeviceSpec) -> [String] {
        (config.beacon?.journalFields ?? []) + ["HCI_DEVICE=\(device)"]
    }

    /// Every beacon of the config, for the start line: "UUID major 1 minor 1", or "3 beacons: 1. …; 2. …; 3. …".
    static func beaconsSummary(_ config: BeaconConfiguration) -> String {
        guard config.beacons.count > 1 else { return config.beacon?.summary ?? "no beacon" }
        return "\(config.beacons.count) beacons: " + config.beacons.enumerated().map { "\($0 + 1). \($1.beacon.summary)" }.joined(separator: "; ")
    }

    /// STATUS while advertising. `clockSynchronized` (asked only with EID beacons): false when the clock is not
    /// synchronized, nil when that cannot be told.
    static func advertisingStatus(_ config: BeaconConfiguration, device: DeviceSpec, configPath: String, onAir: OnAir?,
                                  clockSynchronized: Bool?) -> String {
        // EIDs from an unsynchronized clock do not resolve: say so where `systemctl status` shows it.
        let hasEID = config.beacons.contains { $0.beacon.eid != nil }
        let clockNote = !hasEID ? ""
            : clockSynchronized == false ? "; the system clock is not synchronized: the EIDs will not resolve"
            : clockSynchronized == nil ? "; whether the system clock is synchronized is unknown (adjtimex refused): the EIDs resolve only if it is" : ""
        // Beacons still without a uuid are not on the air: say what to do, as for an unprovisioned file.
        let uuidNote = config.uuidNeeded(path: configPath).map { "; not on the air: \($0), then reload" } ?? ""
        return advertisingSummary(config, device: device, onAir: onAir) + clockNote + uuidNote
    }

    static func advertisingSummary(_ config: BeaconConfiguration, device: DeviceSpec, onAir: OnAir?) -> String {
        var details = onAir?.details ?? []
        if config.advertising.connectable { details.append("connectable") }
        if config.beacons.count > 1 {
            let each = config.beacons.enumerated().map { k, b in
                let got = onAir.flatMap { k < $0.beacons.count ? $0.beacons[k] : nil }
                if got?.paused != nil { return "\(b.beacon.format.displayName) paused" }
                let every = got.map { formatDuration($0.every) } ?? config.interval(of: b).description
                return "\(b.beacon.format.displayName) every \(every)" + (got?.address.map { " from \($0)" } ?? "")
            }
            return "Advertising \(config.beacons.count) beacons on \(device): \(each.joined(separator: ", ")) (\(details.joined(separator: ", ")))"
        }
        if let why = onAir?.beacons.first?.paused { return "Paused \(config.beacon?.summary ?? "nothing") on \(device): \(why)" }
        let every = onAir.map { $0.kernelInterval?.description ?? $0.interval.description }
            ?? config.advertising.interval.description
        return "Advertising \(config.beacon?.summary ?? "nothing") every \(every) on \(device) (\(details.joined(separator: ", ")))"
    }

    /// The journal lines of an apply the controller confirmed with `result`, whose STATUS is `status`: the STATUS
    /// itself, each beacon with what it actually gets, the kernel's interval, the TX power.
    mutating func confirmed(_ status: String, dataOnly: Bool, _ result: OnAir, _ config: BeaconConfiguration, device: DeviceSpec) -> [Lifecycle.Action] {
        var out: [Lifecycle.Action] = [.log(.notice, dataOnly ? "\(status) (data updated)" : status, Self.beaconFields(config, device: device))]
        let n = config.beacons.count
        if n > 1 {
            // One journal line per beacon, with what it actually gets.
            for (k, b) in config.beacons.enumerated() {
                let got = k < result.beacons.count ? result.beacons[k] : nil
                if let why = got?.paused {
                    out.append(.log(.warning, "Beacon \(k + 1) of \(n): \(b.beacon.summary) paused on \(device): \(why)",
                                    b.beacon.journalFields + ["HCI_DEVICE=\(device)", "BEACON_INDEX=\(k + 1)", "BEACON_COUNT=\(n)"]))
                    continue
                }
                let every = got.map { formatDuration($0.every) } ?? config.interval(of: b).description
                let details = got.map { $0.details.isEmpty ? "" : " (\($0.details.joined(separator: ", ")))" } ?? ""
                out.append(.log(.info, "Beacon \(k + 1) of \(n): \(b.beacon.summary) every \(every) on \(device)\(details)",
                                b.beacon.journalFields + ["HCI_DEVICE=\(device)", "BEACON_INDEX=\(k + 1)", "BEACON_COUNT=\(n)"]))
            }
        }
        if let k = result.kernelInterval {
            out.append(.log(.warning, k.warning(configured: config.beacons.map(config.interval(of:))), []))
        }
        return out + txPowerLines(result, config, device: device)
    }

    /// The TX power the controller reports, beside each beacon's measured_power, and a warning (once) when the two
    /// are far apart for the 1 m model.
    mutating func txPowerLines(_ result: OnAir, _ config: BeaconConfiguration, device: DeviceSpec) -> [Lifecycle.Action] {
        var out: [Lifecycle.Action] = []
        let n = config.beacons.count
        var parts: [String] = []
        for (k, b) in config.beacons.enumerated() {
            guard let tx = result.txPower(of: k, count: n), let m = b.beacon.measuredPowerAt1m else { continue }
            let which = n == 1 ? "" : "beacon \(k + 1): "
            parts.append("\(which)TX \(tx) dBm, measured_power \(m) dBm at 1 m")
            guard let off = MeasuredPowerCheck.offBy(measuredAt1m: m, tx: Int(tx)),
                  measuredPowerWarned.insert("\(k) \(b.beacon.summary) \(tx) \(m)").inserted else { continue }
            let expected = MeasuredPowerCheck.expectedAt1m(tx: Int(tx))
            let at0m = b.beacon.format == .eddystoneUID ? " (\(m + MeasuredPowerCheck.lossAt1m) dBm at 0 m)" : ""
            out.append(.log(.warning, "\(n == 1 ? "The beacon" : "Beacon \(k + 1)")'s measured_power of \(m) dBm at 1 m\(at0m) is \(abs(off)) dB \(off > 0 ? "stronger" : "weaker") than a \(tx) dBm transmitter is usually heard at 1 m (about \(expected) dBm: TX less the \(MeasuredPowerCheck.lossAt1m) dB a 2.4 GHz signal loses over 1 m); receivers will misjudge its distance. Measure it: 'beacond scan --calibrate 30' with a receiver 1 m away, then set measured_power to the median",
                            b.beacon.journalFields + ["HCI_DEVICE=\(device)", "TX_POWER=\(tx)", "MEASURED_POWER=\(m)"]))
        }
        if !parts.isEmpty {
            out.append(.log(.info, "TX power on \(device) as the controller reports it: \(parts.joined(separator: "; "))", ["HCI_DEVICE=\(device)"]))
        }
        return out
    }

    /// The journal fields of a config diagnostic.
    static func configFields(_ path: String, _ d: ConfigDiagnostic) -> [String] {
        var f = ["CONFIG_FILE=\(path)"]
        if let l = d.location { f.append("CONFIG_LINE=\(l.line)") }
        return f
    }
}
