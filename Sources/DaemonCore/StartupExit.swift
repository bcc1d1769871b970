// Why `beacond run` ends before its start, decided from what it found: the config file refused (78), a self-test of
// the crypto its beacons need failed (69), or the state directory's lock for the device not to be had (75 when
// another beacond holds it, 77 when the directory or the lock is not this user's own). The shell gathers the facts,
// then logs the lines, tells systemd and exits with the code.
import BeaconCore

public struct StartupExit: Sendable, Equatable {
    public var code: ExitCode
    /// Journal lines (all at error level), each with its fields.
    public var lines: [Line]
    /// The sd_notify assignments: STATUS and EXIT_STATUS.
    public var notify: [String]

    public struct Line: Sendable, Equatable {
        public var message: String
        public var fields: [String]
    }

    /// What `run` found that may keep it from starting.
    public enum Finding: Sendable {
        /// The config file has errors.
        case configRefused(ConfigError)
        /// The crypto self-tests that failed (nil: passed), for a config read without errors: libgcrypt's AES-128
        /// against FIPS-197 (for Eddystone-EID beacons) and its AES-CCM against bthome.io's example (for an
        /// encrypted BTHome self-report).
        case selfTests(BeaconConfiguration, aes128: String?, ccm: String?)
        /// The lock on the device in the state directory cannot be taken: `busy` when another beacond holds it.
        case stateLock(busy: Bool, problem: String)
    }

    /// The exit `finding` leads to; nil when `run` may go on.
    public static func decide(_ finding: Finding) -> StartupExit? {
        switch finding {
        case .configRefused(let error):
            let lines = error.diagnostics.map { d in
                Line(message: d.formatted(path: error.path), fields: ["CONFIG_FILE=\(error.path)"] + (d.location.map { ["CONFIG_LINE=\($0.line)"] } ?? []))
            }
            return StartupExit(code: .config, lines: lines, notify: ["STATUS=Invalid configuration: \(error.summary)", "EXIT_STATUS=\(ExitCode.config.rawValue)"])
        case .selfTests(let config, let aes128, let ccm):
            // EIDs come from AES-128, an encrypted self-report's frames from AES-CCM: each checked before any goes on the air.
            if config.beacons.contains(where: { $0.beacon.eid != nil }), let why = aes128 {
                return unavailable("Cannot compute Eddystone-EID identifiers: \(why)")
            }
            if config.beacons.contains(where: { $0.beacon.bthome?.encrypted == true }), let why = ccm {
                return unavailable("Cannot encrypt the BTHome self-report: \(why)")
            }
            return nil
        case .stateLock(let busy, let problem):
            // Another beacond on the device: later (the unit retries). A state directory or lock that is not beacond's
            // own: not by retrying.
            let code: ExitCode = busy ? .temporaryFailure : .noPermission
            return StartupExit(code: code, lines: [Line(message: "Cannot run: \(problem)", fields: [])],
                               notify: ["STATUS=Cannot run: \(problem)", "EXIT_STATUS=\(code.rawValue)"])
        }
    }

    private static func unavailable(_ message: String) -> StartupExit {
        StartupExit(code: .unavailable, lines: [Line(message: message, fields: [])],
                    notify: ["STATUS=\(message)", "EXIT_STATUS=\(ExitCode.unavailable.rawValue)"])
    }
}
