// One beacond per device: the device itself is claimed (DeviceClaim, an abstract unix socket per name of the device),
// whatever the state directory, and none at all is no excuse (issue #53: beacond.service and beacond@hci0.service,
// two state directories, both drove hci0). Beside it, the device's lock file in the state directory, held for as long
// as the process uses the device. A second `beacond run` on the same device and directory (the README's hand-run
// recipe beside the service) would otherwise read the service's ownership record as its own and take the
// service's advertising off the controller. And one writer at a time for the records (`owned`, `addresses`), which
// processes on other devices share.
//
// The directory is trusted only when it is this process's user's and no one else may write it: another user's
// `addresses` would choose the address root's beacons advertise from, their `owned` what root removes, and their
// lock files what root waits on (review #43). A lock that cannot be taken is an error, never no lock.
import AESCipher
import DaemonCore
import SystemCalls
import SystemdSupport

/// What a state directory must be: the pure part of opening one.
enum StateDirectoryTrust {
    /// What to do instead, said at the end of each refusal (DaemonCore's StateProblem.remedy).
    static let remedy = StateProblem.remedy

    /// Nil when a directory reached through `steps` (FileDescriptor.walkToDirectory: every directory passed, the last
    /// one the state directory itself, and every symlink followed) is one `me` may keep its records in. Whoever owns a
    /// directory on the way, may write one that is not sticky, or owns a symlink followed chooses what the path names;
    /// the state directory itself must be `me`'s, written by no one else. A reader (`writes` false: the tools that
    /// show kept addresses) also takes root's.
    static func problem(_ path: String, steps: [PathStep], me: UInt32, writes: Bool = true) -> String? {
        guard let last = steps.last, !last.isSymlink else { return "the state directory \(path) was not reached; \(remedy)" }
        for s in steps.dropLast() {
            if s.owner != 0 && s.owner != me {
                return "the state directory \(path) is reached through \(s.path), which belongs to user \(s.owner): they choose what it names; \(remedy)"
            }
            if !s.isSymlink && s.mode & 0o022 != 0 && s.mode & 0o1000 == 0 {
                return "the state directory \(path) is reached through \(s.path), which others may write (mode \(String(s.mode, radix: 8))): they choose what it names; \(remedy)"
            }
        }
        return problem(path, owner: last.owner, mode: last.mode, me: me, writes: writes)
    }

    /// The state directory itself: `me`'s (or, for a reader, root's), and written by no one else.
    static func problem(_ path: String, owner: UInt32, mode: UInt32, me: UInt32, writes: Bool = true) -> String? {
        if owner != me && (writes || owner != 0) {
            return "the state directory \(path) belongs to user \(owner), not to the user this beacond runs as (\(me)): its records would "
                + "decide what this one advertises and removes; \(remedy)"
        }
        if mode & 0o022 != 0 {
            return "the state directory \(path) may be written by others (mode \(String(mode & 0o7777, radix: 8))): their files would "
                + "decide what this beacond advertises and removes; \(remedy)"
        }
        return nil
    }
}

final class StateLock {
    private let directory: String
    /// The device this process uses, and the lock of each of its names (DeviceIdentity).
    private var device: String?
    private var held: [String: FileLock] = [:]
    /// The device's claims, by name, each with the event source that answers who holds it.
    private var claims: [String: (claim: DeviceClaim, watch: EventSource?)] = [:]

    /// What the device's claims are named under: `beacond/device/` (a test takes its own, so that it meets no beacond
    /// on the machine nor another test run).
    private let claimPrefix: String

    init(directory: String = AddressStore.directory, claimPrefix: String = "beacond/device/") {
        self.directory = directory
        self.claimPrefix = claimPrefix
    }

    /// How long a writer waits for the records' lock: the holder only reads and writes a small file.
    static let recordsWaitMilliseconds = 2000

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

    /// Opens the state directory at `path` (made, mode 0755, when missing and `create`) if it is one this process may
    /// trust (StateDirectoryTrust).
    static func open(_ path: String, create: Bool, writes: Bool = true) throws(StateProblem) -> FileDescriptor {
        let absolute = path.hasPrefix("/") ? path : currentDirectory() + "/" + path
        let dir: FileDescriptor, steps: [PathStep]
        do { (dir, steps) = try FileDescriptor.walkToDirectory(absolute, creating: create) } catch {
            let missing = error.errno == .noEntry || (error.call.hasPrefix("mkdir") && (error.errno.isPermission || error.errno == .readOnlyFileSystem))
            throw StateProblem(kind: missing ? .absent : .unusable, description: "the state directory \(path) cannot be opened: \(error); \(StateDirectoryTrust.remedy)")
        }
        if let why = StateDirectoryTrust.problem(path, steps: steps, me: processEffectiveUserID(), writes: writes) {
            throw StateProblem(kind: .unusable, description: why)
        }
        return dir
    }

    /// Why `name` in `path` is no lock this process can take (DaemonCore decides).
    private static func problem(_ failure: FileLock.Failure, _ name: String, in path: String, device: String? = nil) -> StateProblem {
        StateProblem(lock: failure.refusal, file: "\(path)/\(name)", directory: path, device: device, me: processEffectiveUserID(),
                     waitMilliseconds: recordsWaitMilliseconds)
    }

    /// Takes `device`'s locks, one per name it has (DeviceIdentity: two spellings of one controller are one device),
    /// letting go of another device's: nil when this process holds them now, else why not. No state directory at all
    /// (none can be made: a user without one) is no conflict: nothing is shared through it.
    func acquire(_ device: String, identity: DeviceIdentity? = nil, loop: EventLoop? = nil) -> StateProblem? {
        let names = (identity ?? DeviceIdentity(device)).names
        if self.device == device, Set(held.keys) == Set(names), Set(claims.keys) == Set(names) { return nil }
        if let busy = claim(device, names, loop: loop) { return busy }
        let dir: FileDescriptor
        do { dir = try Self.open(directory, create: true) } catch {
            return error.kind == .absent ? nil : error
        }
        var taken: [String: FileLock] = [:]
        for n in names {
            // Already held through this process's own descriptor: a second one would conflict with it.
            if let mine = held[n] {
                taken[n] = mine
                continue
            }
            let file = Self.fileName(for: n)
            do {
                taken[n] = try FileLock.exclusive(file, in: dir)
            } catch {
                for (k, l) in taken where held[k] == nil { l.release() }
                return Self.problem(error, file, in: directory, device: device)
            }
        }
        for (k, l) in held where taken[k] == nil { l.release() }
        held = taken
        self.device = device
        return nil
    }

    /// The abstract socket's name for one of a device's names: `beacond/device/` and the name, or its SHA-256 when
    /// that is too long for a socket address.
    static func claimName(for name: String, prefix: String = "beacond/device/") -> String {
        let whole = prefix + name
        return whole.utf8.count <= DeviceClaim.maximumNameBytes ? whole : prefix + "sha256:" + SHA256.hex(Array(name.utf8))
    }

    /// Claims each of the device's names (letting go of another device's): nil when this process holds them all.
    private func claim(_ device: String, _ names: [String], loop: EventLoop?) -> StateProblem? {
        var taken: [String: (claim: DeviceClaim, watch: EventSource?)] = [:]
        for n in names {
            if let mine = claims[n] {
                taken[n] = mine
                continue
            }
            do {
                let c = try DeviceClaim.claim(Self.claimName(for: n, prefix: claimPrefix))
                taken[n] = (c, try? loop?.addReader(fd: c.descriptor) { _ in c.answerQuestions() })
            } catch {
                for (k, t) in taken where claims[k] == nil {
                    t.watch?.cancel()
                    t.claim.release()
                }
                return StateProblem(claim: error.refusal, device: device)
            }
        }
        for (k, t) in claims where taken[k] == nil {
            t.watch?.cancel()
            t.claim.release()
        }
        claims = taken
        return nil
    }

    /// Runs `body` with the state directory while holding its records' lock (waiting for it at most
    /// `recordsWaitMilliseconds`). Every problem with the directory or the lock goes through `failure`.
    static func whileWritingRecords<T, E: Error>(in directory: String, failure: (StateProblem) -> E,
                                                 _ body: (FileDescriptor) throws(E) -> T) throws(E) -> T {
        let dir: FileDescriptor
        do { dir = try open(directory, create: true) } catch { throw failure(error) }
        let lock: FileLock
        do { lock = try FileLock.exclusive("lock.records", in: dir, waitMilliseconds: recordsWaitMilliseconds) } catch {
            throw failure(problem(error, "lock.records", in: directory))
        }
        defer { lock.release() }
        return try body(dir)
    }
}
