// What beacond has put on its controllers, kept in the state directory so that the next start can take off what a
// killed run left (the kernel keeps mgmt instances, and a controller keeps its advertising sets, when a process
// dies). Pure: the shell reads and writes the file.

public struct OwnershipRecord: Sendable, Hashable {
    /// What a number names.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Extended advertising sets (handles) beacond configured through raw HCI on a kernel hciN.
        case hciSets = "hci-sets"
        /// Advertising instances beacond added through mgmt.
        case mgmtInstances = "mgmt-instances"
    }

    public struct Key: Sendable, Hashable, Comparable {
        public var device: String
        public var kind: Kind
        public init(device: String, kind: Kind) {
            self.device = device
            self.kind = kind
        }
        public static func < (a: Key, b: Key) -> Bool { (a.device, a.kind.rawValue) < (b.device, b.kind.rawValue) }
    }

    public private(set) var entries: [Key: Set<UInt8>] = [:]

    public init() {}

    /// The file's text. Lines it does not understand are skipped (and counted): the file is beacond's own, and a
    /// damaged line must not stop a start; at worst something stays on the air as before.
    public init(parsing text: String) {
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(separator: " ")
            guard let first = fields.first, !first.hasPrefix("#") else { continue }
            guard fields.count >= 2, let kind = Kind(rawValue: String(fields[1])),
                  first.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == ":" || $0 == "-" || $0 == "_" || $0 == "/" || $0 == ".") })
            else { skippedLines += 1; continue }
            var numbers = Set<UInt8>()
            var ok = true
            for f in fields.dropFirst(2) {
                guard let n = UInt8(f) else { ok = false; break }
                numbers.insert(n)
            }
            guard ok else { skippedLines += 1; continue }
            self[String(first), kind] = numbers
        }
    }

    /// Lines of the text that were not understood.
    public private(set) var skippedLines = 0

    public subscript(device: String, kind: Kind) -> Set<UInt8> {
        get { entries[Key(device: device, kind: kind)] ?? [] }
        set { entries[Key(device: device, kind: kind)] = newValue.isEmpty ? nil : newValue }
    }

    public var isEmpty: Bool { entries.isEmpty }

    public var text: String {
        var out = "# beacond: what it put on its controllers, taken off again by the next start if a run was killed.\n"
            + "# Written by beacond; deleting it while beacond is stopped only loses that clean-up.\n"
        for key in entries.keys.sorted() {
            out += "\(key.device) \(key.kind.rawValue)" + entries[key]!.sorted().map { " \($0)" }.joined() + "\n"
        }
        return out
    }
}
