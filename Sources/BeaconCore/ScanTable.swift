// The scanner's table of what it heard: bounded, so a radio that cycles identities (an ESP32 can make 100 new
// ones a second) cannot grow it; the least recently heard entry goes first, and the table counts what it dropped.
import BluetoothHCI

public struct ScanTable<Entry>: Sendable where Entry: Sendable {
    /// Entries live in `slots`; `index` finds them by key; a doubly linked list through the slots (by position)
    /// keeps them in the order they were last heard, so finding the least recently heard one is O(1).
    private struct Slot: Sendable {
        var key: String
        var entry: Entry
        var firstSeen: UInt64
        var older: Int
        var newer: Int
    }

    public let capacity: Int
    /// Entries dropped to make room, since the start.
    public private(set) var evicted = 0
    private var slots: [Slot] = []
    private var index: [String: Int] = [:]
    private var oldest = -1
    private var newest = -1
    private var sequence: UInt64 = 0

    public init(capacity: Int) {
        precondition(capacity > 0, "a scan table holds at least one entry")
        self.capacity = capacity
    }

    public var count: Int { slots.count }

    /// Updates the entry under `key` (made by `make` when it is new) and marks it the most recently heard. A new
    /// key in a full table takes the place of the least recently heard entry.
    public mutating func record(_ key: String, make: () -> Entry, _ change: (inout Entry) -> Void) {
        let i: Int
        if let found = index[key] {
            i = found
            unlink(i)
        } else {
            sequence += 1
            let slot = Slot(key: key, entry: make(), firstSeen: sequence, older: -1, newer: -1)
            if slots.count < capacity {
                i = slots.count
                slots.append(slot)
            } else {
                i = oldest
                unlink(i)
                index[slots[i].key] = nil
                slots[i] = slot
                evicted += 1
            }
            index[key] = i
        }
        change(&slots[i].entry)
        // The newest end of the list.
        slots[i].older = newest
        slots[i].newer = -1
        if newest >= 0 { slots[newest].newer = i }
        newest = i
        if oldest < 0 { oldest = i }
    }

    private mutating func unlink(_ i: Int) {
        let (o, n) = (slots[i].older, slots[i].newer)
        if o >= 0 { slots[o].newer = n } else { oldest = n }
        if n >= 0 { slots[n].older = o } else { newest = o }
    }

    /// Changes every entry in place.
    public mutating func forEach(_ change: (inout Entry) -> Void) {
        for i in slots.indices { change(&slots[i].entry) }
    }

    /// The entries in the order they were first heard.
    public var entries: [Entry] { slots.sorted { $0.firstSeen < $1.firstSeen }.map(\.entry) }
}

/// What the scanner knows about one sender (an iBeacon by identity, anything else by address and data).
public struct ScanEntry: Sendable {
    public var frame: BeaconFrame
    public var address: String
    public var addressType: String
    public var lastRSSI: Int8
    public var filter = RSSIFilter()
    public var packets = 0
    /// Heard since the last JSON refresh.
    public var updated = false
    public var data: [UInt8]
    /// `scan --calibrate`: every reading, for the median.
    public var histogram: RSSIHistogram?
    /// `scan --eid-keys`: the key and period an EID frame belongs to.
    public var resolved: EIDResolver.Match?
    /// `scan --eid-keys`: the name of the key the sender's resolvable private address resolves under.
    public var resolvedAddress: String?

    public init(frame: BeaconFrame, report r: AdvertisingReport, calibrating: Bool = false) {
        histogram = calibrating ? RSSIHistogram() : nil
        self.frame = frame
        address = r.addressString
        addressType = r.addressTypeName
        lastRSSI = r.rssi
        data = r.data
    }

    /// One more advertisement from this sender.
    public mutating func heard(_ r: AdvertisingReport, at now: UInt64) {
        lastRSSI = r.rssi
        address = r.addressString
        addressType = r.addressTypeName
        if r.rssi != 127 { filter.add(r.rssi, at: now) }
        histogram?.add(r.rssi)
        packets += 1
        updated = true
    }

    /// The key the scan table files a report under: a beacon by its identity, a TLM frame (which has none) by the
    /// sender's address, anything else by address and data.
    public static func key(for frame: BeaconFrame, _ r: AdvertisingReport) -> String {
        switch frame {
        case .iBeacon(let b): "ibeacon/\(b.uuid)/\(b.major)/\(b.minor)"
        case .altBeacon(let b): "altbeacon/\(hex16(b.companyID))/\(b.uuid)/\(b.major)/\(b.minor)"
        case .eddystoneUID(let b): "eddystone/\(hexString(b.namespace))/\(hexString(b.instance))"
        case .eddystoneTLM: "tlm/" + r.addressString
        // Unresolved: each identifier as heard (it changes every period, with the address).
        case .eddystoneEID(let e): "eid/\(hexString(e.eid))"  // resolved ones: see Scanner (by the key's name)
        case .malformedIBeacon, .other: r.addressString + "/" + hexString(r.data)
        }
    }

    /// The JSON line for this entry: never NaN or Infinity (numbers outside the model are null).
    public func jsonLine(final: Bool) -> String {
        var fields: [(OutputKey, JSONValue)] = [(.kind, .string(frame.kind))]
        let rssi: (OutputKey, JSONValue) = (.rssi, JSONValue(lastRSSI))
        switch frame {
        case .iBeacon(let b): fields += frame.jsonFields + ranging(b.measuredPower)
        case .altBeacon(let b): fields += frame.jsonFields + ranging(b.referenceRSSI)
        case .eddystoneUID(let b): fields += frame.jsonFields + ranging(b.measuredPowerAt1m)
        case .eddystoneTLM: fields += frame.jsonFields + [rssi]
        case .eddystoneEID(let e):
            if let r = resolved { fields += [(.name, .string(r.name)), (.timeCounter, JSONValue(r.timeCounter))] }
            fields += [(.resolved, .bool(resolved != nil))] + frame.jsonFields + ranging(e.measuredPowerAt1m)
        case .malformedIBeacon(let reason):
            fields += [(.reason, .string(reason)), rssi, (.data, .string(hexString(data)))]
        case .other:
            fields += [rssi, (.data, .string(hexString(data)))]
        }
        fields += [(.packets, JSONValue(packets)), (.address, .string(address)), (.addressType, .string(addressType))]
        if let name = resolvedAddress { fields.append((.addressResolvedBy, .string(name))) }
        if final, let c = calibration { fields.append((.calibration, c.json)) }
        if final { fields.append((.final, .bool(true))) }
        return JSONValue(fields).text
    }

    /// RSSI, smoothed RSSI, distance and proximity against the power expected at 1 m.
    private func ranging(_ measuredPower: Int8) -> [(OutputKey, JSONValue)] {
        let smoothed = filter.value
        let d = smoothed.flatMap { Ranging.distance(rssi: $0, measuredPower: measuredPower) }
        return [(.rssi, JSONValue(lastRSSI)), (.rssiSmoothed, JSONValue(smoothed, decimals: 1)),
                (.rssiFilter, .string(RSSIFilter.description)), (.distanceM, JSONValue(d, decimals: 2)),
                (.distanceModel, .string("android-beacon-library")), (.proximity, .string(Ranging.proximity(distance: d).rawValue))]
    }
}

extension BeaconFrame {
    /// A beacon frame's own fields as scan's JSON names them (no RSSI, no ranging); none for what is not a beacon.
    public var jsonFields: [(OutputKey, JSONValue)] {
        func uuid(_ u: BeaconUUID, _ major: UInt16, _ minor: UInt16, _ power: Int8) -> [(OutputKey, JSONValue)] {
            [(.uuid, .string(u.description)), (.major, JSONValue(major)), (.minor, JSONValue(minor)), (.measuredPower, JSONValue(power))]
        }
        switch self {
        case .iBeacon(let b): return uuid(b.uuid, b.major, b.minor, b.measuredPower)
        case .altBeacon(let b): return uuid(b.uuid, b.major, b.minor, b.referenceRSSI) + [(.companyID, JSONValue(b.companyID)), (.reserved, JSONValue(b.reserved))]
        case .eddystoneUID(let b):
            return [(.namespace, .string(hexString(b.namespace))), (.instance, .string(hexString(b.instance))),
                    (.measuredPower0m, JSONValue(b.txPowerAt0m)), (.measuredPower, JSONValue(b.measuredPowerAt1m))]
        case .eddystoneTLM(let t):
            return [(.batteryMv, JSONValue(t.batteryMillivolts)), (.temperatureC, JSONValue(t.celsius, decimals: 2)),
                    (.advCount, JSONValue(t.advertisingCount)), (.uptimeS, JSONValue(Double(t.uptimeTenths) / 10, decimals: 1))]
        case .eddystoneEID(let e):
            return [(.eid, .string(hexString(e.eid))), (.measuredPower0m, JSONValue(e.txPowerAt0m)), (.measuredPower, JSONValue(e.measuredPowerAt1m))]
        case .malformedIBeacon, .other: return []
        }
    }
}

/// What `scan --calibrate` found for one beacon heard from 1 m.
public struct Calibration: Sendable, Hashable {
    public var samples: Int
    public var medianRSSI: Double?
    /// The value for the config's measured_power (rounded median; Eddystone-UID's is at 0 m, the median + 41 dB),
    /// nil with too few samples or for a frame without one.
    public var measuredPower: Int?
    /// The config key's meaning for this frame.
    public var at0m: Bool

    public var json: JSONValue {
        JSONValue([(.samples, JSONValue(samples)), (.medianRSSI, JSONValue(medianRSSI, decimals: 1)), (.measuredPower, JSONValue(measuredPower))]
                  + (at0m ? [(.measuredPowerAt, .string("0 m"))] : []))
    }
}

extension ScanEntry {
    /// Nil unless calibrating; a beacon frame's median and the measured_power it gives.
    public var calibration: Calibration? {
        guard let h = histogram else { return nil }
        let at0m: Bool
        switch frame {
        case .iBeacon, .altBeacon: at0m = false
        case .eddystoneUID: at0m = true
        default: return nil
        }
        let median = h.median
        let power = h.samples >= RSSIHistogram.enough ? median.map { Int(($0).rounded()) + (at0m ? MeasuredPowerCheck.lossAt1m : 0) } : nil
        return Calibration(samples: h.samples, medianRSSI: median, measuredPower: power, at0m: at0m)
    }
}
