// BTHome v2 (bthome.io; bthome-ble is the parser Home Assistant runs): beacond's own health as a BTHome sensor, so
// that Home Assistant's BTHome integration shows each machine's beacond without an integration of its own. The frame,
// plain or encrypted with AES-CCM under a bindkey. The cipher is passed in (libgcrypt's, AESCipher), so this stays
// pure and no cipher is written here.
import BluetoothHCI

/// AES-CCM with a 4-byte MIC and no associated data: ciphertext ‖ MIC for `plaintext` under `key` and `nonce`.
public typealias CCMSeal = @Sendable (_ key: [UInt8], _ nonce: [UInt8], _ plaintext: [UInt8]) throws -> [UInt8]

/// A BTHome bindkey (128 bits). Never printed: its description, debug description and mirror say only that it is
/// there, as an Eddystone-EID identity key's do.
public struct BindKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let bytes: [UInt8]
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }
    /// 32 hex digits, either case (the form Home Assistant's BTHome integration asks for).
    public init?(hex s: String) {
        guard let k = IdentityKey(hex: s) else { return nil }
        bytes = k.bytes
    }
    public var description: String { "(bindkey)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

/// What beacond reports about itself: the BTHome objects, in ascending id order as the format asks (a receiver
/// stops at the first id it does not know, and bthome-ble 3.8.0 skips a frame whose ids go down).
public struct BTHomeReport: Sendable, Hashable {
    /// Changes with each new content (0x00, uint8): receivers skip a frame whose packet id they had last.
    public var packetID: UInt8
    /// The configured beacons on the air beside the self-report (0x09, count, uint8; more than 255 says 255).
    public var beaconsOnAir: Int
    /// Not every configured beacon is on the air (0x26, problem: 1, else 0). Always sent, so that a receiver's
    /// binary sensor goes back to OK rather than keeping the last problem it saw.
    public var problem: Bool
    /// beacond's uptime in seconds (0x3E, count, uint32: BTHome has no uptime object).
    public var uptimeSeconds: UInt32

    public init(packetID: UInt8 = 0, beaconsOnAir: Int = 0, problem: Bool = false, uptimeSeconds: UInt32 = 0) {
        self.packetID = packetID
        self.beaconsOnAir = beaconsOnAir
        self.problem = problem
        self.uptimeSeconds = uptimeSeconds
    }

    /// `00 <packet id> 09 <count> 26 <problem> 3E <uptime, 4 bytes little-endian>`: 13 bytes.
    public var objects: [UInt8] {
        let u = uptimeSeconds
        return [0x00, packetID, 0x09, UInt8(clamping: beaconsOnAir), 0x26, problem ? 1 : 0,
                0x3E, UInt8(u & 0xFF), UInt8(u >> 8 & 0xFF), UInt8(u >> 16 & 0xFF), UInt8(u >> 24)]
    }
}

public enum BTHome {
    /// The 16-bit service UUID 0xFCD2, as it goes on the air (little-endian).
    public static let serviceUUID: [UInt8] = [0xD2, 0xFC]
    /// The device information byte: BTHome version 2 (bits 5–7 = 010), sent at regular intervals (bit 2 = 0), no MAC
    /// in the frame (bit 1 = 0), encrypted in bit 0.
    public static let plainInfo: UInt8 = 0x40
    public static let encryptedInfo: UInt8 = 0x41

    /// The nonce: the address as written (most significant byte first, not the wire's order), the UUID, the device
    /// information byte, the counter (4 bytes little-endian).
    public static func nonce(address: BluetoothAddress, info: UInt8 = encryptedInfo, counter: UInt32) -> [UInt8] {
        Array(address.wire.reversed()) + serviceUUID + [info] + littleEndian(counter)
    }

    /// The service data (after the AD type): `D2 FC 40 <objects>`.
    public static func plainServiceData(_ objects: [UInt8]) -> [UInt8] { serviceUUID + [plainInfo] + objects }

    /// The encrypted service data: `D2 FC 41 <ciphertext> <counter, 4 bytes LE> <MIC, 4 bytes>`.
    public static func encryptedServiceData(_ objects: [UInt8], key: BindKey, address: BluetoothAddress, counter: UInt32,
                                            seal: CCMSeal) throws -> [UInt8] {
        let sealed = try seal(key.bytes, nonce(address: address, counter: counter), objects)
        guard sealed.count == objects.count + 4 else { throw SealFailure(count: sealed.count, expected: objects.count + 4) }
        return serviceUUID + [encryptedInfo] + sealed.prefix(objects.count) + littleEndian(counter) + sealed.suffix(4)
    }

    /// The cipher gave something else than ciphertext ‖ 4-byte MIC.
    public struct SealFailure: Error, Sendable, Hashable {
        public var count: Int
        public var expected: Int
    }

    /// `02 01 06 | LEN 16 <service data>`: 27 bytes for an encrypted report, 19 plain.
    public static func advertisingData(serviceData: [UInt8]) -> AdvertisingData {
        // 3 + 2 + 25 at most (an encrypted report): within the 31 bytes of legacy advertising.
        try! AdvertisingData([.flags(IBeacon.flags), ADStructure(type: 0x16, data: serviceData)])
    }

    private static func littleEndian(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] }
}

/// A `bthome` beacon as configured: where its bindkey is (none: plain frames), the key once the config loader has
/// read it, and the service data last put in (`with(serviceData:)`; the lifecycle makes it from the report).
public struct BTHomeBeacon: Sendable, Hashable {
    public var bindkeyFile: String?
    /// Where `bindkey_file` was set (the loader's messages name it).
    public var bindkeyFileLocation: SourceLocation?
    public var bindkey: BindKey?
    /// The service data on the air: a plain report of nothing until the lifecycle puts the real one in.
    public private(set) var serviceData: [UInt8] = BTHome.plainServiceData(BTHomeReport().objects)

    public init(bindkeyFile: String? = nil, bindkeyFileLocation: SourceLocation? = nil, bindkey: BindKey? = nil) {
        self.bindkeyFile = bindkeyFile
        self.bindkeyFileLocation = bindkeyFileLocation
        self.bindkey = bindkey
    }

    /// Encrypted frames (a `bindkey_file` is set).
    public var encrypted: Bool { bindkeyFile != nil }

    public func with(serviceData: [UInt8]) -> BTHomeBeacon {
        var b = self
        b.serviceData = serviceData
        return b
    }

    public var advertisingData: AdvertisingData { BTHome.advertisingData(serviceData: serviceData) }

    /// Equal as configured (the frame aside).
    public func sameSettings(as o: BTHomeBeacon) -> Bool { bindkeyFile == o.bindkeyFile && bindkey == o.bindkey }
}
