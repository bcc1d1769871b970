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
