// `beacond status --check`: the adapters before anything goes on the air. Gathers what the kernel and the controller
// say (sysfs and rfkill, bluetoothd's process, the management interface, the controller's own LE answers), then
// DaemonCore's AdapterPlan says what `run` would do with the config there. Nothing is changed: no device is brought
// up, powered or reset (but an H4 controller, which beacond owns, is reset as `run` would).
import BeaconCore
import BluetoothHCI
import Connections
import DaemonCore
import HCIHost
import HCITransport
import Mgmt
import SystemCalls
import SystemdSupport

enum AdapterCheck {
    static func run(_ o: StatusOptions) -> ExitCode {
        let path = o.configPath ?? defaultConfigPath
        var config: BeaconConfiguration?
        var configErrors: [String] = []
        var keysNotRead: String?
        do {
            var c = try ConfigLoader.parse(path).config
            do { try ConfigLoader.loadKeys(&c, configPath: path) } catch {
                // A normal user cannot read root's keys: that says nothing about the adapter or what run would do.
                let lines = error.diagnostics.map { $0.formatted(path: error.path) }
                if processEffectiveUserID() != 0 && error.diagnostics.allSatisfy({ $0.message.includes("permission denied") || $0.message.includes("cannot be opened") }) {
                    keysNotRead = "the Eddystone-EID keys cannot be read as this user (root's, mode 0600): run the check as root to check them too"
                } else {
                    configErrors = lines
                }
            }
            config = c
        } catch {
            configErrors = error.diagnostics.map { $0.formatted(path: error.path) }
        }
        let device: DeviceSpec
        if let d = o.device, let spec = try? DeviceSpec(parsing: d) { device = spec } else { device = config?.controller.device ?? .kernel(index: 0) }

        var facts = AdapterFacts()
        facts.keysNotRead = keysNotRead
        facts.controllers = controllers()
        if case .kernel = device { facts.kernelHasBluetooth = Transport.kernelHasBluetooth() }
        facts.bluetoothdRunning = bluetoothdRunning()
        if case .kernel(let index) = device, facts.bluetoothdRunning != false {
            // Which scan Home Assistant gets from bluetoothd here: passive only with Experimental = true.
            switch SystemBus.interfaces(service: "org.bluez", path: "/org/bluez/hci\(index)") {
            case .success(let names): facts.passiveScanning = names.contains("org.bluez.AdvertisementMonitorManager1")
            case .failure(let f): facts.passiveScanningUnknown = f.message
            }
        }
        if let d = DaemonView.running(device: device.description, configPath: nil).first { facts.runningOnDevice = d.name }
        ask(device, &facts)

        var plan: AdapterPlan?
        if let config {
            var p = AdapterPlan(config: config, device: device, facts: facts, addresses: [])
            // The addresses for the backend run would take here; both cases while it is not known (mgmt told a normal
            // user nothing about the sets).
            let known = p.backend == .hci || p.family != nil ? p.backend : nil
            p.addresses = Tools.addressViews(config, backend: known).map(\.text)
            plan = p
        }
        var problems = configErrors.isEmpty ? [] : ["\(path) has errors (fix them; 'beacond check-config' lists them): " + configErrors.joined(separator: "; ")]
        problems += plan?.problems ?? []
        let ok = problems.isEmpty
        if o.json {
            Output.out(json(facts, plan, device: device, path: path, problems: problems, ok: ok))
        } else {
            Output.out(text(facts, plan, device: device, path: path, problems: problems))
        }
        return ok ? .success : configErrors.isEmpty ? .failure : .config
    }

    // MARK: facts

    /// hciN in /sys/class/bluetooth (not the hciN:M connection entries), up or down, and rfkill's blocks.
    static func controllers() -> [AdapterFacts.Controller] {
        let names = ((try? directoryEntries("/sys/class/bluetooth")) ?? []).filter { n in
            n.hasPrefix("hci") && !n.isEmpty && n.dropFirst(3).allSatisfy(\.isNumber) && n.count > 3
        }.sorted { (Int($0.dropFirst(3)) ?? 0) < (Int($1.dropFirst(3)) ?? 0) }
        return names.map { name in
            var c = AdapterFacts.Controller(name: name)
            if let i = UInt16(name.dropFirst(3)) { c.up = Transport.kernelDeviceIsUp(index: i) }
            let dir = "/sys/class/bluetooth/\(name)"
            if let rf = ((try? directoryEntries(dir)) ?? []).first(where: { $0.hasPrefix("rfkill") }) {
                c.softBlocked = readSmall("\(dir)/\(rf)/soft").map { $0 == "1" }
                c.hardBlocked = readSmall("\(dir)/\(rf)/hard").map { $0 == "1" }
            }
            return c
        }
    }

    static func readSmall(_ path: String) -> String? {
        guard let b = try? FileDescriptor.readFile(path, limit: 4096) else { return nil }
        return String(decoding: b, as: UTF8.self).trimmingTrailingWhitespace
    }

    /// A process named bluetoothd (its comm), seen through /proc (nil when /proc cannot be read).
    static func bluetoothdRunning() -> Bool? {
        guard let pids = try? directoryEntries("/proc") else { return nil }
        return pids.contains { $0.allSatisfy(\.isNumber) && readSmall("/proc/\($0)/comm") == "bluetoothd" }
    }

    /// The management interface's and the controller's own answers, on an event loop bounded to a few seconds.
    static func ask(_ device: DeviceSpec, _ facts: inout AdapterFacts) {
        guard let loop = try? EventLoop() else {
            facts.mgmtError = "cannot set up an event loop"
            return
        }
        var result = facts
        var pending = 0
        func done() {
            pending -= 1
            if pending == 0 { loop.exit(code: 0) }
        }
        var keep: [AnyObject] = []
        if case .kernel(let index) = device {
            if let c = try? MgmtConnection(index: index, loop: loop) {
                keep.append(c)
                pending += 1
                c.send(.readControllerInformation) { r in
                    switch r {
                    case .failure(let f):
                        result.mgmtError = "Read Controller Information: \(f.status.map { "\($0)" } ?? "no answer")"
                        done()
                    case .success(let p):
                        guard let info = try? MgmtControllerInformation(returnParameters: p) else {
                            result.mgmtError = "Read Controller Information: a malformed reply"
                            return done()
                        }
                        result.mgmt = AdapterFacts.Mgmt(powered: info.isPowered, lowEnergy: info.supportsLE,
                                                        bluetoothVersion: LocalVersionInformation.coreVersionName(hciVersion: info.bluetoothVersion),
                                                        manufacturer: info.manufacturer)
                        c.send(.readAdvertisingFeatures) { r in
                            switch r {
                            case .failure(let f):
                                result.mgmtFeaturesError = MgmtDecisions.featuresRefused(f.status)
                            case .success(let p):
                                if let a = try? MgmtAdvertisingFeatures(returnParameters: p) {
                                    result.mgmt?.instances = Int(a.maxInstances)
                                    result.mgmt?.maxDataLength = Int(a.maxAdvertisingDataLength)
                                    result.mgmt?.advertisingSets = a.supportedFlags.contains(.hardwareOffload)
                                }
                            }
                            done()
                        }
                    }
                }
            } else {
                result.mgmtError = "the management socket cannot be opened here"
            }
        }
        // The controller's own answers: a kernel device only when it is up (the check brings nothing up).
        let up: Bool = if case .kernel(let i) = device { Transport.kernelDeviceIsUp(index: i) == true } else { true }
        // A kernel device is shared (the probe only reads); an H4 controller is the running beacond's alone.
        let owner: String? = if case .kernel = device { nil } else { facts.runningOnDevice }
        if !up {
            result.hciNotAsked = "\(device) is down (or absent): its LE answers are read when it is up"
        } else if let r = owner {
            // An H4 controller is beacond's alone: opening it would reset it under the running daemon.
            result.hciNotAsked = "\(r) owns the controller on \(device); it is not opened beside it"
        } else {
            do {
                let t = try Transport.open(device, mayBringUp: false)
                let c = try ControllerConnection(transport: t, loop: loop, timeout: .seconds(2))
                keep.append(c)
                pending += 1
                c.probe { r in
                    switch r {
                    case .failure(let f):
                        let why = HCIDecisions.probeProblem(f)
                        if processEffectiveUserID() == 0 {
                            result.hciError = why
                        } else {
                            result.hciNotAsked = why + " (LE commands on the raw HCI channel need CAP_NET_RAW: run the check as root)"
                        }
                        done()
                    case .success(let info):
                        result.hci = AdapterFacts.HCI(bluetoothVersion: info.version.coreVersionName, manufacturer: info.version.manufacturer,
                                                      extendedAdvertising: info.features.extendedAdvertising)
                        // One at a time: a controller that lacks one (LE Read Transmit Power is Core 5.0) still answers the other.
                        var extra: [HCICommand] = []
                        if info.features.extendedAdvertising { extra.append(.leReadNumberOfSupportedAdvertisingSets) }
                        if info.commands.hasExtendedAdvertising { extra.append(.leReadTransmitPower) }
                        func next() {
                            guard !extra.isEmpty else { return done() }
                            let command = extra.removeFirst()
                            c.run([Step(command)]) { r in
                                if case .success(let replies) = r, let p = replies.first {
                                    if command == .leReadNumberOfSupportedAdvertisingSets, p.count >= 2 { result.hci?.sets = Int(p[1]) }
                                    if command == .leReadTransmitPower, p.count >= 3 {
                                        let lo = Int(Int8(bitPattern: p[1])), hi = Int(Int8(bitPattern: p[2]))
                                        if lo <= hi { result.hci?.txPowerRange = lo...hi }
                                    }
                                }
                                next()
                            }
                        }
                        next()
                    }
                }
            } catch {
                result.hciError = "\(error)"
            }
        }
        if pending > 0 {
            _ = try? loop.addTimer(after: .seconds(6)) { loop.exit(code: 0) }
            _ = try? loop.run()
        }
        for case let c as ControllerConnection in keep { c.close() }
        facts = result
    }

    // MARK: output

    static func text(_ f: AdapterFacts, _ plan: AdapterPlan?, device: DeviceSpec, path: String, problems: [String]) -> String {
        var t = "Controllers: "
        t += f.controllers.isEmpty ? "none\n" : f.controllers.map { c in
            var s = c.name + " (" + (c.up.map { $0 ? "up" : "down" } ?? "?")
            if c.softBlocked == true { s += ", rfkill soft-blocked" }
            if c.hardBlocked == true { s += ", rfkill hard-blocked" }
            return s + ")"
        }.joined(separator: ", ") + "\n"
        t += "bluetoothd: " + (f.bluetoothdRunning.map { $0 ? "running" : "not running" } ?? "unknown")
        if case .kernel = device, f.bluetoothdRunning != false {
            t += "; passive scanning: " + (f.passiveScanning.map { $0 ? "offered (Experimental = true)" : "not offered (scanners scan actively)" }
                                           ?? "unknown (\(f.passiveScanningUnknown ?? "not asked"))")
        }
        t += "\n"
        if case .kernel = device {
            if let m = f.mgmt {
                var s = "Management interface, \(device): Bluetooth \(m.bluetoothVersion), manufacturer \(m.manufacturer), \(m.powered ? "powered" : "powered off"), \(m.lowEnergy ? "LE" : "no LE")"
                if let i = m.instances { s += "; \(i) advertising instances, \(m.maxDataLength ?? 0)-byte data, \(m.advertisingSets == true ? "advertising sets of its own" : "no advertising sets of its own (legacy)")" }
                if let e = f.mgmtFeaturesError { s += "; \(e)" }
                t += s + "\n"
            } else {
                t += "Management interface, \(device): \(f.mgmtError ?? "not asked")\n"
            }
        }
        if let h = f.hci {
            var s = "Controller, \(device): Bluetooth \(h.bluetoothVersion), manufacturer \(h.manufacturer), extended advertising \(h.extendedAdvertising ? "yes" : "no")"
            if let n = h.sets { s += ", \(n) advertising sets" }
            if let r = h.txPowerRange { s += ", TX power \(r.lowerBound) to \(r.upperBound) dBm" }
            t += s + "\n"
        } else {
            t += "Controller, \(device): \(f.hciError ?? f.hciNotAsked ?? "not asked")\n"
        }
        if let p = plan, let b = p.backend {
            t += "beacond run with \(path) would use \(p.backendWhy.isEmpty ? b.rawValue : p.backendWhy)"
            if let fam = p.family { t += ", \(fam) advertising" }
            if let s = p.sharing { t += ", \(s)" }
            t += "\n"
            for (k, a) in p.addresses.enumerated() { t += "  beacon \(k + 1): address \(b == .mgmt ? "the kernel's own (through mgmt)" : a)\n" }
            for n in p.notes { t += "  note: \(n)\n" }
        }
        t += problems.isEmpty ? "OK: beacond run would put every beacon on the air.\n" : "Problems:\n" + problems.map { "  - \($0)\n" }.joined()
        return t
    }

    static func json(_ f: AdapterFacts, _ plan: AdapterPlan?, device: DeviceSpec, path: String, problems: [String], ok: Bool) -> String {
        let cs = f.controllers.map { c in
            JSONValue([(.device, .string(c.name)), (.up, JSONValue(c.up)),
                       (.rfkill, JSONValue([(.soft, JSONValue(c.softBlocked)), (.hard, JSONValue(c.hardBlocked))]))])
        }
        let m = f.mgmt.map { m in
            JSONValue([(.powered, .bool(m.powered)), (.lowEnergy, .bool(m.lowEnergy)), (.bluetoothVersion, .string(m.bluetoothVersion)),
                       (.manufacturer, JSONValue(m.manufacturer)), (.instances, JSONValue(m.instances)), (.maxDataLength, JSONValue(m.maxDataLength)),
                       (.advertisingSets, JSONValue(m.advertisingSets))])
        } ?? .null
        let h = f.hci.map { h in
            JSONValue([(.bluetoothVersion, .string(h.bluetoothVersion)), (.manufacturer, JSONValue(h.manufacturer)),
                       (.extendedAdvertising, .bool(h.extendedAdvertising)), (.sets, JSONValue(h.sets)),
                       (.txPowerRange, h.txPowerRange.map { .array([JSONValue($0.lowerBound), JSONValue($0.upperBound)]) } ?? .null)])
        } ?? .null
        let p = plan.map { p in
            JSONValue([(.config, .string(path)), (.backend, JSONValue(p.backend?.rawValue)), (.why, .string(p.backendWhy)), (.family, JSONValue(p.family?.rawValue)),
                       (.sharing, JSONValue(p.sharing)), (.addresses, JSONValue(strings: p.addresses.map { p.backend == .mgmt && p.family != nil ? "kernel" : $0 })),
                       (.notes, JSONValue(strings: p.notes))])
        } ?? .null
        return JSONValue([
            (.ok, .bool(ok)), (.problems, JSONValue(strings: problems)), (.device, .string(device.description)), (.controllers, .array(cs)),
            (.bluetoothd, JSONValue([(.running, JSONValue(f.bluetoothdRunning)), (.passiveScanning, JSONValue(f.passiveScanning)),
                                     (.passiveScanningUnknown, JSONValue(f.passiveScanningUnknown))])), (.mgmt, m),
            (.mgmtError, JSONValue(f.mgmt == nil ? f.mgmtError : f.mgmtFeaturesError)), (.hci, h),
            (.hciError, JSONValue(f.hci == nil ? f.hciError ?? f.hciNotAsked : nil)), (.run, p),
        ]).text + "\n"
    }
}

extension String {
    fileprivate var trimmingTrailingWhitespace: String {
        var s = Substring(self)
        while let l = s.last, l == "\n" || l == " " || l == "\t" || l == "\r" { s = s.dropLast() }
        return String(s)
    }
}
