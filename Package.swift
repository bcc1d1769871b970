// swift-tools-version:6.0
// beacond: a Bluetooth LE beacon daemon for Linux (iBeacon, AltBeacon, Eddystone). No outside packages: only the toolchain's own modules.
import PackageDescription

let package = Package(
    name: "beacond",
    products: [
        .executable(name: "beacond", targets: ["beacond"]),
    ],
    targets: [
        // System libraries (pkg-config names as Debian ships them). CBluetooth is headers only: nothing of
        // libbluetooth.so is called, so the binary does not need libbluetooth3.
        .systemLibrary(name: "CBluetooth", providers: [.apt(["libbluetooth-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // AES-128 for Eddystone-EID, from libgcrypt (libgcrypt20, which libsystemd0 already pulls in on Debian 12).
        .systemLibrary(name: "CGcrypt", pkgConfig: "libgcrypt", providers: [.apt(["libgcrypt20-dev"])]),
        .target(name: "AESCipher", dependencies: ["CGcrypt"]),

        // Headers only: what Swift's Glibc module leaves out (adjtimex, getrandom).
        .systemLibrary(name: "CLinux"),
        // The one module that makes system calls: errno, owned fds, read/write loops, atomic file replace.
        .target(name: "SystemCalls", dependencies: ["CLinux", "SystemConditions"]),
        // Pure: what a system call's failure means, in words the pure modules decide from (SystemError.condition).
        .target(name: "SystemConditions"),

        // Pure: the HCI codec and H4 framing, and the device spec that names a controller.
        .target(name: "BluetoothHCI"),
        // Bytes to controllers: kernel sockets and H4 streams.
        .target(name: "HCITransport", dependencies: ["CBluetooth", "BluetoothHCI", "SystemCalls", "SystemConditions"]),
        // libm's pow, for the ranging model (headers only: the C library's math, no system calls).
        .systemLibrary(name: "CMath"),
        // Pure: config grammar, schema and diagnostics; the beacon frames.
        .target(name: "BeaconCore", dependencies: ["BluetoothHCI", "CMath", "SystemConditions"]),
        .target(name: "SystemdSupport", dependencies: ["CSystemd", "SystemCalls"]),
        // Pure: the HCI command flows and advertising plans.
        .target(name: "HCIHost", dependencies: ["BluetoothHCI"]),
        // Pure: the mgmt codec, command flow and instance plans.
        .target(name: "Mgmt", dependencies: ["BluetoothHCI", "HCIHost"]),
        // The shells that run the command flows on an fd and a timer (HCI and mgmt).
        .target(name: "Connections", dependencies: ["BluetoothHCI", "HCIHost", "Mgmt", "HCITransport", "SystemCalls", "SystemConditions", "SystemdSupport"]),
        // Pure: the daemon's lifecycle as a state machine, and the ownership record.
        .target(name: "DaemonCore", dependencies: ["BeaconCore", "BluetoothHCI", "HCIHost", "Mgmt", "SystemConditions"]),

        // The program: CLI, the lifecycle's executor, the backends, scan, logging. main.swift only calls into
        // BeacondApp so tests can reach it.
        .target(name: "BeacondApp", dependencies: ["AESCipher", "BeaconCore", "BluetoothHCI", "Connections", "DaemonCore", "HCIHost", "Mgmt",
                                                   "HCITransport", "SystemCalls", "SystemConditions", "SystemdSupport"]),
        .executableTarget(name: "beacond", dependencies: ["BeacondApp"]),

        // A helper the test targets share (no test framework in it).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "BluetoothHCITests", dependencies: ["BluetoothHCI"]),
        .testTarget(name: "BeaconCoreTests", dependencies: ["BeaconCore", "BluetoothHCI", "TestSupport", "AESCipher", "SystemConditions"]),
        .testTarget(name: "HCIHostTests", dependencies: ["HCIHost"]),
        .testTarget(name: "MgmtTests", dependencies: ["Mgmt"]),
        .testTarget(name: "DaemonCoreTests", dependencies: ["DaemonCore", "BeaconCore", "BluetoothHCI", "HCIHost", "Mgmt", "AESCipher", "SystemConditions", "TestSupport"]),
        .testTarget(name: "SystemCallsTests", dependencies: ["SystemCalls", "SystemConditions"]),
        .testTarget(name: "AESCipherTests", dependencies: ["AESCipher"]),
        .testTarget(name: "SystemdSupportTests", dependencies: ["SystemdSupport"]),
        .testTarget(name: "BeacondAppTests", dependencies: ["BeacondApp", "DaemonCore", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// Without _StringProcessing's implicit import: its String methods (contains, replacing and split with a String
// pattern) link Swift's whole regex engine (_StringProcessing and _RegexParser, about 0.9 MB of the stripped binary).
// BluetoothHCI's `includes`, `replacingEvery` and `pieces(separatedBy:)` do what beacond needs with the standard
// library; a use of the others fails to compile.
for target in package.targets where target.type == .regular || target.type == .executable {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import"])]
}
