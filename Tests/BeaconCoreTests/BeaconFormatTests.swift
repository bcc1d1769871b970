// AltBeacon and Eddystone UID/TLM: exact frames (written out from the specifications' layouts, not from the code),
// and recognition of received data, including what must not be taken for them.
import BluetoothHCI
@testable import BeaconCore
import Testing

private func hex(_ s: String) -> [UInt8] {
    let c = Array(s.utf8.filter { $0 != 0x20 })
    return stride(from: 0, to: c.count, by: 2).map { UInt8(String(decoding: c[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

private let uuid = BeaconUUID(bytes: hex("E2C56DB5DFFB48D2B060D0F5A71096E0"))!

@Suite("beacon formats")
struct BeaconFormatTests {
    @Test("AltBeacon: 02 01 06 1B FF <company LE> BE AC <id 20> <reference RSSI> <reserved>, 31 bytes")
    func altBeacon() {
        let b = AltBeacon(uuid: uuid, major: 0x0102, minor: 0xFFFE, referenceRSSI: -59, companyID: 0x0118, reserved: 0x7A)
        let bytes = b.advertisingData.bytes
        #expect(bytes == hex("020106 1BFF 1801 BEAC E2C56DB5DFFB48D2B060D0F5A71096E0 0102 FFFE C5 7A"))
        #expect(bytes.count == 31)
        #expect(BeaconFrame(advertisingData: bytes) == .altBeacon(b))
    }

    @Test("Eddystone-UID: service UUID list, then service data with frame type 0x00, 31 bytes")
    func eddystoneUID() {
        let b = EddystoneUID(namespace: hex("00112233445566778899"), instance: hex("AABBCCDDEEFF"), txPowerAt0m: -18)!
        let bytes = b.advertisingData.bytes
        #expect(bytes == hex("020106 0303AAFE 1716AAFE 00 EE 00112233445566778899 AABBCCDDEEFF 0000"))
        #expect(b.measuredPowerAt1m == -59)
        #expect(BeaconFrame(advertisingData: bytes) == .eddystoneUID(b))
        // Senders that leave out the two reserved bytes are read too.
        #expect(BeaconFrame(advertisingData: hex("0303AAFE 1516AAFE 00 EE 00112233445566778899 AABBCCDDEEFF")) == .eddystoneUID(b))
        #expect(EddystoneUID(namespace: [1], instance: hex("AABBCCDDEEFF"), txPowerAt0m: 0) == nil)
    }

    @Test("Eddystone-TLM v0: battery, 8.8 temperature (0x8000 = none), PDU count, 0.1 s uptime, 25 bytes")
    func eddystoneTLM() {
        let t = EddystoneTLM(batteryMillivolts: 0, temperature: 0x1A80, advertisingCount: 0x01020304, uptimeTenths: 36000)
        let bytes = t.advertisingData.bytes
        #expect(bytes == hex("020106 0303AAFE 1116AAFE 20 00 0000 1A80 01020304 00008CA0"))
        #expect(t.celsius == 26.5)
        #expect(BeaconFrame(advertisingData: bytes) == .eddystoneTLM(t))
        let none = EddystoneTLM(batteryMillivolts: 3000, temperature: nil, advertisingCount: 0, uptimeTenths: 0)
        #expect(none.advertisingData.bytes.suffix(12) == hex("0BB8 8000 00000000 00000000"))
        #expect(BeaconFrame(advertisingData: none.advertisingData.bytes) == .eddystoneTLM(none))
    }

    @Test("what looks close is not taken: encrypted TLM, URL frames, short manufacturer data, another service")
    func notTheseFormats() {
        #expect(BeaconFrame(advertisingData: hex("0303AAFE 1116AAFE 20 01 0000 1A80 01020304 00008CA0")) == .other)  // TLM v1
        #expect(BeaconFrame(advertisingData: hex("0303AAFE 0B16AAFE 10 EE 03 6578616D706C65")) == .other)  // URL
        #expect(BeaconFrame(advertisingData: hex("020106 1AFF 1801 BEAC E2C56DB5DFFB48D2B060D0F5A71096E0 0102 FFFE C5")) == .other)
        #expect(BeaconFrame(advertisingData: hex("1716 AAFF 00 EE 00112233445566778899 AABBCCDDEEFF 0000")) == .other)
        #expect(BeaconFrame(advertisingData: hex("0316AAFE")) == .other)
    }
}
