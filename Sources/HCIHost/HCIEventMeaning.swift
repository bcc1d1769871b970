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

extension HCIEvent {
    /// The advertising reports an LE Meta event carries (legacy or extended); empty for any other event, or one whose
    /// reports run past its end.
    public var advertisingReports: [AdvertisingReport] {
        guard case .leMeta(let sub, let params) = self else { return [] }
        return (try? AdvertisingReport.parse(subevent: sub, parameters: params)) ?? []
    }
}

/// What an event nobody waited for means, on a controller beacond owns or on a kernel device it shares.
public enum UnsolicitedMeaning: Sendable, Hashable {
    /// The controller's state is gone (Hardware Error): start over.
    case lost(String)
    /// A misbehaving controller; `kind` lets each kind be said loudly once.
    case oddity(kind: String, String)
    /// Connectable advertising stopped (a central connected) or may start again: put it back.
    case connectableInterrupted(String)
    case nothing
}

extension HCIEvent {
    /// On a kernel device, replies to other programs' commands arrive too; on a controller beacond owns, a reply to a
    /// command it did not send is the controller's mistake.
    public func unsolicitedMeaning(device: String, ownsController: Bool) -> UnsolicitedMeaning {
        if case .hardwareError(let code) = self {
            return .lost("The controller on \(device) reported Hardware Error \(hex8(code)); its advertising state is gone, starting over")
        }
        if let why = connectableAdvertisingInterruption { return .connectableInterrupted(why) }
        guard ownsController else { return .nothing }
        switch self {
        case .commandComplete(_, let op, _) where op.rawValue != 0, .commandStatus(_, _, let op) where op.rawValue != 0:
            return .oddity(kind: "unsolicited-\(op.rawValue)", "The controller on \(device) answered \(op), which beacond did not send or no longer waits for; ignoring it")
        case .other(let code, let p):
            return .oddity(kind: "event-\(code)", "The controller on \(device) sent event \(hex8(code)) (\(p.count) bytes), which beacond does not use; ignoring it")
        case .leMeta(let sub, let p):
            return .oddity(kind: "le-meta-\(sub)", "The controller on \(device) sent LE Meta subevent \(hex8(sub)) (\(p.count) bytes), which beacond does not use; ignoring it")
        default:
            return .nothing
        }
    }
}

/// Another program's command on a kernel device that can take beacond's advertising off the air: put it back after
/// that program's own sequence has had time to finish (a reset takes longer).
public enum ForeignCommand {
    public static func delay(_ opcode: Opcode) -> Duration { opcode == .reset ? .milliseconds(500) : .milliseconds(100) }
    public static func reason(_ opcode: Opcode, device: String) -> String { "Another program sent \(opcode) to \(device)" }
}
