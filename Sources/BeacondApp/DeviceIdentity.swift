// Which controller a device setting names, so that two spellings of one controller are one device: `unix:/run/m.sock`
// and `unix:/run/./m.sock`, `serial:/dev/serial0` and `serial:/dev/ttyAMA0`, `tcp:localhost:9` and `tcp:127.0.0.1:9`.
// The device lock and status --check's hands-off rule compared the strings, so a second beacond ran beside the first
// and the check reset a running daemon's controller (review #43). Now they compare these names.
import BluetoothHCI
import SystemCalls

struct DeviceIdentity: Hashable {
    /// Every name the device has here: two devices are one when any name is shared. The first is its resolved
    /// spelling; a socket or a serial line that exists adds its inode or device number (hard links, device nodes made
    /// elsewhere), a host its every address.
    var names: [String]

    func overlaps(_ other: DeviceIdentity) -> Bool { !Set(names).isDisjoint(with: other.names) }

    /// What the system says, passed in so that the rule can be tested without the files.
    struct Facts {
        var realPath: (String) -> String?
        var file: (String) -> FileIdentity?
        var addresses: (String) -> [String]
        static var system: Facts { Facts(realPath: SystemCalls.realPath, file: FileIdentity.init(path:), addresses: numericAddresses(of:)) }
    }

    init(names: [String]) { self.names = names }

    /// `text` as a device setting; one that does not parse is only itself.
    init(_ text: String, facts: Facts = .system) {
        guard let spec = try? DeviceSpec(parsing: text) else {
            self.init(names: [text])
            return
        }
        self.init(spec, facts: facts)
    }

    init(_ spec: DeviceSpec, facts: Facts = .system) {
        switch spec {
        case .kernel(let index):
            names = ["hci\(index)"]
        case .unix(let path):
            let resolved = Self.resolve(path, facts)
            names = ["unix:\(resolved)"]
            if let f = facts.file(resolved) { names.append("unix@\(f.device):\(f.inode)") }
        case .serial(let path, _):
            // The same line at any baud rate.
            let resolved = Self.resolve(path, facts)
            names = ["serial:\(resolved)"]
            if let rdev = facts.file(resolved)?.characterDevice { names.append("chr@\(rdev)") }
        case .tcp(let host, let port):
            let addresses = facts.addresses(host)
            names = (addresses.isEmpty ? [host.lowercased()] : addresses).map { DeviceSpec.tcp(host: $0, port: port).description }
        }
    }

    /// The path with its symlinks, `.`, `..` and doubled slashes resolved; a missing file's through its directory.
    static func resolve(_ path: String, _ facts: Facts) -> String {
        if let r = facts.realPath(path) { return r }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        let parent = parts.dropLast().joined(separator: "/")
        let name = String(parts.last ?? "")
        if let r = facts.realPath(parent.isEmpty ? (path.hasPrefix("/") ? "/" : ".") : parent) {
            return (r == "/" ? "" : r) + "/" + name
        }
        // Nothing of it exists: the spelling without empty and `.` components.
        let kept = parts.enumerated().filter { k, p in (k == 0 || !p.isEmpty) && p != "." }.map(\.element)
        return kept.joined(separator: "/")
    }
}
