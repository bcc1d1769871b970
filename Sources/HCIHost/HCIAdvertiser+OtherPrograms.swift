// The raw-HCI advertiser beside another program on a legacy controller: the controller refuses beacond's random
// address while that program scans (Core Vol 4 Part E §7.8.4; the kernel scans for Home Assistant on a Pi), and the
// program's own commands tell of its scan before a refusal does. Every beacon that may goes out from the public address
// meanwhile, the others pause (PublicFallback), and beacond tries its own addresses again every `addressRetryPeriod`
// while no sign of the scan comes. Pure, as HCIAdvertiser.
import BluetoothHCI

/// Legacy: whether the controller takes beacond's random addresses.
public struct OwnAddresses: Sendable {
    public enum Taken: Sendable, Hashable {
        /// Each beacon from its own address.
        case yes
        /// Refused (another program scans): the public address or a pause.
        case refused
        /// The apply out tries them again.
        case retrying
    }
    public internal(set) var taken = Taken.yes
    /// A scan started or another program wrote the random address while commands of beacond's were out: the fallback
    /// as soon as they are back (`switchToPublicIfDue`).
    var switchDue = false
    /// Another program's scan on this controller, as its commands and the controller's refusals show it.
    public internal(set) var scanner = OtherScanner()
}

extension HCIAdvertiser {
    /// True when `f` is the controller refusing beacond's random address while another program scans: from now on
    /// the public address (said once), and the caller applies again at once.
    mutating func addressRefused(_ f: StepFailure, _ wanted: [AdvertisingRequest]) -> Bool {
        guard family == .legacy, case .leSetRandomAddress = f.step.command, f.error.status == .commandDisallowed else { return false }
        own.scanner.saw(.ownAddressRefused)
        guard own.taken != .refused else { return false }
        let retry = own.taken == .retrying
        own.taken = .refused
        // A retry refused again is no news.
        if !retry { notes.append(.warning("The controller on \(device) refused beacond's random address (\(f.error)): another program scans on it, and a controller takes no new random address while it scans. Until it stops, \(PublicFallback.words(wanted)); beacond tries each beacon's own address again every \(Self.addressRetryPeriod.components.seconds) s")) }
        return true
    }

    /// True when `f` is the controller refusing beacond's random address after another program's scan was already
    /// seen (its command came while these steps were out): the apply goes again at once, with the fallback, rather
    /// than failing and taking every beacon off the air.
    mutating func ownAddressStillRefused(_ f: StepFailure) -> Bool {
        guard family == .legacy, case .leSetRandomAddress = f.step.command, f.error.status == .commandDisallowed, own.taken == .refused else { return false }
        own.switchDue = false
        return true
    }

    /// While the controller refuses beacond's addresses: the steps that try them again (a full apply of what is on the
    /// air now); nil when there is nothing to try. Report them with `finished(_:)`: refused again, the public address
    /// goes back on the air in the same round.
    public mutating func retryOwnAddresses() -> Outcome? {
        guard publicWhileScanning, family == .legacy else { return nil }
        // Every period counts, whatever is in flight: a scan that restarts leaves a sign in each.
        guard own.scanner.tick() else { return nil }
        return retryNowOrOwe()
    }

    /// After other commands of beacond's came back: the retry that came due while they were out, if one did (see
    /// `retryOwnAddresses`), rather than another period later.
    public mutating func owedRetry() -> Outcome? {
        guard owed.contains(.retry) else { return nil }
        guard publicWhileScanning, family == .legacy, scanner.scanning != true else { owed.remove(.retry); return nil }
        return retryNowOrOwe()
    }

    private mutating func retryNowOrOwe() -> Outcome? {
        guard idle else {
            owed.insert(.retry)
            return nil
        }
        owed.remove(.retry)
        guard let wanted = applied else { return nil }
        own.taken = .retrying
        forget()
        return apply(wanted, dataOnlyAllowed: false, allowSwitch: false)
    }

    /// A time slice's steps failed: when it was the controller refusing the slot's address, the steps that put every
    /// beacon back on the air from the public address (report them with `finished(_:)`); nil otherwise.
    public mutating func sliceFailed(_ f: StepFailure) -> Outcome? {
        sliceFinished(false)
        if case .withheld = f.error.reason { return switchToPublicIfDue() }
        // An apply or a stop that waited for the slot goes out instead (`resume`).
        guard idle, let wanted = applied, addressRefused(f, wanted) else { return nil }
        forget()
        return apply(wanted, dataOnlyAllowed: false, allowSwitch: false)
    }


    // MARK: what others do

    /// Another program's command on this kernel device that tells of a scan (LE Set Scan Enable, its own LE Set
    /// Random Address). On a legacy controller with beacons on their own random addresses, a scan that starts or an
    /// address written by someone else moves every beacon to the public address at once, before a time slice is
    /// refused or goes out from the other program's address; the steps for that (report them with `finished(_:)`),
    /// or nil when there is nothing to send now (nothing of beacond's on its own addresses, or commands of beacond's
    /// out: then `switchToPublicIfDue` after they are back).
    public mutating func otherProgramCommand(_ opcode: Opcode, _ p: [UInt8]) -> Outcome? {
        guard family == .legacy, let sign = OtherScanner.sign(opcode, p) else { return nil }
        own.scanner.saw(sign)
        guard OtherScanner.takesTheAddress(sign), !publicWhileScanning else { return nil }
        let carried: [AdvertisingRequest]? = switch pending {
        case .legacyStart(let w, _, _, _, _, _)?, .legacyData(let w, _, _)?, .legacyPaused(let w, _)?: w
        default: applied
        }
        guard let wanted = carried, wanted.contains(where: { if case .random = $0.ownAddress { true } else { false } }) else { return nil }
        own.taken = .refused
        own.switchDue = true
        notes.append(.warning("Another program scans on \(device) (\(opcode)), and a controller without advertising sets takes no new random address while it scans: until the scan has ended, \(PublicFallback.words(wanted)), each back to its own address once \(Self.addressRetryPeriod.components.seconds) s pass without it"))
        return switchToPublicIfDue()
    }

    /// Asked before each step of beacond's goes out: an enable of the legacy advertiser after another program wrote
    /// the controller's random address (the kernel starting its scan between a time slice's address and its enable)
    /// is withheld, or the beacon would go out from that program's address; the sequence then fails at it, and the
    /// beacons go to the public address at once.
    public func withholds(_ step: Step) -> CommandError? {
        guard own.switchDue, case .leSetAdvertisingEnable(true) = step.command else { return nil }
        return CommandError(opcode: step.command.opcode, reason: .withheld("another program wrote the random address of the controller on \(device)"))
    }

    /// After commands of beacond's came back (an apply, a time slice, a refresh): the steps that move every beacon to
    /// the public address when a scan started meanwhile (report them with `finished(_:)`); nil otherwise.
    public mutating func switchToPublicIfDue() -> Outcome? {
        guard own.switchDue, idle, let wanted = applied else { return nil }
        own.switchDue = false
        forget()
        return apply(wanted, dataOnlyAllowed: false, allowSwitch: false)
    }
}
