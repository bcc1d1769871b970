// Noticing a step of the wall clock (settimeofday, date -s, an NTP client's step at boot on a Pi without a real-time
// clock), and not a slew: a CLOCK_REALTIME timerfd armed absolute and far in the future with TFD_TIMER_CANCEL_ON_SET,
// the mechanism systemd uses for its own time-change events. The descriptor becomes readable at each step.
import CLinux
import Glibc

public final class ClockStepWatch {
    public let file: FileDescriptor

    public init() throws(SystemError) {
        file = FileDescriptor(owning: try retryingInterrupts("timerfd_create") {
            timerfd_create(CLOCK_REALTIME, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        })
        try arm()
    }

    /// Far past anything a clock shows: 2200-01-01 (within the kernel's time range).
    private static let never = itimerspec(it_interval: timespec(tv_sec: 0, tv_nsec: 0), it_value: timespec(tv_sec: 7_258_118_400, tv_nsec: 0))

    private func arm() throws(SystemError) {
        var spec = Self.never
        let fd = file.rawValue
        _ = try retryingInterrupts("timerfd_settime") {
            timerfd_settime(fd, Int32(TFD_TIMER_ABSTIME) | Int32(TFD_TIMER_CANCEL_ON_SET), &spec, nil)
        }
    }

    /// Call when the descriptor is readable: true when the wall clock was set since the last call (the watch is then
    /// armed again), false for a spurious wakeup.
    public func stepped() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 8)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(file.rawValue, $0.baseAddress, 8) }
        guard n < 0, Glibc.errno == ECANCELED else { return false }
        try? arm()
        return true
    }
}
