// What a failure to read or keep the state directory's records means: decided here from SystemCondition (and
// StateProblem), carried out by BeacondApp's stores.
@testable import DaemonCore
import SystemConditions
import Testing

@Suite("state file failures")
struct StateFileFailureTests {
    @Test("an address book over the limit is damaged, to fix or remove; any other failure is said as it is")
    func addressBookUnreadable() {
        #expect(AddressBook.unreadable("/s/addresses", SystemCondition(.tooLarge, "File too large"), text: "read(addresses): over 1048576 bytes: File too large")
                == "/s/addresses is larger than 1 MiB, far more than beacond writes: fix it, or remove it (every beacon then gets a new address)")
        #expect(AddressBook.unreadable("/s/addresses", SystemCondition(.accessDenied, "Permission denied"), text: "openat(addresses): Permission denied")
                == "Cannot read /s/addresses: openat(addresses): Permission denied")
    }
}

@Suite("state problems")
struct StateProblemTests {
    @Test("no state directory at all lets a beacon fall back from its static address, and says how; anything else refuses")
    func staticAddress() {
        let absent = StateProblem(kind: .absent, description: "the state directory /s cannot be opened")
        #expect(absent.staticAddressRefusal.message
                == "Cannot keep a static address: the state directory /s cannot be opened; or set address = \"public\" or \"rotating\"")
        #expect(absent.staticAddressRefusal.fallsBack)
        for kind in [StateProblem.Kind.unusable, .busy] {
            let p = StateProblem(kind: kind, description: "why")
            #expect(p.staticAddressRefusal.message == "Cannot keep a static address: why")
            #expect(!p.staticAddressRefusal.fallsBack)
        }
    }

    @Test("an unreadable ownership record is warned of, unless there is no state directory at all")
    func ownership() {
        #expect(StateProblem(kind: .absent, description: "why").ownershipUnread("/s/owned") == nil)
        #expect(StateProblem(kind: .busy, description: "why").ownershipUnread("/s/owned")
                == "Cannot read /s/owned: why; what an earlier run left on the controller is not removed")
    }
}

@Suite("lock problems")
struct LockProblemTests {
    private func problem(_ r: LockRefusal, device: String? = nil) -> StateProblem {
        StateProblem(lock: r, file: "/s/lock.records", directory: "/s", device: device, me: 1000, waitMilliseconds: 2000)
    }

    @Test("a device claimed is another beacond on it, whatever the state directory; a claim that failed says why")
    func claimed() {
        #expect(StateProblem(claim: .held(by: 42), device: "hci0") == StateProblem(kind: .busy, description:
            "another beacond (pid 42) is running on hci0: stop it first (one controller takes one beacond, whatever its state directory: beacond.service and beacond@hci0.service are two)"))
        #expect(StateProblem(claim: .held(by: nil), device: "hci0").description.hasPrefix("another beacond is running on hci0: stop it first"))
        #expect(StateProblem(claim: .system(SystemCondition(.accessDenied, "Permission denied"), text: "bind(@beacond/device/hci0): Permission denied"), device: "hci0")
            == StateProblem(kind: .unusable, description: "cannot claim hci0 for this beacond: bind(@beacond/device/hci0): Permission denied"))
    }

    @Test("a device's lock held is another beacond on it; the records' lock held past the wait is busy")
    func held() {
        #expect(problem(.held(by: 42), device: "hci0") == StateProblem(kind: .busy, description:
            "another beacond (pid 42) is running on hci0 with the state directory /s: stop it first, or give this one a state directory of its own (STATE_DIRECTORY=$(mktemp -d))"))
        #expect(problem(.held(by: nil), device: "hci0").description.hasPrefix("another beacond is running on hci0"))
        #expect(problem(.held(by: 42)) == StateProblem(kind: .busy, description: "/s/lock.records is held by pid 42 for more than 2 s"))
        #expect(problem(.held(by: nil)).description == "/s/lock.records is held by another process for more than 2 s")
    }

    @Test("a file that is no lock, or a failed call, makes the directory unusable, saying what to do")
    func unusable() {
        #expect(problem(.notRegularFile) == StateProblem(kind: .unusable, description: "/s/lock.records is not a regular file, so it is no lock: remove it"))
        #expect(problem(.links(3)).description == "/s/lock.records has 3 links (a hard link to another file), so it is no lock: remove it")
        #expect(problem(.owner(7)) == StateProblem(kind: .unusable, description: "/s/lock.records belongs to user 7, not to the user this beacond runs as (1000): "
            + "remove it (a beacond run by hand in another user's state directory leaves such files); " + StateProblem.remedy))
        #expect(problem(.system(SystemCondition(.accessDenied, "Permission denied"), text: "openat(lock.records): Permission denied"))
                == StateProblem(kind: .unusable, description: "/s/lock.records cannot be locked: openat(lock.records): Permission denied"))
    }
}
