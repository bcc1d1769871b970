// The iBeacon advertisement: Flags plus Apple's Manufacturer Specific structure, 30 of the 31 legacy bytes.
import BluetoothHCI

/// An iBeacon identity and its calibration. `advertisingData` is the exact frame that goes on air.
public struct IBeacon: Sendable, Hashable {
    public var uuid: BeaconUUID
    public var major: UInt16
    public var minor: UInt16
    /// Signed dBm expected at 1 m.
    public var measuredPower: Int8

    public static let defaultMeasuredPower: Int8 = -59
    /// Apple's company identifier (Assigned Numbers).
    public static let appleCompanyID: UInt16 = 0x004C
    /// Flags: LE General Discoverable, BR/EDR not supported. Some strict receivers accept nothing else.
    public static let flags: UInt8 = 0x06

    public init(uuid: BeaconUUID, major: UInt16, minor: UInt16, measuredPower: Int8 = IBeacon.defaultMeasuredPower) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    /// `02 01 06 | 1A FF 4C 00 02 15 | uuid[16] | major BE | minor BE | measured power`.
    public var advertisingData: AdvertisingData {
        var payload: [UInt8] = [0x02, 0x15]  // iBeacon type, length of what follows (21)
        payload += uuid.bytes
        payload += [UInt8(major >> 8), UInt8(major & 0xFF), UInt8(minor >> 8), UInt8(minor & 0xFF)]
        payload.append(UInt8(bitPattern: measuredPower))
        // 3 + 27 = 30 bytes: always fits, so a failure here is a bug in this file.
        return try! AdvertisingData([.flags(Self.flags), .manufacturerSpecific(company: Self.appleCompanyID, payload)])
    }
}
