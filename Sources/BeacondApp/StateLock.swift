// One beacond per device and state directory: the device's lock file in the state directory, held for as long as
// the process uses the device. A second `beacond run` on the same device and directory (the README's hand-run
// recipe beside the service) would otherwise read the service's ownership record as its own and take the
// service's advertising off the controller. And one writer at a time for the records (`owned`, `addresses`), which
// processes on other devices share.
import SystemCalls
import SystemdSupport

final class StateLock {
    private let directory: String
    private var held: (device: String, lock: FileLock)?

    init(directory: String = AddressStore.directory) {
        self.directory = directory
    }

    /// The lock file's name for a device: `lock.` and the device with anything but letters, digits, `.` and `-`
    /// written as %XX (so `unix:/run/a` and `unix:/run_a` are two devices).
    static func fileName(for device: String) -> String {
        var out = "lock."
        for b in device.utf8 {
            if (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == 0x2E || b == 0x2D {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + String(b >> 4, radix: 16, uppercase: true) + String(b & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// Takes `device`'s lock (letting go of another device's): nil when this process holds it now, else the
    /// sentence that says who holds it and what to do. A directory that cannot be made or opened is no conflict
    /// (nothing is shared through it either).
    func acquire(_ device: String) -> String? {
        if held?.device == device { return nil }
        let attempt: FileLock.Attempt
        do { attempt = try FileLock.exclusive(Self.fileName(for: device), in: directory, wait: false) } catch { return nil }
        switch attempt {
        case .taken(let lock):
            held?.lock.release()
            lock.record("\(processID())\n")
            held = (device, lock)
            return nil
        case .held(let holder):
            let who = Int32(holder).map { "another beacond (pid \($0))" } ?? "another beacond"
            return "\(who) is running on \(device) with the state directory \(directory): stop it first, "
                + "or give this one a state directory of its own (STATE_DIRECTORY=/tmp/beacond-\(device.filter { $0.isLetter || $0.isNumber }))"
        }
    }

    /// Runs `body` while holding the records' lock of `directory` (blocking: the other holder only reads and
    /// writes a small file). Without one (no directory), `body` runs all the same.
    static func whileWritingRecords<T, E: Error>(in directory: String, _ body: () throws(E) -> T) throws(E) -> T {
        let lock = try? FileLock.exclusive("lock.records", in: directory, wait: true)
        defer { if case .taken(let l)? = lock { l.release() } }
        return try body()
    }
}
