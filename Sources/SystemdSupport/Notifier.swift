// sd_notify: tells the service manager about readiness, status, reloads, stops and fatal errors.
import CSystemd
import SystemCalls

public enum Notifier {
    /// True when a service manager listens (NOTIFY_SOCKET is set).
    public static var isListening: Bool { environment("NOTIFY_SOCKET") != nil }

    /// Sends the newline-separated assignments as one datagram. A no-op without NOTIFY_SOCKET.
    public static func send(_ assignments: [String]) {
        guard isListening else { return }
        _ = sd_notify(0, assignments.joined(separator: "\n"))
    }

}
