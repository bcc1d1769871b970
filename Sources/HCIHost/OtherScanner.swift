// Another program's scan on a legacy controller beacond shares, as the raw channel shows it: the kernel's own LE Set
// Scan Enable and LE Set Random Address (Home Assistant's active discovery restarts the scan about every 10 s and
// writes a new random address at each start), and the controller refusing beacond's random address while it scans
// (Core Vol 4 Part E §7.8.4). Decides when beacond holds the public address, across the scanner's restarts, and when
// its own addresses may come back: one address per beacon while a scan runs, and again after it ends. Pure.
import BluetoothHCI

public struct OtherScanner: Sendable, Hashable {
    /// What another program's command, or the controller's refusal, says about a scan on the controller.
    public enum Sign: Sendable, Hashable {
        /// LE Set (Extended) Scan Enable with Enable = 1.
        case scanEnabled
        /// LE Set (Extended) Scan Enable with Enable = 0.
        case scanDisabled
        /// LE Set Random Address from another program: the kernel giving its scan an address of its own. On a
        /// legacy controller it is also the address beacond's advertising goes out from, until beacond writes one.
        case randomAddressWritten
        /// The controller refused beacond's own random address with Command Disallowed: something scans.
        case ownAddressRefused
    }

    /// The scan as the other program's last LE Set Scan Enable left it; nil while none was seen.
    public private(set) var scanning: Bool?
    /// A sign came since the last `tick` (the address retry timer).
    public private(set) var signSinceTick = false

    public init() {}

    /// The sign another program's command gives, if it gives one.
    public static func sign(_ opcode: Opcode, _ p: [UInt8]) -> Sign? {
        switch opcode {
        case .leSetScanEnable, .leSetExtendedScanEnable:
            guard let enable = p.first else { return nil }
            return enable == 0 ? .scanDisabled : .scanEnabled
        case .leSetRandomAddress: return .randomAddressWritten
        default: return nil
        }
    }

    public mutating func saw(_ sign: Sign) {
        signSinceTick = true
        switch sign {
        case .scanEnabled: scanning = true
        case .scanDisabled: scanning = false
        case .randomAddressWritten, .ownAddressRefused: break
        }
    }

    /// The address retry timer fired (every `HCIAdvertiser.addressRetryPeriod`): true when beacond may try its own
    /// addresses again. Not while the other program's scan is on, and not in a period that saw any sign of it: a
    /// discovery that restarts (disable, a new address, enable) shows a sign in every period, so its restarts never
    /// look like its end, and the beacons keep the public address until one whole period passed without a sign.
    public mutating func tick() -> Bool {
        defer { signSinceTick = false }
        return scanning != true && !signSinceTick
    }

    /// Whether `sign` means the beacons must leave their own random addresses now: a scan started (the controller
    /// takes no new random address while it scans, so the next time slice's would be refused), or another program
    /// wrote the random address (a slot enabled after it would go out from that program's address).
    public static func takesTheAddress(_ sign: Sign) -> Bool {
        sign == .scanEnabled || sign == .randomAddressWritten
    }
}
