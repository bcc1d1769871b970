// The board's temperature for Eddystone-TLM: the kernel's first thermal zone (a Raspberry Pi's is the SoC,
// cpu-thermal), in millidegrees Celsius.
import BeaconCore
import SystemCalls

enum ThermalZone {
    static let path = "/sys/class/thermal/thermal_zone0/temp"

    /// 8.8 fixed-point degrees Celsius, or nil when the machine has no thermal zone (or it cannot be read).
    static func read(_ path: String = path) -> Int16? {
        guard let bytes = try? FileDescriptor.readFile(path, limit: 32), bytes.count <= 32 else {
            return nil
        }
        let text = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == " " }).first.map(String.init) ?? ""
        guard let millidegrees = Int(text) else { return nil }
        return Telemetry.fixedPoint(millidegrees: millidegrees)
    }
}
