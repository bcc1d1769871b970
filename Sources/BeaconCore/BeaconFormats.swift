// The other beacon frames gateways speak, beside iBeacon: AltBeacon (Radius Networks' open specification) and
// Google's Eddystone UID and TLM. Each builds its exact advertising data and is recognized from received data.
import BluetoothHCI

/// AltBeacon: `02 01 06 | 1B FF <company LE> BE AC <beacon id[20]> <reference RSSI> <reserved>`, 31 bytes. The
/// 20-byte beacon id is read by the Android Beacon Library (`m:2-3=beac,i:4-19,i:20-21,i:22-23,p:24-24,d:25-25`) as
/// a 16-byte UUID, a 2-byte major and a 2-byte minor.
public struct AltBeacon: Sendable, Hashable {
    public var uuid: BeaconUUID
    public var major: UInt16
    public var minor: UInt16
    /// Signed dBm expected at 1 m, like iBeacon's measured power.
    public var referenceRSSI: Int8
    public var companyID: UInt16
    /// The manufacturer-reserved byte.
    public var reserved: UInt8

    /// Radius Networks' company identifier, the specification's example.
    public static let defaultCompanyID: UInt16 = 0x0118
    static let code: [UInt8] = [0xBE, 0xAC]

    public init(uuid: BeaconUUID, major: UInt16, minor: UInt16, referenceRSSI: Int8 = -59,
                companyID: UInt16 = AltBeacon.defaultCompanyID, reserved: UInt8 = 0) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.referenceRSSI = referenceRSSI
        self.companyID = companyID
        self.reserved = reserved
    }

    public var advertisingData: AdvertisingData {
        let payload = Self.code + uuid.bytes + bigEndian(major) + bigEndian(minor) + [UInt8(bitPattern: referenceRSSI), reserved]
        // 3 + 28 = 31 bytes, the legacy maximum: always fits.
        return try! AdvertisingData([.flags(IBeacon.flags), .manufacturerSpecific(company: companyID, payload)])
    }

    /// From a Manufacturer Specific structure's value (company id first).
    init?(manufacturerData v: [UInt8]) {
        guard v.count == 26, v[2] == 0xBE, v[3] == 0xAC else { return nil }
        companyID = UInt16(v[0]) | UInt16(v[1]) << 8
        uuid = BeaconUUID(bytes: Array(v[4..<20]))!
        major = UInt16(v[20]) << 8 | UInt16(v[21])
        minor = UInt16(v[22]) << 8 | UInt16(v[23])
        referenceRSSI = Int8(bitPattern: v[24])
        reserved = v[25]
    }
}

/// Eddystone's 16-bit service UUID, 0xFEAA.
let eddystoneServiceUUID: [UInt8] = [0xAA, 0xFE]

/// Eddystone-UID: `02 01 06 | 03 03 AA FE | 17 16 AA FE 00 <tx power at 0 m> <namespace[10]> <instance[6]> 00 00`.
public struct EddystoneUID: Sendable, Hashable {
    public var namespace: [UInt8]
    public var instance: [UInt8]
    /// Signed dBm received at 0 m (Eddystone's calibration distance; about 41 dB above the power at 1 m).
    public var txPowerAt0m: Int8

    /// The power at 0 m that matches iBeacon's usual −59 dBm at 1 m (Eddystone: about 41 dB more at 0 m).
    public static let defaultTxPowerAt0m: Int8 = -18

    public init?(namespace: [UInt8], instance: [UInt8], txPowerAt0m: Int8) {
        guard namespace.count == 10, instance.count == 6 else { return nil }
        self.namespace = namespace
        self.instance = instance
        self.txPowerAt0m = txPowerAt0m
    }

    public var advertisingData: AdvertisingData {
        let frame: [UInt8] = [0x00, UInt8(bitPattern: txPowerAt0m)] + namespace + instance + [0, 0]
        return try! AdvertisingData([.flags(IBeacon.flags), ADStructure(type: 0x03, data: eddystoneServiceUUID),
                                     ADStructure(type: 0x16, data: eddystoneServiceUUID + frame)])
    }

    /// The power expected at 1 m, for ranging: Eddystone calibrates at 0 m, and 1 m is 41 dB further.
    public var measuredPowerAt1m: Int8 { Int8(clamping: Int(txPowerAt0m) - 41) }

    /// From the Service Data frame after the service UUID (frame type first). The two RFU bytes may be left out.
    init?(frame f: [UInt8]) {
        guard f.count == 18 || f.count == 20, f[0] == 0x00 else { return nil }
        txPowerAt0m = Int8(bitPattern: f[1])
        namespace = Array(f[2..<12])
        instance = Array(f[12..<18])
    }
}

/// Eddystone-TLM, unencrypted version 0: `02 01 06 | 03 03 AA FE | 11 16 AA FE 20 00 <battery mV BE>
/// <temperature 8.8 BE> <advertising PDU count BE> <time since power-on in 0.1 s BE>`.
public struct EddystoneTLM: Sendable, Hashable {
    /// 0 for a mains-powered beacon.
    public var batteryMillivolts: UInt16
    /// Degrees Celsius as signed 8.8 fixed point; nil is 0x8000, "not supported".
    public var temperature: Int16?
    public var advertisingCount: UInt32
    /// Time since power-on (or start), in 0.1 s.
    public var uptimeTenths: UInt32

    public init(batteryMillivolts: UInt16, temperature: Int16?, advertisingCount: UInt32, uptimeTenths: UInt32) {
        self.batteryMillivolts = batteryMillivolts
        self.temperature = temperature == Int16.min ? nil : temperature
        self.advertisingCount = advertisingCount
        self.uptimeTenths = uptimeTenths
    }

    public var advertisingData: AdvertisingData {
        let t = UInt16(bitPattern: temperature ?? Int16.min)
        let frame: [UInt8] = [0x20, 0x00] + bigEndian(batteryMillivolts) + bigEndian(t)
            + bigEndian32(advertisingCount) + bigEndian32(uptimeTenths)
        return try! AdvertisingData([.flags(IBeacon.flags), ADStructure(type: 0x03, data: eddystoneServiceUUID),
                                     ADStructure(type: 0x16, data: eddystoneServiceUUID + frame)])
    }

    /// Degrees Celsius, or nil when not supported.
    public var celsius: Double? { temperature.map { Double($0) / 256 } }

    init?(frame f: [UInt8]) {
        guard f.count == 14, f[0] == 0x20, f[1] == 0x00 else { return nil }
        batteryMillivolts = UInt16(f[2]) << 8 | UInt16(f[3])
        let t = Int16(bitPattern: UInt16(f[4]) << 8 | UInt16(f[5]))
        temperature = t == Int16.min ? nil : t
        advertisingCount = f[6..<10].reduce(0) { $0 << 8 | UInt32($1) }
        uptimeTenths = f[10..<14].reduce(0) { $0 << 8 | UInt32($1) }
    }
}

private func bigEndian(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
private func bigEndian32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
