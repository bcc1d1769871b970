// Golden bytes for every command and event beacond uses, and the H4 framer under every split.
@testable import BluetoothHCI
import Testing

private func hex(_ s: String) -> [UInt8] {
    let digits = Array(s.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

private let beaconData = try! AdvertisingData(raw: hex("0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010001c5"))
private let nonconn100 = LEAdvertisingParameters(interval: AdvertisingInterval(milliseconds: 100)!, type: .nonConnectableUndirected)

@Suite("HCI commands encode to the spec's bytes")
struct CommandGoldenTests {
    @Test("each command's H4 frame", arguments: [
        // Reset: OGF 3 OCF 3, no parameters.
        (HCICommand.reset, "01 030c 00"),
        (.readLocalVersionInformation, "01 0110 00"),
        (.readLocalSupportedCommands, "01 0210 00"),
        (.leReadLocalSupportedFeatures, "01 0320 00"),
        (.leReadAdvertisingPhysicalChannelTxPower, "01 0720 00"),
        // 100 ms = 160 units = 0x00A0, little-endian; type 3 ADV_NONCONN_IND; public address; channels 37-39.
        (.leSetAdvertisingParameters(nonconn100), "01 0620 0f a000 a000 03 00 00 000000000000 07 00"),
        // Significant length 30, then the data zero-padded to 31 bytes.
        (.leSetAdvertisingData(beaconData),
         "01 0820 20 1e 0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010001c5 00"),
        (.leSetAdvertisingEnable(true), "01 0a20 01 01"),
        (.leSetAdvertisingEnable(false), "01 0a20 01 00"),
        // Handle 0, legacy non-connectable (0x0010), intervals as u24, TX 0x7F = no preference, LE 1M.
        (.leSetExtendedAdvertisingParameters(LEExtendedAdvertisingParameters(
            handle: 0, legacyType: .nonConnectableUndirected, interval: AdvertisingInterval(milliseconds: 100)!, txPower: nil)),
         "01 3620 19 00 1000 a00000 a00000 07 00 00 000000000000 00 7f 01 00 01 00 00"),
        // Connectable legacy PDU is 0x0013; TX power -4 dBm = 0xFC.
        (.leSetExtendedAdvertisingParameters(LEExtendedAdvertisingParameters(
            handle: 1, legacyType: .connectableUndirected, interval: AdvertisingInterval(units: 0x20)!, txPower: -4)),
         "01 3620 19 01 1300 200000 200000 07 00 00 000000000000 00 fc 01 00 01 00 00"),
        // Complete data (op 3), no fragmentation (1), exactly 30 bytes — no padding for extended data.
        (.leSetExtendedAdvertisingData(handle: 0, data: beaconData),
         "01 3720 22 00 03 01 1e 0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010001c5"),
        (.leSetExtendedAdvertisingEnable(enable: true, sets: [AdvertisingSetEnable(handle: 0)]), "01 3920 06 01 01 00 0000 00"),
        (.leSetExtendedAdvertisingEnable(enable: false, sets: [AdvertisingSetEnable(handle: 2)]), "01 3920 06 00 01 02 0000 00"),
        (.leRemoveAdvertisingSet(handle: 0), "01 3c20 01 00"),
        (.leClearAdvertisingSets, "01 3d20 00"),
        (.leSetScanParameters(active: false, interval: 0x10, window: 0x10), "01 0b20 07 00 1000 1000 00 00"),
        (.leSetScanEnable(enable: true, filterDuplicates: false), "01 0c20 02 01 00"),
        (.leSetRandomAddress([1, 2, 3, 4, 5, 0xC6]), "01 0520 06 010203040 5c6"),
        (.setEventMask(0x3DBF_F807_FFFB_FFFF), "01 010c 08 fffffbff07f8bf3d"),
    ])
    func golden(command: HCICommand, expected: String) {
        #expect(command.h4Frame == hex(expected), "\(command)")
    }
}

@Suite("HCI events decode")
struct EventTests {
    @Test("Command Complete with return parameters")
    func commandComplete() throws {
        let e = try HCIEvent(packet: hex("0e 04 01 0a20 00"))
        #expect(e == .commandComplete(credits: 1, opcode: .leSetAdvertisingEnable, returnParameters: [0]))
        #expect(e.packet == hex("0e 04 01 0a20 00"))
    }

    @Test("Command Status, Hardware Error, LE Meta and other events")
    func others() throws {
        #expect(try HCIEvent(packet: hex("0f 04 0c 01 3620")) == .commandStatus(status: .commandDisallowed, credits: 1, opcode: .leSetExtendedAdvertisingParameters))
        #expect(try HCIEvent(packet: hex("10 01 2a")) == .hardwareError(code: 0x2A))
        #expect(try HCIEvent(packet: hex("3e 03 02 01 00")) == .leMeta(subevent: 2, parameters: [1, 0]))
        #expect(try HCIEvent(packet: hex("05 04 00 0100 13")) == .other(code: 5, parameters: [0, 1, 0, 0x13]))
    }

    @Test("length mismatches and truncated parameters are errors, not crashes", arguments: [
        "0e 05 01 0a20 00",  // says 5, has 4
        "0e 01 01",  // Command Complete without an opcode
        "0f 02 00 01",  // Command Status without an opcode
        "10 00",  // Hardware Error without its code
        "0e",  // no length byte
        "",
    ])
    func malformed(packet: String) {
        #expect(throws: HCIEvent.Malformed.self) { try HCIEvent(packet: hex(packet)) }
    }

    @Test("Read Local Version Information: HCI version 9 is Core 5.0")
    func version() throws {
        let v = try LocalVersionInformation(returnParameters: hex("00 09 0001 09 0200 0300"))
        #expect(v.hciVersion == 9 && v.isAtLeastCore50 && v.coreVersionName == "5.0")
        #expect(v.manufacturer == 2 && v.hciSubversion == 0x0100)
        #expect(!LocalVersionInformation(hciVersion: 8).isAtLeastCore50)
    }

    @Test("Supported Commands: octet 36 bits 2 and 5 mean extended advertising")
    func supportedCommands() throws {
        var octets = [UInt8](repeating: 0, count: 64)
        #expect(!SupportedCommands(octets: octets).hasExtendedAdvertising)
        octets[36] = 0b0010_0100
        #expect(SupportedCommands(octets: octets).hasExtendedAdvertising)
        octets[25] = 1 << 5
        octets[26] = 1 << 1
        #expect(SupportedCommands(octets: octets).hasLegacyAdvertising)
        #expect(throws: ByteReader.Truncated.self) { try SupportedCommands(returnParameters: [0] + [UInt8](repeating: 0, count: 63)) }
    }

    @Test("LE features: bit 12 is LE Extended Advertising")
    func features() throws {
        #expect(try LEFeatures(returnParameters: hex("00 0010000000000000")).extendedAdvertising)
        #expect(try !LEFeatures(returnParameters: hex("00 ffef000000000000")).extendedAdvertising)
    }
}

@Suite("names and numbers")
struct NamingTests {
    @Test("known opcodes and statuses print with spec names, unknown ones as hex")
    func names() {
        #expect(Opcode.leSetAdvertisingData.description == "LE Set Advertising Data (0x2008)")
        #expect(Opcode(rawValue: 0xFC01).description == "0xFC01")
        #expect(HCIStatus.commandDisallowed.description == "Command Disallowed (0x0C)")
        #expect(HCIStatus.invalidHCICommandParameters.description == "Invalid HCI Command Parameters (0x12)")
        #expect(HCIStatus.unknownHCICommand.description == "Unknown HCI Command (0x01)")
        #expect(HCIStatus(rawValue: 0x7E).description == "0x7E")
        #expect(Opcode.leSetAdvertisingEnable.ogf == 0x08 && Opcode.leSetAdvertisingEnable.ocf == 0x000A)
    }

    @Test("intervals round to the nearest 0.625 ms unit within 20 ms … 10.24 s")
    func intervals() {
        #expect(AdvertisingInterval(milliseconds: 100)?.units == 160)
        #expect(AdvertisingInterval(milliseconds: 20)?.units == 0x20)
        #expect(AdvertisingInterval(milliseconds: 10240)?.units == 0x4000)
        #expect(AdvertisingInterval(milliseconds: 21)?.units == 34)  // 33.6 rounds up
        #expect(AdvertisingInterval(milliseconds: 21)?.description == "21.25 ms")
        #expect(AdvertisingInterval(milliseconds: 19) == nil)
        #expect(AdvertisingInterval(milliseconds: 10241) == nil)
        #expect(AdvertisingInterval(units: 0x1F) == nil)
        // The range stated once: its ends are the Core's unit limits.
        let r = AdvertisingInterval.millisecondRange
        #expect(AdvertisingInterval(milliseconds: r.lowerBound)?.units == AdvertisingInterval.minimumUnits)
        #expect(AdvertisingInterval(milliseconds: r.upperBound)?.units == AdvertisingInterval.maximumUnits)
        #expect(AdvertisingInterval(milliseconds: r.lowerBound - 1) == nil && AdvertisingInterval(milliseconds: r.upperBound + 1) == nil)
    }

    @Test("advertising data longer than 31 bytes cannot be built")
    func tooLong() {
        #expect(throws: AdvertisingData.TooLong(length: 32)) {
            try AdvertisingData([.manufacturerSpecific(company: 0x4C, [UInt8](repeating: 0, count: 28))])
        }
        #expect(throws: Never.self) { try AdvertisingData([.manufacturerSpecific(company: 0x4C, [UInt8](repeating: 0, count: 27))]) }
    }
}

@Suite("H4 framer")
struct FramerTests {
    static let stream: [UInt8] = hex("""
        04 0e 04 01 0a20 00
        04 3e 03 02 01 00
        02 0100 0300 aabbcc
        04 0f 04 00 01 0320
        05 0100 0240 1122
        03 0100 02 dddd
        01 0a20 01 01
        04 10 01 2a
        """)

    static func frameAll(_ chunks: [[UInt8]]) throws -> [H4Packet] {
        var f = H4Framer()
        var out: [H4Packet] = []
        for c in chunks {
            f.append(c)
            while let p = try f.next() { out.append(p) }
        }
        #expect(f.pendingCount == 0)
        return out
    }

    @Test("one buffer yields every packet with its type")
    func whole() throws {
        let packets = try Self.frameAll([Self.stream])
        #expect(packets.map(\.type) == [.event, .event, .acl, .event, .iso, .sco, .command, .event])
        #expect(packets[0].bytes == hex("0e 04 01 0a20 00"))
        #expect(packets[4].bytes == hex("0100 0240 1122"))  // ISO length keeps only 14 bits
    }

    @Test("drip-fed bytes and every two-way split yield the same packets as one buffer")
    func everySplit() throws {
        let expected = try Self.frameAll([Self.stream])
        #expect(try Self.frameAll(Self.stream.map { [$0] }) == expected)
        for cut in 0...Self.stream.count {
            #expect(try Self.frameAll([Array(Self.stream[..<cut]), Array(Self.stream[cut...])]) == expected, "split at \(cut)")
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var chunks: [[UInt8]] = []
            var i = 0
            while i < Self.stream.count {
                let n = Int.random(in: 1...9, using: &rng)
                chunks.append(Array(Self.stream[i..<min(i + n, Self.stream.count)]))
                i += n
            }
            #expect(try Self.frameAll(chunks) == expected)
        }
    }

    @Test("an unknown type byte breaks the stream for good")
    func broken() throws {
        var f = H4Framer()
        f.append(hex("04 0e 04 01 0a20 00 07 01 02"))
        #expect(try f.next()?.type == .event)
        #expect(throws: H4Framer.FramingError(badTypeByte: 7, offset: 7)) { try f.next() }
        f.append(hex("04 10 01 00"))
        #expect(throws: H4Framer.FramingError.self) { try f.next() }
    }
}
