// What `beacond scan` shows: the filter's choices and the tables, as values (no radio, no terminal).
@testable import BeaconCore
import BluetoothHCI
import Testing

private let shop = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"

private func entry(_ data: AdvertisingData, from address: String, rssi: Int8 = -60, calibrating: Bool = false) -> ScanEntry {
    let bytes = address.split(separator: ":").reversed().map { UInt8($0, radix: 16)! }
    let r = AdvertisingReport(eventType: 3, isExtended: false, addressType: 1, address: bytes, rssi: rssi, data: data.bytes)
    return ScanEntry(frame: BeaconFrame(advertisingData: r.data), report: r, calibrating: calibrating)
}

private func ib(_ major: UInt16, _ minor: UInt16, uuid: String = shop) throws -> AdvertisingData {
    IBeacon(uuid: try BeaconUUID(parsing: uuid), major: major, minor: minor, measuredPower: -59).advertisingData
}

@Suite("scan's view")
struct ScanViewTests {
    @Test("--uuid, --major and --minor narrow iBeacons; a narrowed scan drops Eddystone; only --all keeps foreign frames")
    func filter() throws {
        let mine = try entry(ib(7, 1), from: "C1:00:00:00:00:01").frame
        let otherMinor = try entry(ib(7, 2), from: "C1:00:00:00:00:02").frame
        let otherUUID = try entry(ib(7, 1, uuid: "74278BDA-B644-4520-8F0C-720EAF059935"), from: "C1:00:00:00:00:03").frame
        let foreign = BeaconFrame(advertisingData: [2, 0x01, 0x06, 3, 0xFF, 0x4C, 0x00])
        let narrowed = ScanFilter(uuid: try BeaconUUID(parsing: shop), major: 7, minor: 1)
        #expect(narrowed.narrows && !ScanFilter().narrows)
        #expect(narrowed.admits(mine) && !narrowed.admits(otherMinor) && !narrowed.admits(otherUUID))
        #expect(ScanFilter(major: 7).admits(otherMinor) && ScanFilter(major: 7).admits(otherUUID))
        #expect(ScanFilter().admits(mine) && !ScanFilter().admits(foreign) && ScanFilter(all: true).admits(foreign))
    }

    @Test("the table: a header, a ranged row per beacon with its address, and a line when nothing was heard")
    func table() throws {
        var seen = ScanTable<ScanEntry>(capacity: 10)
        #expect(ScanView.table(seen, heading: "hci0").contains("(no beacons yet)"))
        let e = try entry(ib(7, 1), from: "C1:00:00:00:00:01", rssi: -59)
        seen.record("C1", make: { e }) { $0.heard(AdvertisingReport(eventType: 3, isExtended: false, addressType: 1,
            address: [1, 0, 0, 0, 0, 0xC1], rssi: -59, data: e.data), at: 1_000_000) }
        let text = ScanView.table(seen, heading: "Scanning hci0")
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == "Scanning hci0")
        let row = try #require(lines.first { $0.hasPrefix("ibeacon") || $0.hasPrefix("iBeacon") })
        #expect(row.contains(shop) && row.contains(" 7 ") && row.contains("C1:00:00:00:00:01 (random)"))
        #expect(row.contains("-59"))
        #expect(!text.contains("(no beacons yet)"))
    }

    @Test("calibration without enough samples says to listen longer; nothing heard says so")
    func calibration() throws {
        #expect(ScanView.calibration([], seconds: 3).contains("(no beacon heard: nothing to calibrate)"))
        let e = try entry(ib(7, 1), from: "C1:00:00:00:00:01", calibrating: true)
        let text = ScanView.calibration([e], seconds: 3)
        #expect(text.contains("Calibration (3.0 s;") && text.contains("listen longer"))
    }

    @Test("pad keeps at least one space after a value wider than its column")
    func padding() {
        #expect(pad("ab", 4) == "ab  " && pad("abcd", 4) == "abcd " && pad("abcdef", 4) == "abcdef ")
    }
}

@Suite("scan --json: one key, one type")
struct ScanJSONKeyTests {
    @Test("an EID frame from an address a resolving key resolved: `resolved` once (the EID's boolean), the address's key under `address_resolved_by`")
    func resolvedOnce() throws {
        let eid = EddystoneEID(txPowerAt0m: -20, eid: [1, 2, 3, 4, 5, 6, 7, 8])!
        var e = entry(eid.advertisingData, from: "4C:00:00:00:00:01")
        e.resolvedAddress = "shop7-door"
        let line = e.jsonLine(final: false)
        #expect(line.split(separator: "\"resolved\":", omittingEmptySubsequences: false).count == 2, "\(line)")
        #expect(line.contains("\"resolved\":false") && line.contains("\"address_resolved_by\":\"shop7-door\""), "\(line)")
        var ib7 = try entry(ib(7, 1), from: "4C:00:00:00:00:02")
        ib7.resolvedAddress = "shop7-door"
        let l2 = ib7.jsonLine(final: false)
        #expect(!l2.contains("\"resolved\"") && l2.contains("\"address_resolved_by\":\"shop7-door\""), "\(l2)")
    }
}
