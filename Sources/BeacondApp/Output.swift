// Writing to stdout/stderr by file descriptor (Swift 6 forbids the C stdio globals).
import SystemCalls

enum Output {
    /// Writes all of `text`, retrying short writes; gives up silently on a closed pipe.
    static func out(_ text: String) { writeAll(toUnowned: 1, Array(text.utf8)) }
    static func err(_ text: String) { writeAll(toUnowned: 2, Array(text.utf8)) }
}
