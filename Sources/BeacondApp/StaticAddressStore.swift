// The random static address `address = "static"` advertises from: made once from the kernel's CSPRNG and kept in
// the state directory, so it is the same after restarts and reboots and different on every machine.
import BluetoothHCI
import SystemCalls
import SystemdSupport

enum StaticAddressStore {
    /// `$STATE_DIRECTORY` (its first entry) when systemd set it (StateDirectory=beacond), else /var/lib/beacond.
    static var directory: String {
        if let d = environment("STATE_DIRECTORY")?.split(separator: ":").first, !d.isEmpty { return String(d) }
        return "/var/lib/beacond"
    }

    static let fileName = "static-address"

    struct Failure: Error, CustomStringConvertible {
        var description: String
        /// The file is there but holds no address: an identity was made and is damaged (not a missing directory).
        var damaged = false
    }

    /// The kept address, made and stored first when there is none. Never replaces a file that is there: a damaged
    /// one is an error that says what to do, not a new identity on the air.
    static func load(in directory: String = directory) throws(Failure) -> [UInt8] {
        let path = "\(directory)/\(fileName)"
        do {
            let bytes = try FileDescriptor.readFile(path, limit: 64)
            let text = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == " " }).first.map(String.init) ?? ""
            guard bytes.count <= 64, let a = RandomAddress.parse(text), RandomAddress.isStatic(a) else {
                throw Failure(description: "\(path) does not hold a random static address (one line like C3:12:34:56:78:9A, the top two bits set); remove it to make a new one",
                              damaged: true)
            }
            return a
        } catch let e as Failure {
            throw e
        } catch let e as SystemError where e.errno == .noEntry {
            return try make(in: directory)
        } catch {
            throw Failure(description: "Cannot read \(path): \(error)")
        }
    }

    private static func make(in directory: String) throws(Failure) -> [UInt8] {
        var address: [UInt8]?
        while address == nil {
            do { address = RandomAddress.makeStatic(from: try RandomID.bytes(6)) } catch {
                throw Failure(description: "Cannot make a static address: \(error)")
            }
        }
        let a = address!
        do {
            try createFileDurably(named: fileName, in: directory, contents: Array((RandomAddress.format(a) + "\n").utf8))
        } catch where error.call.hasPrefix("mkdir") {
            throw Failure(description: "Cannot keep a static address: mkdir \(directory): \(error.errno); give beacond a state directory (the unit's StateDirectory=beacond) or set address = \"public\" or \"rotating\"")
        } catch {
            throw Failure(description: "Cannot keep a static address in \(directory): \(error); give beacond a state directory (the unit's StateDirectory=beacond) or set address = \"public\" or \"rotating\"")
        }
        return a
    }
}
