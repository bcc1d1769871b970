// swift-tools-version:6.0
// beacond: an iBeacon advertising daemon for Linux. No outside packages: only the toolchain's own modules.
import PackageDescription

let package = Package(
    name: "beacond",
    products: [
        .executable(name: "beacond", targets: ["beacond"]),
    ],
    targets: [
        // System libraries (pkg-config names as Debian ships them).
        .systemLibrary(name: "CBluetooth", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),

        // Pure layers: values and codecs, no I/O.
        .target(name: "BluetoothHCI"),
        .target(name: "BeaconCore", dependencies: ["BluetoothHCI"]),
        .target(name: "HCIHost", dependencies: ["BluetoothHCI", "BeaconCore"]),
        .target(name: "Mgmt", dependencies: ["BluetoothHCI"]),

        // I/O layers.
        .target(name: "HCITransport", dependencies: ["CBluetooth", "BeaconCore", "BluetoothHCI"]),
        .target(name: "SystemdSupport", dependencies: ["CSystemd"]),

        // The program: CLI, daemon policy, logging. main.swift only calls into BeacondApp so tests can reach it.
        .target(name: "BeacondApp", dependencies: ["BeaconCore", "BluetoothHCI", "HCIHost", "Mgmt", "HCITransport", "SystemdSupport"]),
        .executableTarget(name: "beacond", dependencies: ["BeacondApp"]),

        .testTarget(name: "BluetoothHCITests", dependencies: ["BluetoothHCI"]),
        .testTarget(name: "BeaconCoreTests", dependencies: ["BeaconCore"]),
        .testTarget(name: "HCIHostTests", dependencies: ["HCIHost"]),
        .testTarget(name: "MgmtTests", dependencies: ["Mgmt"]),
        .testTarget(name: "BeacondAppTests", dependencies: ["BeacondApp"]),
    ],
    swiftLanguageModes: [.v6]
)
