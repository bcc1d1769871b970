// What an event means for the advertising beacond keeps on the air. Pure.
import BluetoothHCI

extension HCIEvent {
    /// For connectable advertising: why this event means the controller stopped advertising (a central connected,
    /// Vol 4 Part E §7.7.65.1 / .10 / .19; an advertising set terminated, §7.7.65.18) or may now take it again (a
    /// disconnection, §7.7.5); nil for anything else.
    public var connectableAdvertisingInterruption: String? {
        switch self {
        case .leMeta(let sub, _) where sub == 0x01 || sub == 0x0A || sub == 0x29: "a central connected"
        case .leMeta(0x12, _): "the advertising set terminated"
        case .other(0x05, _): "a connection ended"
        default: nil
        }
    }
}
