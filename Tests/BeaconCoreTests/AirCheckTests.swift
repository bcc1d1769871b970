// `scan --expect`'s verdicts: a config's beacons against reports, without a radio.
@testable import BeaconCore
import BluetoothHCI
import Testing

private let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"

private func config(_ text: String) throws -> BeaconConfiguration { try BeaconConfiguration.parse(Array(text.utf8)) }

private func report(_ frame: AdvertisingData, from address: String, random: Bool = true, rssi: Int8 = -60) -> AdvertisingReport {
    let bytes = address.split(separator: ":").reversed().map { UInt8($0, radix: 16)! }
    return AdvertisingReport(eventType: 3, isExtended: false, addressType: random ? 1 : 0, address: bytes, rssi: rssi, data: frame.bytes)
}

private func hear(_ check: inout AirCheck, _ frame: AdvertisingData, from address: String, at t: UInt64 = 1_000_000) {
    let r = report(frame, from: address)
    check.record(BeaconFrame(advertisingData: r.data), r, at: t)
}

private func ib(_ major: UInt16, _ minor: UInt16, power: Int8 = -59) -> IBeacon {
    IBeacon(uuid: try! BeaconUUID(parsing: uuid), major: major, minor: minor, measuredPower: power)
}

@Suite("scan --expect: checking configs against the air")
struct AirCheckTests {
    static let three = """
        [[beacon]]
        uuid = "\(uuid)"
        major = 7
        minor = 1

        [[beacon]]
        format = "altbeacon"
        uuid = "\(uuid)"
        major = 7
        minor = 2
        measured_power = -61
        reserved = 9

        [[beacon]]
        format = "eddystone-uid"
        namespace = "00112233445566778899"
        instance = "A1B2C3D4E5F6"

        [[beacon]]
        format = "eddystone-tlm"

        """

    @Test("every beacon heard as configured: complete and a success; telemetry paired by its UID's address")
    func allHeard() throws {
        let c = try config(Self.three + "[controller]\nbackend = \"hci\"\n")
        let expected = ExpectedBeacon.all(in: c, path: "/f.conf")
        #expect(expected.map(\.index) == [1, 2, 3, 4] && expected[3].follows == 2 && !expected[3].anyTelemetry)
        var check = AirCheck(expected)
        hear(&check, ib(7, 1).advertisingData, from: "C1:00:00:00:00:01")
        hear(&check, AltBeacon(uuid: try BeaconUUID(parsing: uuid), major: 7, minor: 2, referenceRSSI: -61, reserved: 9).advertisingData,
             from: "C1:00:00:00:00:02")
        #expect(!check.complete)
        let tlm = EddystoneTLM(batteryMillivolts: 0, temperature: nil, advertisingCount: 5, uptimeTenths: 10).advertisingData
        // Telemetry from another sender first: not this config's (its UID is not heard from there).
        hear(&check, tlm, from: "C1:00:00:00:00:09")
        hear(&check, EddystoneUID(namespace: [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99],
                                  instance: [0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6], txPowerAt0m: -18)!.advertisingData,
             from: "C1:00:00:00:00:03")
        #expect(check.results[3].verdict == .missing)
        hear(&check, tlm, from: "C1:00:00:00:00:03")
        #expect(check.complete && check.succeeded)
        #expect(check.results.map(\.heard?.address) == ["C1:00:00:00:00:01", "C1:00:00:00:00:02", "C1:00:00:00:00:03", "C1:00:00:00:00:03"])
    }

    @Test("the identity with other content is a mismatch naming what differs", arguments: [
        // Another measured power.
        (ib(7, 1, power: -65).advertisingData, ["measured_power -65 on the air; the config says -59"]),
        // The same uuid/major/minor as an AltBeacon: the same beacon to a receiver, in another format.
        (AltBeacon(uuid: try! BeaconUUID(parsing: uuid), major: 7, minor: 1, referenceRSSI: -59).advertisingData,
         ["heard as an AltBeacon; the config says iBeacon"]),
    ])
    func mismatch(frame: AdvertisingData, differences: [String]) throws {
        var check = AirCheck(ExpectedBeacon.all(in: try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n"), path: "/f.conf"))
        hear(&check, frame, from: "C1:00:00:00:00:01")
        let e = check.results[0]
        #expect(e.verdict == .mismatch && e.heard == nil)
        #expect(e.mismatches.map(\.differences) == [differences])
        #expect(check.complete && !check.succeeded)
        // A frame as configured later does not hide the mismatch: both are reported.
        hear(&check, ib(7, 1).advertisingData, from: "C1:00:00:00:00:02")
        #expect(check.results[0].verdict == .mismatch && check.results[0].heard?.address == "C1:00:00:00:00:02")
    }

    @Test("a report says whether it may have changed a verdict: a first sighting or a new mismatch, not a repeat")
    func changes() throws {
        var check = AirCheck(ExpectedBeacon.all(in: try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n"), path: "/f.conf"))
        func hear(_ frame: AdvertisingData, _ address: String) -> Bool {
            let r = report(frame, from: address)
            return check.record(BeaconFrame(advertisingData: r.data), r, at: 1)
        }
        #expect(hear(ib(7, 1).advertisingData, "C1:00:00:00:00:01"))
        #expect(!hear(ib(7, 1).advertisingData, "C1:00:00:00:00:01"))
        #expect(hear(ib(7, 1, power: -65).advertisingData, "C1:00:00:00:00:02"))
        #expect(!hear(ib(7, 1, power: -65).advertisingData, "C1:00:00:00:00:02"))
        #expect(!hear(ib(7, 2).advertisingData, "C1:00:00:00:00:03"))  // another identity: listed apart, no verdict
    }

    @Test("a chosen address must be the one the frame comes from")
    func chosenAddress() throws {
        var check = AirCheck(ExpectedBeacon.all(in: try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\naddress = \"C6:12:34:56:78:9A\"\n"), path: "/f.conf"))
        #expect(check.entries[0].expected.chosenAddress == "C6:12:34:56:78:9A")
        hear(&check, ib(7, 1).advertisingData, from: "C6:12:34:56:78:9B")
        #expect(check.results[0].mismatches.first?.differences == ["from C6:12:34:56:78:9B (random); the config chooses C6:12:34:56:78:9A"])
        var right = AirCheck(check.entries.map(\.expected))
        hear(&right, ib(7, 1).advertisingData, from: "C6:12:34:56:78:9A")
        #expect(right.succeeded)
    }

    @Test("beacons of an expected UUID that no config names are listed apart, and change no verdict")
    func unexpected() throws {
        var check = AirCheck(ExpectedBeacon.all(in: try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n"), path: "/f.conf"))
        hear(&check, ib(7, 2).advertisingData, from: "C1:00:00:00:00:05")
        hear(&check, IBeacon(uuid: try BeaconUUID(parsing: "74278BDA-B644-4520-8F0C-720EAF059935"), major: 1, minor: 1).advertisingData, from: "C1:00:00:00:00:06")
        #expect(check.unexpected.count == 1 && check.unexpected.values.first?.address == "C1:00:00:00:00:05")
        #expect(check.results[0].verdict == .missing)
    }

    @Test("through mgmt (backend auto's choice here) the kernel picks each instance's address: any telemetry frame counts")
    func telemetryWithoutPairing() throws {
        let c = try config(Self.three)
        let e = ExpectedBeacon.all(in: c, path: "/f.conf")
        #expect(e[3].follows == nil && e[3].anyTelemetry)
        var check = AirCheck(e)
        hear(&check, EddystoneTLM(batteryMillivolts: 0, temperature: nil, advertisingCount: 1, uptimeTenths: 1).advertisingData, from: "5A:00:00:00:00:01")
        #expect(check.results[3].verdict == .heard)
    }

    @Test("two configs with the same identity: both satisfied by one frame, and each says so")
    func sameIdentity() throws {
        let c = try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n")
        var check = AirCheck(ExpectedBeacon.all(in: c, path: "/a.conf") + ExpectedBeacon.all(in: c, path: "/b.conf", base: 1))
        #expect(check.entries[1].sameIdentityAs == 0)
        hear(&check, ib(7, 1).advertisingData, from: "C1:00:00:00:00:01")
        #expect(check.succeeded)
    }

    @Test("the bounds: a flood of mismatching senders keeps 4, of unknown identities 256")
    func bounded() throws {
        var check = AirCheck(ExpectedBeacon.all(in: try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n"), path: "/f.conf"))
        for i in 0..<2000 {
            let a = "C1:00:00:00:\(String(format2(i >> 8))):\(String(format2(i & 0xFF)))"
            hear(&check, ib(7, 1, power: -65).advertisingData, from: a)
            hear(&check, ib(8, UInt16(i)).advertisingData, from: a)
        }
        #expect(check.results[0].mismatches.count == AirCheck.mismatchLimit)
        #expect(check.unexpected.count == AirCheck.unexpectedLimit)
    }

    @Test("JSON lines and the Prometheus text: the verdicts, the fields, escaped labels")
    func output() throws {
        var check = AirCheck(ExpectedBeacon.all(in: try config(Self.three), path: "/etc/beacond/shop \"7\".conf"))
        hear(&check, ib(7, 1).advertisingData, from: "C1:00:00:00:00:01", at: 1_764_680_000_250_000)
        let line = AirCheck.jsonLine(check.results[0])
        #expect(line.hasPrefix("{\"kind\":\"expect\",\"status\":\"heard\",\"config\":\"/etc/beacond/shop \\\"7\\\".conf\",\"line\":1,\"beacon\":1,\"format\":\"ibeacon\",\"uuid\":\"\(uuid)\",\"major\":7,\"minor\":1,\"measured_power\":-59,"))
        #expect(line.contains("\"rssi\":-60,\"address\":\"C1:00:00:00:00:01\",\"address_type\":\"random\",\"packets\":1,\"last_seen\":1764680000.250}"))
        let text = check.prometheusText(device: "hci1", startedAt: 1_764_679_990_000_000, duration: 30)
        // One label per identifier, as the config writes them (Eddystone's hex in lowercase), and no prose `id`.
        #expect(text.contains("beacond_verify_beacon_heard{config=\"/etc/beacond/shop \\\"7\\\".conf\",beacon=\"1\",format=\"ibeacon\",uuid=\"\(uuid)\",major=\"7\",minor=\"1\",device=\"hci1\"} 1\n"))
        #expect(text.contains("beacond_verify_beacon_heard{config=\"/etc/beacond/shop \\\"7\\\".conf\",beacon=\"2\",format=\"altbeacon\",uuid=\"\(uuid)\",major=\"7\",minor=\"2\",device=\"hci1\"} 0\n"))
        #expect(text.contains("beacond_verify_beacon_heard{config=\"/etc/beacond/shop \\\"7\\\".conf\",beacon=\"3\",format=\"eddystone-uid\",eddystone_namespace=\"00112233445566778899\",eddystone_instance=\"a1b2c3d4e5f6\",device=\"hci1\"} 0\n"))
        #expect(text.contains("beacond_verify_beacon_mismatch{config=\"/etc/beacond/shop \\\"7\\\".conf\",beacon=\"4\",format=\"eddystone-tlm\",device=\"hci1\"} 0\n"))
        // Prometheus' own `instance` (the scrape target's) and Kubernetes' `namespace` are not taken.
        #expect(!text.contains(",id=") && !text.contains(",instance=") && !text.contains(",namespace="))
        #expect(text.contains("beacond_verify_beacon_last_seen_timestamp_seconds{config=\"/etc/beacond/shop \\\"7\\\".conf\",beacon=\"1\""))
        #expect(text.contains("beacond_verify_beacons{state=\"missing\",device=\"hci1\"} 3\n"))
        #expect(text.contains("beacond_verify_success{device=\"hci1\"} 0\n"))
        #expect(text.contains("beacond_verify_last_run_timestamp_seconds{device=\"hci1\"} 1764679990.000\n"))
        #expect(text.split(separator: "\n").filter { $0 == "# TYPE beacond_verify_beacon_rssi_dbm gauge" }.count == 1)
    }

    static let eid = "[beacon]\nformat = \"eddystone-eid\"\nidentity_key_file = \"k\"\nrotation_exponent = 10\nmeasured_power = -20\n"

    /// The EID expectations of `text` at `path`, with a key as the loader would give them.
    static func eidExpectations(_ text: String = eid, path: String, base: Int = 0, key: UInt8 = 7) throws -> [ExpectedBeacon] {
        try ExpectedBeacon.all(in: config(text), path: path, base: base).map { e in
            var e = e
            if case .eddystoneEID(var b) = e.beacon { b.key = IdentityKey([UInt8](repeating: key, count: 16)); e.beacon = .eddystoneEID(b) }
            return e
        }
    }

    @Test("an EID's period against the scanner's clock: 0 within it, + while still to come, − once ended", arguments: [
        (UInt32(1024), UInt32(1024), Int64(0)), (1024, 2047, 0), (1024, 2048, -1), (1024, 3072, -1025), (1024, 1000, 24),
        (0, 4_294_967_295, -4_294_966_272),
    ])
    func eidOffset(start: UInt32, now: UInt32, offset: Int64) {
        #expect(EddystoneEID.offset(ofPeriod: start, exponent: 10, at: now) == offset)
    }

    @Test("--expect takes an EID of the current period ±60 s only: an older one is a recording (or a clock behind), a later one a clock ahead, each named")
    func eidReplayWindow() throws {
        let start = EddystoneEID.periodStart(1_764_680_000, exponent: 10)
        let frame = EddystoneEID(txPowerAt0m: -20, eid: [1, 2, 3, 4, 5, 6, 7, 8])!.advertisingData
        func heard(period: UInt32, at now: UInt32) throws -> AirCheck.Entry {
            var check = AirCheck(try Self.eidExpectations(path: "/e.conf"))
            let r = report(frame, from: "C5:00:00:00:00:01")
            check.record(BeaconFrame(advertisingData: r.data), r, at: 1, eidMatch: AirCheck.EIDMatch(key: 0, periodStart: period, heardAt: now))
            return check.results[0]
        }
        let current = try heard(period: start, at: start + 30)
        #expect(current.verdict == .heard && current.heard?.eidOffset == 0)
        #expect(AirCheck.jsonLine(current).contains("\"eid_period_offset_s\":0}"))
        #expect(AirCheck.textLine(current).contains(", the EID of the current period"))
        // The last period's EID 31 s after the boundary: within the skew a clock may have.
        let late = try heard(period: start - 1024, at: start + 30)
        #expect(late.verdict == .heard && late.heard?.eidOffset == -31)
        let replay = try heard(period: start - 2048, at: start + 500)
        #expect(replay.verdict == .mismatch && replay.heard == nil)
        #expect(replay.mismatches.map { $0.differences } == [["the EID of 2 periods ago by this scanner's clock (a recording replayed, or the beacon's clock is behind): --expect takes the current period ±60 s"]])
        #expect(replay.mismatches[0].sighting.eidOffset == -1525)
        let ahead = try heard(period: start + 1024, at: start + 30)
        #expect(ahead.verdict == .mismatch)
        #expect(ahead.mismatches[0].differences[0].hasPrefix("the EID of 1 period ahead by this scanner's clock (the beacon's clock is ahead)"))
        #expect(ahead.mismatches[0].sighting.eidOffset == 994)
    }

    @Test("two expectations with one key (and K): one entry in the resolver, and one frame heard for both; another key apart")
    func eidSharedKey() throws {
        let expected = try Self.eidExpectations(path: "/a.conf") + Self.eidExpectations(path: "/b.conf", base: 1)
            + Self.eidExpectations(path: "/c.conf", base: 2, key: 9) + Self.eidExpectations(Self.eid.split(separator: "\n").map { $0 == "rotation_exponent = 10" ? "rotation_exponent = 12" : String($0) }.joined(separator: "\n") + "\n", path: "/d.conf", base: 3)
        var check = AirCheck(expected)
        #expect(check.eidKeys.map { $0.expectations } == [[0, 1], [2], [3]])
        let start = EddystoneEID.periodStart(1_764_680_000, exponent: 10)
        let r = report(EddystoneEID(txPowerAt0m: -20, eid: [1, 2, 3, 4, 5, 6, 7, 8])!.advertisingData, from: "C5:00:00:00:00:01")
        check.record(BeaconFrame(advertisingData: r.data), r, at: 1, eidMatch: AirCheck.EIDMatch(key: 0, periodStart: start, heardAt: start))
        #expect(check.results.map { $0.verdict } == [AirCheck.Verdict.heard, .heard, .missing, .missing])
        // The receiver's clock is in the metrics when EIDs are judged by it (and only then).
        #expect(check.prometheusText(device: "hci1", startedAt: 0, duration: 1, clockSynchronized: false).contains("beacond_verify_clock_synchronized{device=\"hci1\"} 0\n"))
        #expect(check.prometheusText(device: "hci1", startedAt: 0, duration: 1).contains("beacond_verify_clock_synchronized{device=\"hci1\"} 1\n"))
        // An EID beacon is named by its key file, as the config writes it; the key itself (07 × 16) is in no label.
        let text = check.prometheusText(device: "hci1", startedAt: 0, duration: 1)
        #expect(text.contains("beacond_verify_beacon_heard{config=\"/a.conf\",beacon=\"1\",format=\"eddystone-eid\",key_file=\"k\",device=\"hci1\"} 1\n"))
        #expect(text.contains("beacond_verify_beacon_heard{config=\"/c.conf\",beacon=\"1\",format=\"eddystone-eid\",key_file=\"k\",device=\"hci1\"} 0\n"))
        #expect(!text.contains("0707070707070707"))
        let plain = AirCheck(ExpectedBeacon.all(in: try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n"), path: "/f.conf"))
        #expect(!plain.prometheusText(device: "hci1", startedAt: 0, duration: 1, clockSynchronized: false).contains("clock_synchronized"))
    }

    @Test("a beacon heard as configured and also with other content: a mismatch, and the metrics and text say it is on the air too")
    func heardAndMismatched() throws {
        var check = AirCheck(ExpectedBeacon.all(in: try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n"), path: "/f.conf"))
        hear(&check, ib(7, 1).advertisingData, from: "C1:00:00:00:00:01")
        hear(&check, ib(7, 1, power: -40).advertisingData, from: "C1:00:00:00:00:02")
        #expect(check.results[0].verdict == .mismatch)
        let text = check.prometheusText(device: "hci1", startedAt: 0, duration: 1)
        #expect(text.contains("beacond_verify_beacon_heard{config=\"/f.conf\",beacon=\"1\",format=\"ibeacon\",uuid=\"\(uuid)\",major=\"7\",minor=\"1\",device=\"hci1\"} 1\n"))
        #expect(text.contains("beacond_verify_beacon_mismatch{config=\"/f.conf\",beacon=\"1\",format=\"ibeacon\",uuid=\"\(uuid)\",major=\"7\",minor=\"1\",device=\"hci1\"} 1\n"))
        #expect(AirCheck.textLine(check.results[0]).contains("(also heard exactly as configured: the beacon is on the air, and something else sends its identity)"))
        // Only the other content: heard 0.
        var only = AirCheck(ExpectedBeacon.all(in: try config("[beacon]\nuuid = \"\(uuid)\"\nmajor = 7\nminor = 1\n"), path: "/f.conf"))
        hear(&only, ib(7, 1, power: -40).advertisingData, from: "C1:00:00:00:00:02")
        #expect(only.prometheusText(device: "hci1", startedAt: 0, duration: 1).contains("beacond_verify_beacon_heard{config=\"/f.conf\",beacon=\"1\",format=\"ibeacon\",uuid=\"\(uuid)\",major=\"7\",minor=\"1\",device=\"hci1\"} 0\n"))
        #expect(!AirCheck.textLine(only.results[0]).contains("also heard"))
    }
}

private func format2(_ n: Int) -> String { let h = Array("0123456789ABCDEF"); return String(h[n >> 4 & 0xF]) + String(h[n & 0xF]) }
