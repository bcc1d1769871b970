// The system bus through libsystemd's sd-bus: one call, Introspect, to learn which interfaces a service offers on an
// object (bluetoothd's adapter: whether it offers AdvertisementMonitorManager1, which it does only with
// `Experimental = true`, and which Home Assistant's passive scanning needs). The non-variadic sd-bus calls only, so
// Swift calls them directly.
import CSystemd
import SystemCalls

public enum SystemBus {
    /// The interfaces `service` offers on `path` (org.freedesktop.DBus.Introspectable.Introspect), or why they could
    /// not be had (no system bus, no such service or object, a refusal), in a few words.
    public static func interfaces(service: String, path: String, timeoutMicroseconds: UInt64 = 2_000_000) -> Result<[String], Failure> {
        var bus: OpaquePointer?
        var r = sd_bus_open_system(&bus)
        guard r >= 0, let bus else { return .failure(Failure(message: "cannot open the system bus (\(errorText(r)))")) }
        defer { sd_bus_flush_close_unref(bus) }
        var call: OpaquePointer?
        r = sd_bus_message_new_method_call(bus, &call, service, path, "org.freedesktop.DBus.Introspectable", "Introspect")
        guard r >= 0, let call else { return .failure(Failure(message: "cannot make the Introspect call (\(errorText(r)))")) }
        defer { sd_bus_message_unref(call) }
        // Asking must not start the service (bluetoothd, where it is enabled but stopped).
        _ = sd_bus_message_set_auto_start(call, 0)
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        r = sd_bus_call(bus, call, timeoutMicroseconds, &error, &reply)
        guard r >= 0, let reply else {
            let name = error.name.map { String(cString: $0) } ?? errorText(r)
            return .failure(Failure(message: "\(service) did not answer Introspect on \(path) (\(name))"))
        }
        defer { sd_bus_message_unref(reply) }
        var xml: UnsafePointer<CChar>?
        r = sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "s")), &xml)
        guard r > 0, let xml else { return .failure(Failure(message: "\(service)'s Introspect reply on \(path) holds no XML")) }
        return .success(introspectedInterfaces(String(cString: xml)))
    }

    public struct Failure: Error, Sendable, Hashable { public var message: String }

    /// The names of an introspection document's `<interface name="…">` elements, in order.
    public static func introspectedInterfaces(_ xml: String) -> [String] {
        let marker = Array("<interface name=\"".utf8)
        let bytes = Array(xml.utf8)
        var out: [String] = []
        var i = 0
        while i + marker.count <= bytes.count {
            guard bytes[i..<i + marker.count].elementsEqual(marker) else { i += 1; continue }
            let start = i + marker.count
            guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")) else { break }
            out.append(String(decoding: bytes[start..<end], as: UTF8.self))
            i = end + 1
        }
        return out
    }

    private static func errorText(_ r: Int32) -> String { Errno(negated: r).description }
}
