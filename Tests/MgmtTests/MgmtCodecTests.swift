// Golden bytes for the management commands and events beacond uses (layouts from BlueZ's doc/mgmt-api.txt).
import BluetoothHCI
@testable import Mgmt
import Testing

private func hex(_ s: String) -> [UInt8] {
    let d = Array(s.filter { !$0.isWhitespace })
    return stride(from: 0, to: d.count, by: 2).map { UInt8(String(d[$0...$0 + 1]), radix: 16)! }
}

private let beacon = hex("0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010001c5")

@Suite("mgmt codec")
struct MgmtCodecTests {
    @Test("command frames: opcode, index, exact length, parameters", arguments: [
        // No parameters, no controller.
        (MgmtCommand.readVersion, UInt16(0xFFFF), "0100 ffff 0000"),
        (.readControllerInformation, 0, "0400 0000 0000"),
        (.setPowered(true), 1, "0500 0100 0100 01"),
        (.readAdvertisingFeatures, 0, "3d00 0000 0000"),
        (.removeAdvertising(instance: 5), 0, "3f00 0000 0100 05"),
        // Add Advertising: instance, flags u32, duration u16, timeout u16, adv len, scan rsp len, data: 11 + 30 bytes.
        (.addAdvertising(instance: 5, flags: [], duration: 0, timeout: 0, data: beacon, scanResponse: []), 0,
         "3e00 0000 2900 05 00000000 0000 0000 1e 00" + "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010001c5"),
        // Add Extended Advertising Parameters: exactly 18 bytes; intervals (bit 14) and TX power (bit 15) valid.
        (.addExtendedAdvertisingParameters(instance: 5, flags: [.intervalsValid, .txPowerValid], duration: 0, timeout: 0,
                                           minInterval: AdvertisingInterval(units: 160)!, maxInterval: AdvertisingInterval(units: 160)!, txPower: -4), 0,
         "5400 0000 1200 05 00c00000 0000 0000 a0000000 a0000000 fc"),
        (.addExtendedAdvertisingParameters(instance: 2, flags: [.connectable, .intervalsValid], duration: 0, timeout: 0,
                                           minInterval: AdvertisingInterval(units: 0x20)!, maxInterval: AdvertisingInterval(units: 0x20)!, txPower: 0), 3,
         "5400 0300 1200 02 01400000 0000 0000 20000000 20000000 00"),
        // Add Extended Advertising Data: instance, adv len, scan rsp len, data: 3 + 30 bytes.
        (.addExtendedAdvertisingData(instance: 5, data: beacon, scanResponse: []), 0,
         "5500 0000 2100 05 1e 00" + "0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010001c5"),
    ])
    func commands(command: MgmtCommand, index: UInt16, expected: String) {
        #expect(command.frame(index: index) == hex(expected), "\(command.opcode)")
    }

    @Test("events decode with their index")
    func events() throws {
        #expect(try MgmtEvent(frame: hex("0100 0000 0400 5400 00 05")) ==
                MgmtEvent(index: 0, kind: .commandComplete(.addExtendedAdvertisingParameters, .success, [5])))
        #expect(try MgmtEvent(frame: hex("0200 0000 0300 5400 14")) ==
                MgmtEvent(index: 0, kind: .commandStatus(.addExtendedAdvertisingParameters, .permissionDenied)))
        #expect(try MgmtEvent(frame: hex("0400 0100 0000")) == MgmtEvent(index: 1, kind: .indexAdded))
        #expect(try MgmtEvent(frame: hex("0500 0100 0000")) == MgmtEvent(index: 1, kind: .indexRemoved))
        #expect(try MgmtEvent(frame: hex("0600 0000 0400 01060000")) == MgmtEvent(index: 0, kind: .newSettings(0x601)))
        #expect(try MgmtEvent(frame: hex("2300 0000 0100 02")) == MgmtEvent(index: 0, kind: .advertisingAdded(instance: 2)))
        #expect(try MgmtEvent(frame: hex("2400 0000 0100 05")) == MgmtEvent(index: 0, kind: .advertisingRemoved(instance: 5)))
        #expect(try MgmtEvent(frame: hex("0b00 0000 0100 07")) == MgmtEvent(index: 0, kind: .other(code: 0x0B, [7])))
    }

    @Test("malformed events are errors", arguments: ["0100 0000", "0100 0000 0500 5400 00", "0600 0000 0200 0100", "2400 0000 0000"])
    func malformed(frame: String) {
        #expect(throws: MgmtEvent.Malformed.self) { try MgmtEvent(frame: hex(frame)) }
    }

    @Test("Read Controller Information and Read Advertising Features replies")
    func replies() throws {
        let info = try MgmtControllerInformation(returnParameters: hex("010203040506 09 0200 ffff0000 01020000 000000") + [UInt8](repeating: 0, count: 260))
        #expect(info.address == BluetoothAddress(wire: [1, 2, 3, 4, 5, 6], public: true) && info.bluetoothVersion == 9 && info.manufacturer == 2)
        #expect(info.isPowered && info.supportsLE && info.currentSettings == 0x201)
        let f = try MgmtAdvertisingFeatures(returnParameters: hex("ff7f0100 1f 1f 05 02 01 02"))
        #expect(f.supportedFlags.contains(.canSetTxPower) && f.maxAdvertisingDataLength == 31 && f.maxInstances == 5)
        #expect(f.instances == [1, 2])
        #expect(MgmtStatus.permissionDenied.description == "Permission Denied (0x14)")
        #expect(MgmtOpcode.addExtendedAdvertisingData.description == "Add Extended Advertising Data (0x0055)")
    }
}
