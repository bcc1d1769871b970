// Eddystone-EID (google/eddystone, eddystone-eid): the frame, and the ephemeral identifier computed from an identity
// key and a time counter. The block cipher is passed in (AES-128 from libgcrypt, AESCipher), so this stays pure and
// no cipher is written here.
import BluetoothHCI

/// AES-128 of one 16-byte block under a 16-byte key.
public typealias BlockCipher = @Sendable (_ key: [UInt8], _ block: [UInt8]) throws -> [UInt8]

public struct EddystoneEID: Sendable, Hashable {
    /// Signed dBm received at 0 m, as for Eddystone-UID.
    public var txPowerAt0m: Int8
    /// The 8-byte ephemeral identifier on the air now.
    public var eid: [UInt8]

    public static let frameType: UInt8 = 0x30

    /// The power a phone sees at 1 m: Eddystone calibrates at 0 m, about 41 dB more.
    public var measuredPowerAt1m: Int8 { Int8(clamping: Int(txPowerAt0m) - 41) }

    public init?(txPowerAt0m: Int8, eid: [UInt8]) {
        guard eid.count == 8 else { return nil }
        self.txPowerAt0m = txPowerAt0m
        self.eid = eid
    }

    /// `02 01 06 03 03 AA FE 0D 16 AA FE 30 <power> <EID, 8 bytes>`: 21 bytes.
    public var advertisingData: AdvertisingData {
        let frame: [UInt8] = [Self.frameType, UInt8(bitPattern: txPowerAt0m)] + eid
        return try! AdvertisingData([.flags(IBeacon.flags), ADStructure(type: 0x03, data: eddystoneServiceUUID),
                                     ADStructure(type: 0x16, data: eddystoneServiceUUID + frame)])
    }

    /// The rotation exponent's range: the EID changes every 2^K seconds.
    public static let exponents: ClosedRange<UInt8> = 0...15

    /// The time counter with its low K bits cleared: the start of the period `time` is in.
    public static func periodStart(_ time: UInt32, exponent k: UInt8) -> UInt32 { k == 0 ? time : (time >> k) << k }

    /// How far time `now` is from the period that starts at `start` (2^K seconds long), in seconds: 0 within it;
    /// positive when the period is still to come (the sender's clock is ahead), negative when it has ended (the
    /// sender's clock is behind, or the frame is a recording).
    public static func offset(ofPeriod start: UInt32, exponent k: UInt8, at now: UInt32) -> Int64 {
        let (start, now, end) = (Int64(start), Int64(now), Int64(start) + (Int64(1) << k))
        return now < start ? start - now : now >= end ? -(now - end + 1) : 0
    }

    /// The block the temporary key is the encryption of: 11 × 00, FF, 00 00, the time counter's top 16 bits.
    public static func temporaryKeyInput(_ time: UInt32) -> [UInt8] {
        [UInt8](repeating: 0, count: 11) + [0xFF, 0x00, 0x00, UInt8(time >> 24), UInt8(time >> 16 & 0xFF)]
    }

    /// The block the EID is the first 8 bytes of the encryption of: 11 × 00, K, the period's start (32 bits, big-endian).
    public static func identifierInput(_ time: UInt32, exponent k: UInt8) -> [UInt8] {
        let t = periodStart(time, exponent: k)
        return [UInt8](repeating: 0, count: 11) + [k, UInt8(t >> 24), UInt8(t >> 16 & 0xFF), UInt8(t >> 8 & 0xFF), UInt8(t & 0xFF)]
    }

    /// The ephemeral identifier for `time` (Eddystone's time counter; beacond's is the Unix time modulo 2^32).
    public static func identifier(identityKey: [UInt8], exponent k: UInt8, time: UInt32, cipher: BlockCipher) rethrows -> [UInt8] {
        let temporaryKey = try cipher(identityKey, temporaryKeyInput(time))
        return Array(try cipher(temporaryKey, identifierInput(time, exponent: k)).prefix(8))
    }
}

/// A 128-bit identity key. Never printed: its description, debug description and mirror say only that it is there,
/// so no log line, STATUS, check-config output or test failure message can carry it.
public struct IdentityKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let bytes: [UInt8]
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }
    public var description: String { "(identity key)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

/// An `eddystone-eid` beacon as configured: where its identity key is, its rotation exponent and power at 0 m; the
/// key once the config loader has read it, and the identifier for the time counter last computed.
public struct EIDBeacon: Sendable, Hashable {
    public var keyFile: String
    /// Where `identity_key_file` was set (the loader's messages name it).
    public var keyFileLocation: SourceLocation
    public var exponent: UInt8
    public var txPowerAt0m: Int8
    public var key: IdentityKey?
    /// The identifier on the air and the time counter it was computed for (zeros until computed).
    public private(set) var ephemeralID = [UInt8](repeating: 0, count: 8)
    public private(set) var computedFor: UInt32?

    /// K = 10: a new EID about every 17 minutes, the specification's example.
    public static let defaultExponent: UInt8 = 10

    public init(keyFile: String, keyFileLocation: SourceLocation = SourceLocation(line: 1, column: 1),
                exponent: UInt8 = EIDBeacon.defaultExponent, txPowerAt0m: Int8 = EddystoneUID.defaultTxPowerAt0m, key: IdentityKey? = nil) {
        self.keyFile = keyFile
        self.keyFileLocation = keyFileLocation
        self.exponent = exponent
        self.txPowerAt0m = txPowerAt0m
        self.key = key
    }

    /// The period a time counter is in (its start, `time` with the low K bits cleared, shifted down).
    public func period(of time: UInt32) -> UInt32 { time >> exponent }

    /// This beacon with the identifier for `time` (nil key: unchanged).
    public func at(_ time: UInt32, cipher: BlockCipher) throws -> EIDBeacon {
        guard let key else { return self }
        var b = self
        b.ephemeralID = try EddystoneEID.identifier(identityKey: key.bytes, exponent: exponent, time: time, cipher: cipher)
        b.computedFor = EddystoneEID.periodStart(time, exponent: exponent)
        return b
    }

    public var frame: EddystoneEID { EddystoneEID(txPowerAt0m: txPowerAt0m, eid: ephemeralID)! }

    /// Equal as configured (the computed identifier aside): a reload that changes only the key or K is a data
    /// update of that beacon.
    public func sameSettings(as o: EIDBeacon) -> Bool {
        keyFile == o.keyFile && exponent == o.exponent && txPowerAt0m == o.txPowerAt0m && key == o.key
    }
}

/// The Unix time in seconds as Eddystone's 32-bit time counter (it wraps in 2106, as the specification's does).
public func eidTimeCounter(unixSeconds: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: unixSeconds) }
