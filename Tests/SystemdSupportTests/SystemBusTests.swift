// The system bus: the interfaces an introspection document names, and a call to a service that is not there, which
// must come back as a sentence (no system bus at all on a build machine, or no such service), never a crash.
import SystemdSupport
import Testing

@Suite("system bus")
struct SystemBusTests {
    @Test("the interfaces of bluetoothd's adapter as its Introspect document names them")
    func interfaces() {
        let xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node><interface name="org.freedesktop.DBus.Introspectable"><method name="Introspect"><arg name="xml" type="s" direction="out"/></method></interface>
            <interface name="org.bluez.Adapter1"><property name="Address" type="s" access="read"></property></interface>
            <interface name="org.bluez.AdvertisementMonitorManager1"><method name="RegisterMonitor"><arg name="application" type="o" direction="in"/></method></interface>
            <node name="dev_AA_BB_CC_DD_EE_FF"/></node>
            """
        #expect(SystemBus.introspectedInterfaces(xml) == ["org.freedesktop.DBus.Introspectable", "org.bluez.Adapter1", "org.bluez.AdvertisementMonitorManager1"])
        #expect(SystemBus.introspectedInterfaces("") == [] && SystemBus.introspectedInterfaces("<interface name=\"broken") == [])
    }

    @Test("a service that is not there: a sentence saying so")
    func absent() {
        switch SystemBus.interfaces(service: "org.beacond.test.absent", path: "/org/beacond/test", timeoutMicroseconds: 500_000) {
        case .success(let names): Issue.record("an absent service answered: \(names)")
        case .failure(let f): #expect(f.message.hasPrefix("cannot open the system bus") || f.message.hasPrefix("org.beacond.test.absent did not answer Introspect"), "\(f.message)")
        }
    }
}
