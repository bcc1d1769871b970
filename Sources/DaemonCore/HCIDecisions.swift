// The raw-HCI side's decisions that are not the advertiser's, as values with tests: what a transport problem or a
// failed command tells the user (shared by HCIBackend and `scan`), how the advertiser's notes are logged, and what
// is on the air as the advertiser reports it. HCIBackend only carries commands and timers.
import BeaconCore
import BluetoothHCI
import HCIHost
import SystemConditions

public enum HCIDecisions {
    /// Opening `device` failed.
    public static func opening(_ device: String, _ problem: TransportProblem, mayBringUp: Bool) -> BackendFailure {
        switch problem {
        case .absent:
            return BackendFailure(message: "Waiting for \(device) to appear", level: .notice)
        case .down(let cap):
            return mayBringUp
                ? BackendFailure(message: "\(device) is down and beacond lacks \(cap) to bring it up; waiting for it to come up", level: .warning)
                : BackendFailure(message: "Waiting for \(device) to come up", level: .notice)
        case .permission(let cap, let detail):
            return BackendFailure(message: "Cannot use \(device): \(detail); beacond needs \(cap)", fatal: .noPermission)
        case .noBluetooth:
            return .noBluetooth(device)
        case .other(let text):
            return BackendFailure(message: "Cannot open \(text)", level: .warning)
        }
    }

    /// An open connection was lost; `text`: the transport's own words for it.
    public static func lost(_ device: String, _ problem: TransportProblem, text: String) -> BackendFailure {
        if case .permission(let cap, let detail) = problem {
            return BackendFailure(message: "Cannot send commands to \(device): \(detail); beacond needs \(cap)", fatal: .noPermission)
        }
        return BackendFailure(message: "Lost the controller (\(text))", level: .warning)
    }

    /// An open connection was lost: the transport failed, or the controller kept the command credit (LinkLoss, as
    /// Connections says it).
    public static func lost(_ device: String, _ loss: LinkLoss) -> BackendFailure {
        switch loss {
        case .hung(let d): hung(device, after: d)
        case .transport(let problem, let text): lost(device, problem, text: text)
        }
    }

    /// What a failed probe means for `scan`: the message it exits with.
    public static func scanProbeFailed(_ f: ProbeFailure, device: String) -> String {
        switch f {
        case .step(let s): "Failed to probe the controller on \(device): \(s.error)"
        case .malformedReply: "The controller on \(device) sent a malformed probe reply"
        }
    }

    /// The controller took a command and gave no command credit back.
    public static func hung(_ device: String, after d: Duration) -> BackendFailure {
        BackendFailure(message: "The controller on \(device) gave no command credit back within \(formatDuration(d)) and is treated as hung", unanswered: true)
    }

    /// A step refused or unanswered, in what beacond was doing.
    public static func failed(_ what: String, _ e: CommandError, device: String) -> BackendFailure {
        BackendFailure(message: "Failed to \(what): \(e)", fields: fields(e, device: device), unanswered: e.unanswered)
    }

    /// What a failed probe for advertising means for the backend: the probe's step or the read of the set count
    /// refused or unanswered, or a malformed reply.
    public static func probeFailed(_ f: AdvertisingProbeFailure, device: String) -> BackendFailure {
        switch f {
        case .probe(.step(let s)): failed("probe the controller on \(device)", s.error, device: device)
        case .probe(.malformedReply): BackendFailure(message: "The controller on \(device) sent a malformed probe reply")
        case .sets(let s): failed("read the number of advertising sets on \(device)", s.error, device: device)
        }
    }

    /// A failed probe in words, for `status --check`: the command and what the controller answered.
    public static func probeProblem(_ f: ProbeFailure) -> String {
        switch f {
        case .step(let s): "\(s.step.command.opcode): \(s.error)"
        case .malformedReply: "a malformed reply"
        }
    }

    /// The commands a timer sends: a time slot's (the next beacon's turn) or the refresh's (off and on again).
    public enum TimedSteps: Sendable { case slice, refresh }

    /// What a slot's or a refresh's failed commands mean, once the advertiser has had its say (a refused address,
    /// HCIAdvertiser.sliceFailed).
    public enum TimedFailure: Sendable, Equatable {
        /// The controller stopped answering: the connection is lost.
        case lost(BackendFailure)
        /// A refusal the next slot or refresh tries again: a warning once per connection for each `kind`, then at
        /// debug level.
        case oddity(kind: String, message: String)
    }

    public static func failed(_ which: TimedSteps, _ f: StepFailure, device: String) -> TimedFailure {
        switch (which, f.error.unanswered) {
        case (.slice, true): .lost(failed("send the next time slice on \(device)", f.error, device: device))
        case (.refresh, true): .lost(failed("turn the advertising on \(device) off and on again", f.error, device: device))
        case (.slice, false):
            .oddity(kind: "slice", message: "The controller on \(device) refused the next time slice's data (\(f.error)); trying again at the next slot")
        case (.refresh, false):
            .oddity(kind: "refresh", message: "The controller on \(device) refused \(f.step.command.opcode) when beacond turned its advertising off and on again (\(f.error)); trying again in \(HCIAdvertiser.refreshPeriod.components.seconds) s")
        }
    }

    /// The journal fields of a command error.
    public static func fields(_ e: CommandError, device: String) -> [String] {
        var f = ["HCI_DEVICE=\(device)", "HCI_OPCODE=\(hex16(e.opcode.rawValue))"]
        if let s = e.status { f.append("HCI_STATUS=\(hex8(s.rawValue))") }
        return f
    }

    /// An advertiser's note as a log line; `once`: a warning about the settings, said once per connection (an apply
    /// runs again at every telemetry refresh and reload, and the same setting is not news then).
    public static func logLine(_ note: HCIAdvertiser.Note, device: String) -> (level: LogLevel, message: String, fields: [String], once: Bool) {
        switch note {
        case .warning(let m): (.warning, m, ["HCI_DEVICE=\(device)"], true)
        case .info(let m): (.info, m, ["HCI_DEVICE=\(device)"], false)
        case .notice(let m, let e): (.notice, m, fields(e, device: device), false)
        case .refused(let m, let e, .retryingWithFloor): (.warning, m, fields(e, device: device), false)
        case .refused(let m, let e, .checkConfig): (.err, m, fields(e, device: device), false)
        }
    }

    /// The probe's line for the journal, and the debug line when the controller's bitmap and feature bit disagree.
    /// `family`: what the advertiser took (legacy when an extended controller refused to say its number of sets).
    public static func probeLines(_ probed: ControllerInfo, family: CommandFamily, capacity: Int?, device: String) -> [(LogLevel, String)] {
        let sets = family == .extended ? ", \(capacity ?? 1) advertising set\(capacity == 1 ? "" : "s")"
            : probed.preferredFamily == .extended ? " (it refused LE Read Number of Supported Advertising Sets: the legacy family is in use there)" : ""
        var lines: [(LogLevel, String)] = [(.info, "Controller on \(device): Bluetooth \(probed.version.coreVersionName), "
            + "manufacturer \(hex16(probed.version.manufacturer)), using \(family) advertising commands\(sets)")]
        if probed.bitmapDisagrees {
            lines.append((.debug, "The controller's Supported Commands bitmap and its LE Extended Advertising feature bit disagree; following the feature bit, as the kernel does"))
        }
        return lines
    }

    /// How many beacons can have their own set, from LE Read Number of Supported Advertising Sets' reply; nil when
    /// the controller refused it (Command Disallowed: the legacy family is in use since its reset, as when the kernel
    /// scanned with legacy commands first; Unknown HCI Command: the feature bit without the commands). Either way
    /// the advertiser takes legacy commands.
    public static func capacity(fromReply reply: [UInt8]?) -> Int? {
        guard let reply, reply.first == 0, reply.count >= 2 else { return nil }
        return max(1, Int(reply[1]))
    }
}

extension OnAir {
    /// What the raw-HCI advertiser has on the air, with each beacon's address (`notes`: as STATUS says it; `own`: the
    /// addresses), once for all when they share one, else per beacon; every beacon from the public address while
    /// the controller refuses beacond's own (another program scans).
    public init?(hci a: HCIAdvertiser, device: String, notes: [String], own: [OwnAddress]) {
        guard let r = a.report else { return nil }
        let n = a.applied?.count ?? 1
        let controller = ControllerSummary(backend: .hci, family: a.family, bluetoothVersion: a.info.version.coreVersionName,
                                           manufacturer: a.info.version.manufacturer, sets: a.family == .extended ? a.capacity : nil,
                                           timeSliced: a.family == .legacy && n > 1)
        let scanning = "another program scans on \(device), and the controller takes no new random address while it scans"
        var beacons = r.beacons.map {
            BeaconOnAir(every: $0.every, details: $0.details, txPower: $0.txPower,
                        paused: $0.paused ? "\(scanning); its address must not be the public one (it hides who the beacon is, or its frames' nonce holds it), so it is off the air until the scan has ended" : nil,
                        events: $0.events)
        }
        if a.publicWhileScanning {
            let live = n - a.paused.count
            let what = a.paused.isEmpty ? "public address while another program scans on \(device)"
                : live == 0 ? "every beacon paused while another program scans on \(device)"
                : "public address while another program scans on \(device), \(a.paused.count) of \(n) beacons paused"
            self.init(interval: r.interval, details: r.details + [what], txPower: r.txPower,
                      beacons: beacons, controller: controller, addresses: (0..<n).map { a.paused.contains($0) ? nil : .public },
                      addressesHeldBack: "\(scanning); each beacon's own address comes back once the scan has ended")
            return
        }
        let shared = Set(notes).count <= 1
        if !shared {
            for k in beacons.indices where k < notes.count {
                beacons[k].details.append(notes[k])
                beacons[k].address = k < own.count ? own[k] : nil
            }
        }
        self.init(interval: r.interval, details: r.details + (shared ? notes.prefix(1) : []), txPower: r.txPower, beacons: beacons,
                  controller: controller, addresses: own)
    }
}
