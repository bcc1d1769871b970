// The iBeacon frame against golden vectors, UUIDs, device specs.
@testable import BeaconCore
import BluetoothHCI
import TestSupport
import Testing

private let apple = try! BeaconUUID(parsing: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")

@Suite("iBeacon payload")
struct PayloadTests {
    @Test("golden vectors", arguments: [
        // Apple's AirLocate sample, defaults.
        (UInt16(1), UInt16(1), Int8(-59), "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010001c5"),
        // Extremes of major/minor: big-endian on air (a byte-swapped major is a real bug elsewhere).
        (0, 0, -59, "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000000000c5"),
        (65535, 65535, -59, "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e0ffffffffc5"),
        (0x0102, 0x0304, -59, "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e001020304c5"),
        // Measured power is a signed byte.
        (1, 1, -127, "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e00001000181"),
        (1, 1, 0, "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e00001000100"),
        (1, 1, 20, "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e00001000114"),
    ])
    func golden(major: UInt16, minor: UInt16, power: Int8, hex: String) {
        let data = IBeacon(uuid: apple, major: major, minor: minor, measuredPower: power).advertisingData
        #expect(hexString(data.bytes) == hex)
        #expect(data.bytes.count == 30)
    }
}

@Suite("UUIDs")
struct UUIDTests {
    @Test("parses any case and prints uppercase, or lowercase on request")
    func roundTrip() throws {
        let u = try BeaconUUID(parsing: "e2c56db5-dffb-48d2-B060-d0f5a71096e0")
        #expect(u == apple && u.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        #expect(u.formatted(uppercase: false) == "e2c56db5-dffb-48d2-b060-d0f5a71096e0")
    }

    @Test("refusals name the character", arguments: [
        ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E", 35, "too short"),
        ("E2C56DB5-DFFB-48D2-B060-D0F5A71096E00", 36, "too long"),
        ("{E2C56DB5-DFFB-48D2-B060-D0F5A71096E}", 0, "hex digit at character 1, found '{'"),
        ("E2C56DB5_DFFB-48D2-B060-D0F5A71096E0", 8, "expected '-' at character 9, found '_'"),
        ("E2C56DB5-DFFB-48D2-B060-D0F5A71096É0", 34, "found U+00C9"),
        ("", 0, "too short"),
    ])
    func refusals(text: String, offset: Int, message: String) {
        let e = thrown(BeaconUUID.ParseError.self) { _ = try BeaconUUID(parsing: text) }
        #expect(e != nil)
        #expect(e?.offset == offset)
        #expect(e?.message.contains(message) == true, "\(e?.message ?? "")")
    }

    @Test("version 4: version and variant bits are forced whatever the random bytes")
    func v4() {
        for b: UInt8 in [0x00, 0xFF, 0x5A] {
            let u = BeaconUUID.version4(random: [UInt8](repeating: b, count: 16))
            #expect(u.isVersion4 && u.bytes[6] >> 4 == 4 && u.bytes[8] & 0xC0 == 0x80)
        }
    }
}

@Suite("device specs")
struct DeviceSpecTests {
    @Test("accepted forms", arguments: [
        ("hci0", DeviceSpec.kernel(index: 0)), ("hci12", .kernel(index: 12)),
        ("tcp:127.0.0.1:9000", .tcp(host: "127.0.0.1", port: 9000)), ("tcp:[::1]:9000", .tcp(host: "::1", port: 9000)),
        ("tcp:gateway.local:1234", .tcp(host: "gateway.local", port: 1234)),
        ("unix:/run/bt.sock", .unix(path: "/run/bt.sock")),
        ("serial:/dev/ttyAMA0", .serial(path: "/dev/ttyAMA0", baud: 115_200)),
        ("serial:/dev/ttyUSB0:1000000", .serial(path: "/dev/ttyUSB0", baud: 1_000_000)),
    ])
    func accepted(text: String, spec: DeviceSpec) throws {
        #expect(try DeviceSpec(parsing: text) == spec)
        #expect(try DeviceSpec(parsing: spec.description) == spec)  // prints back to something that parses the same
    }

    @Test("refused forms", arguments: ["hci", "hcix", "hci65535", "hci-1", "tcp:host", "tcp::80", "tcp:h:0", "tcp:h:70000",
                                       "unix:", "serial:", "serial:/dev/x:12345", "usb:1", "bluetooth", ""])
    func refused(text: String) {
        #expect(throws: DeviceSpec.ParseError.self) { try DeviceSpec(parsing: text) }
    }

    @Test("suggestions: edit distance")
    func suggestions() {
        #expect(editDistance("mesured_power", "measured_power") == 1)
        #expect(closest("majr", among: ["uuid", "major", "minor"]) == "major")
        #expect(closest("colour", among: ["uuid", "major", "minor"]) == nil)
    }
}
