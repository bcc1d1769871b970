// While a legacy controller refuses beacond's random address (another program scans on it: Core Vol 4 Part E
// §7.8.4), which beacons go out from the controller's public address and which pause. A beacon whose address hides who
// it is (rotating, resolvable, an EID's) or keys its frame's nonce (an encrypted self-report) never takes the public
// one: from one fixed address its EIDs would be linked and its frames undecryptable. The others keep their turn on the
// air from the public address. Pure: HCIAdvertiser asks at every legacy apply.

public struct PublicFallback: Sendable, Hashable {
    /// The beacons that go on the air, in order, each with the address it goes out from.
    public let live: [AdvertisingRequest]
    /// The indices of the paused ones (empty while the controller takes the addresses).
    public let paused: Set<Int>

    /// `refused`: the controller refuses beacond's random address now.
    public init(_ requests: [AdvertisingRequest], refused: Bool) {
        guard refused else {
            (live, paused) = (requests, [])
            return
        }
        var live: [AdvertisingRequest] = []
        var paused = Set<Int>()
        for (k, r) in requests.enumerated() {
            if r.neverPublic, case .random = r.ownAddress {
                paused.insert(k)
            } else {
                var p = r
                p.ownAddress = .public
                live.append(p)
            }
        }
        (self.live, self.paused) = (live, paused)
    }

    /// What the fallback does to `requests`, in words: "every beacon goes out from the controller's public address",
    /// or which pause.
    public static func words(_ requests: [AdvertisingRequest]) -> String {
        let paused = requests.filter(\.neverPublic).count
        if paused == 0 { return "every beacon goes out from the controller's public address" }
        let which = "its address private (rotating, resolvable, Eddystone-EID) or in its frame's nonce (an encrypted self-report)"
        if paused == requests.count {
            return requests.count == 1 ? "the beacon is paused: it never goes out from the public address, having \(which)"
                : "every beacon is paused: none goes out from the public address, each having \(which)"
        }
        return "\(paused) of \(requests.count) beacons are paused, never going out from the public address with \(which); the others go out from the controller's public address"
    }
}
