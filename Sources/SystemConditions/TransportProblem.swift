// What happened to a controller's link, in words a pure module can decide from: HCITransport and Connections say
// which one their errors are (TransportError.problem, ConnectionLoss.loss); DaemonCore's HCIDecisions decides what
// each means for beacond.

/// Why a controller could not be opened or was lost, as the transport says it (HCITransport's TransportError.problem,
/// without its system types), for the decisions the raw-HCI backend and `scan` share (DaemonCore's HCIDecisions).
public enum TransportProblem: Sendable, Hashable {
    /// hciN does not exist (yet).
    case absent
    /// hciN is down, and bringing it up needs this capability.
    case down(capability: String)
    /// The operation needs a capability the process lacks.
    case permission(capability: String, detail: String)
    /// No AF_BLUETOOTH in this kernel or network namespace.
    case noBluetooth
    /// Anything else, as the transport describes it.
    case other(String)
}

/// Why an open connection to a controller ended (Connections' ConnectionLoss).
public enum LinkLoss: Sendable, Hashable {
    /// The controller kept the command credit for this long (the kernel's ncmd timer).
    case hung(Duration)
    /// The transport failed: what it means, and its own words.
    case transport(TransportProblem, text: String)
}

/// Why a file could not be opened for an edit (SystemCalls' EditableFile.Failure.refusal).
public enum EditRefusal: Sendable, Hashable {
    /// The open itself failed.
    case opening(SystemCondition)
    /// Not a regular file.
    case notRegularFile
    /// Anything else, in the failure's own words.
    case other(String)
}
