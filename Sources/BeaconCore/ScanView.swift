// What `beacond scan` shows, as values: which frames the options let through, the live table and the calibration
// table. The command itself (BeacondApp's Scanner) only hears reports and prints what these return.
import BluetoothHCI

/// `--uuid`, `--major`, `--minor` and `--all`: which frames the table keeps.
public struct ScanFilter: Sendable, Hashable {
    public var uuid: BeaconUUID?
    public var major: UInt16?
    public var minor: UInt16?
    /// Frames that are not beacons (and malformed iBeacons) too.
    public var all: Bool

    public init(uuid: BeaconUUID? = nil, major: UInt16? = nil, minor: UInt16? = nil, all: Bool = false) {
        (self.uuid, self.major, self.minor, self.all) = (uuid, major, minor, all)
    }

    /// Some of uuid, major and minor are asked for: frames without them (Eddystone) do not match.
    public var narrows: Bool { uuid != nil || major != nil || minor != nil }

    public func admits(_ frame: BeaconFrame) -> Bool {
        func matches(_ u: BeaconUUID, _ ma: UInt16, _ mi: UInt16) -> Bool {
            uuid.map { $0 == u } != false && major.map { $0 == ma } != false && minor.map { $0 == mi } != false
        }
        switch frame {
        case .iBeacon(let b): return matches(b.uuid, b.major, b.minor)
        case .altBeacon(let b): return matches(b.uuid, b.major, b.minor)
        case .eddystoneUID, .eddystoneTLM, .eddystoneEID: return !narrows
        case .malformedIBeacon, .other: return all
        }
    }
}

public enum ScanView {
    /// The live table (and the final one): a row per entry, ranged where the frame carries a measured power.
    /// `heading`: the first line (the device, the family, for how long).
    public static func table(_ seen: ScanTable<ScanEntry>, heading: String) -> String {
        var out = heading + "\nrssi: last / \(RSSIFilter.description); distance: Android Beacon Library curve\n\n"
        out += pad("KIND", 14) + pad("UUID / NAMESPACE:INSTANCE", 37) + pad("MAJOR", 6) + pad("MINOR", 6) + pad("RSSI", 11)
            + pad("POWER", 6) + pad("DIST", 8) + pad("PROXIMITY", 10) + pad("PKTS", 6) + "ADDRESS\n"
        for s in seen.entries { out += row(s) }
        if seen.count == 0 { out += "(no beacons yet)\n" }
        if seen.evicted > 0 { out += "(\(seen.evicted) least recently heard dropped: the table keeps \(seen.capacity))\n" }
        return out
    }

    /// Below the table with `--eid-keys`: the fresh resolvable addresses not tried against the keys (AddressResolver's
    /// cap), or nothing when none was skipped.
    public static func skipped(_ addresses: Int, trials: Int) -> String {
        guard addresses > 0 else { return "" }
        return "(\(addresses) fresh resolvable address\(addresses == 1 ? "" : "es") heard past the cap of "
            + "\(AddressResolver.defaultTrialsPerSecond) key trials a second, not tried yet: \(trials) trials skipped)\n"
    }

    static func row(_ s: ScanEntry) -> String {
        let addr = "\(s.address) (\(s.addressType))"
        func ranged(_ id: String, _ major: String, _ minor: String, _ power: Int8) -> String {
            let smoothed = s.filter.value
            let d = smoothed.flatMap { Ranging.distance(rssi: $0, measuredPower: power) }
            return pad(s.frame.kind, 14) + pad(id, 37) + pad(major, 6) + pad(minor, 6)
                + pad("\(s.lastRSSI)/\(smoothed.map { decimal($0, 1) } ?? "-")", 11) + pad("\(power)", 6)
                + pad(d.map { decimal($0, 2) + "m" } ?? "-", 8) + pad(Ranging.proximity(distance: d).rawValue, 10)
                + pad("\(s.packets)", 6) + addr + "\n"
        }
        func note(_ text: String) -> String { pad(s.frame.kind, 14) + pad(text, 84) + pad("\(s.packets)", 6) + addr + "\n" }
        switch s.frame {
        case .iBeacon(let b): return ranged(b.uuid.description, "\(b.major)", "\(b.minor)", b.measuredPower)
        case .altBeacon(let b): return ranged(b.uuid.description, "\(b.major)", "\(b.minor)", b.referenceRSSI)
        case .eddystoneUID(let b): return ranged(hexString(b.namespace) + ":" + hexString(b.instance), "-", "-", b.measuredPowerAt1m)
        case .eddystoneEID(let e):
            let id = s.resolved.map { "\($0.name) (EID \(hexString(e.eid)))" } ?? "EID \(hexString(e.eid)) (unresolved)"
            return ranged(id, "-", "-", e.measuredPowerAt1m)
        case .eddystoneTLM(let t):
            return note("battery \(t.batteryMillivolts) mV, \(t.celsius.map { decimal($0, 1) + " °C" } ?? "no temperature"), "
                + "\(t.advertisingCount) advertisements, up \(decimal(Double(t.uptimeTenths) / 10, 1)) s")
        case .malformedIBeacon(let reason): return note("(malformed iBeacon: \(reason))")
        case .other: return note("(other: \(hexString(s.data.prefix(20)))\(s.data.count > 20 ? "…" : ""))")
        }
    }

    /// After `--calibrate`: per beacon the median RSSI, the sample count, and the line for the config.
    public static func calibration(_ entries: [ScanEntry], seconds: Double) -> String {
        var out = "\nCalibration (\(decimal(seconds, 1)) s; valid when the receiver was 1 m from the beacon):\n"
        out += pad("KIND", 14) + pad("UUID / NAMESPACE:INSTANCE", 37) + pad("MAJOR", 6) + pad("MINOR", 6) + pad("SAMPLES", 8)
            + pad("MEDIAN", 8) + "FOR THE CONFIG\n"
        var any = false
        for s in entries {
            guard let c = s.calibration else { continue }
            let (id, major, minor): (String, String, String)
            switch s.frame {
            case .iBeacon(let b): (id, major, minor) = (b.uuid.description, "\(b.major)", "\(b.minor)")
            case .altBeacon(let b): (id, major, minor) = (b.uuid.description, "\(b.major)", "\(b.minor)")
            case .eddystoneUID(let b): (id, major, minor) = (hexString(b.namespace) + ":" + hexString(b.instance), "-", "-")
            default: continue
            }
            any = true
            let advice = c.measuredPower.map { "measured_power = \($0)" + (c.at0m ? " (at 0 m)" : "") }
                ?? "too few samples (at least \(RSSIHistogram.enough)): listen longer"
            out += pad(s.frame.kind, 14) + pad(id, 37) + pad(major, 6) + pad(minor, 6) + pad("\(c.samples)", 8)
                + pad(c.medianRSSI.map { decimal($0, 1) } ?? "-", 8) + advice + "\n"
        }
        if !any { out += "(no beacon heard: nothing to calibrate)\n" }
        return out
    }
}

/// `s` left-aligned in a column of `width` (at least one space after it).
public func pad(_ s: String, _ width: Int) -> String {
    s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count)
}
