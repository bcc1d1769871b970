// The one event loop: libsystemd's sd-event with I/O, timer and signal sources and the watchdog.
// C callbacks reach their Swift handler through Unmanaged userdata, here and nowhere else.
import CSystemd
import SystemCalls

/// sd-* calls return -errno.
@inline(__always)
func check(_ call: String, _ r: Int32) throws(SystemError) {
    try SystemError.check(call, negatedErrno: r)
}

/// A registered source. Keep it to change or cancel it; the loop keeps it alive until it is cancelled.
public final class EventSource {
    fileprivate var source: OpaquePointer?
    fileprivate let handler: (UInt32) -> Void
    fileprivate weak var loop: EventLoop?
    /// A fire-once timer: released once it has fired, unless its handler rearmed it.
    fileprivate var releasedAfterFiring = false

    fileprivate init(handler: @escaping (UInt32) -> Void) { self.handler = handler }

    /// Removes the source from the loop for good.
    public func cancel() {
        guard let s = source else { return }
        sd_event_source_disable_unref(s)
        source = nil
        loop?.forget(self)
    }

    /// For timers: fire once, `after` from now.
    public func rearm(after: Duration) {
        guard let s = source else { return }
        _ = sd_event_source_set_time_relative(s, microseconds(after))
        _ = sd_event_source_set_enabled(s, Int32(SD_EVENT_ONESHOT))
    }

    /// For timers: armed to fire (not disabled).
    public var isArmed: Bool {
        guard let s = source else { return false }
        var state: Int32 = 0
        return sd_event_source_get_enabled(s, &state) >= 0 && state != Int32(SD_EVENT_OFF)
    }

    /// For timers: do not fire until rearmed.
    public func disarm() {
        guard let s = source else { return }
        _ = sd_event_source_set_enabled(s, Int32(SD_EVENT_OFF))
    }

    deinit { if let s = source { sd_event_source_disable_unref(s) } }
}

func microseconds(_ d: Duration) -> UInt64 {
    let (s, atto) = d.components
    return UInt64(max(0, s)) * 1_000_000 + UInt64(max(0, atto) / 1_000_000_000_000)
}

/// A single-threaded sd-event loop.
public final class EventLoop {
    private var event: OpaquePointer?
    private var sources: [ObjectIdentifier: EventSource] = [:]

    public init() throws(SystemError) {
        try check("sd_event_new", sd_event_new(&event))
    }

    deinit {
        for s in sources.values { s.cancel() }
        sd_event_unref(event)
    }

    fileprivate func forget(_ s: EventSource) { sources[ObjectIdentifier(s)] = nil }

    /// How many sources are registered (I/O, timers, signals): for tests and diagnostics.
    public var sourceCount: Int { sources.count }

    private func register(_ s: EventSource) -> UnsafeMutableRawPointer {
        s.loop = self
        sources[ObjectIdentifier(s)] = s
        return Unmanaged.passUnretained(s).toOpaque()
    }

    /// Calls `handler(revents)` whenever `fd` is readable (EPOLLIN) or broken (EPOLLHUP/EPOLLERR).
    public func addReader(fd: Int32, handler: @escaping (UInt32) -> Void) throws(SystemError) -> EventSource {
        let s = EventSource(handler: handler)
        let userdata = register(s)
        let r = sd_event_add_io(event, &s.source, fd, UInt32(EPOLLIN.rawValue), { _, _, revents, userdata in
            Unmanaged<EventSource>.fromOpaque(userdata!).takeUnretainedValue().handler(revents)
            return 0
        }, userdata)
        if r < 0 { forget(s) }
        try check("sd_event_add_io", r)
        return s
    }

    /// A fire-once CLOCK_MONOTONIC timer, `after` from now. Once it has fired it is released, unless its handler
    /// rearmed it (then it stays, as one source, until a run that does not rearm it).
    public func addTimer(after: Duration, handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let s = try makeTimer(after: after, handler: handler)
        s.releasedAfterFiring = true
        return s
    }

    /// A disarmed timer that stays registered, for rearming whenever needed; `cancel()` releases it.
    public func addIdleTimer(handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let s = try makeTimer(after: .seconds(3600), handler: handler)
        s.disarm()
        return s
    }

    private func makeTimer(after: Duration, handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let s = EventSource(handler: { _ in handler() })
        let userdata = register(s)
        let r = sd_event_add_time_relative(event, &s.source, CLOCK_MONOTONIC, microseconds(after), 1000, { _, _, userdata in
            let source = Unmanaged<EventSource>.fromOpaque(userdata!).takeUnretainedValue()
            source.handler(0)
            if source.releasedAfterFiring && !source.isArmed { source.cancel() }
            return 0
        }, userdata)
        if r < 0 { forget(s) }
        try check("sd_event_add_time_relative", r)
        return s
    }

    /// Delivers `signo` as an event. The signal is blocked for the process so it only ever arrives here.
    public func addSignal(_ signo: Int32, handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        try blockSignal(signo)
        let s = EventSource(handler: { _ in handler() })
        let userdata = register(s)
        let r = sd_event_add_signal(event, &s.source, signo, { _, _, userdata in
            Unmanaged<EventSource>.fromOpaque(userdata!).takeUnretainedValue().handler(0)
            return 0
        }, userdata)
        if r < 0 { forget(s) }
        try check("sd_event_add_signal", r)
        return s
    }

    /// Sends WATCHDOG=1 from the loop itself, between a half and three quarters of WATCHDOG_USEC after the last
    /// (and at most once a quarter when the loop wakes for other events); false when systemd
    /// asked for no watchdog.
    @discardableResult
    public func enableWatchdog() throws(SystemError) -> Bool {
        let r = sd_event_set_watchdog(event, 1)
        try check("sd_event_set_watchdog", r)
        return r > 0
    }

    /// CLOCK_MONOTONIC now, in microseconds (the loop's cached time while dispatching).
    public var nowMicroseconds: UInt64 {
        var usec: UInt64 = 0
        _ = sd_event_now(event, CLOCK_MONOTONIC, &usec)
        return usec
    }

    /// Runs until `exit(code:)`; returns the code.
    public func run() throws(SystemError) -> Int32 {
        let r = sd_event_loop(event)
        try check("sd_event_loop", r)
        return r
    }

    public func exit(code: Int32) { _ = sd_event_exit(event, code) }
}
