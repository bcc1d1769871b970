// libFuzzer targets for every decoder of outside input. fuzz/run.sh builds them as one module with the pure sources
// (BluetoothHCI, BeaconCore, the device spec, the HCI and mgmt command flows and the mgmt codec) and picks the target
// with BEACOND_FUZZ_TARGET:
//   config  the config parser, schema and the gen-uuid --set editor, the EID resolver's key file, and the JSON
//           parser `beacond status` reads state files with (what it parses prints back as the same value)
//   hci     the H4 framer, every HCI event decoder, the probe replies, and CommandFlow fed what a controller sends
//   adv     LE (extended) advertising reports into AD parsing, frame recognition, ranging, scan --expect's check, the scan table and the
//           JSON line (which must never hold NaN or Infinity)
//   mgmt    mgmt event frames, command replies (controller information, advertising features) and MgmtCommandFlow
//   device  the kernel's device events as a watching socket reads them
import Glibc

nonisolated(unsafe) private var target = "config"

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    if let t = getenv("BEACOND_FUZZ_TARGET") { target = String(cString: t) }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    switch target {
    case "config": fuzzConfig(bytes)
    case "hci": fuzzHCI(bytes)
    case "adv": fuzzAdvertisingReports(bytes)
    case "mgmt": fuzzMgmt(bytes)
    case "device": fuzzDeviceEvents(bytes)
    default: fatalError("unknown BEACOND_FUZZ_TARGET \(target)")
    }
    return 0
}

private func fuzzConfig(_ bytes: [UInt8]) {
    if let config = try? BeaconConfiguration.parse(bytes) {
        for b in config.beacons {
            _ = b.beacon.advertisingData
            _ = b.beacon.summary
            _ = config.interval(of: b)
        }
        // Every question the address plan answers, for every beacon, on any config that parses.
        let plan = config.addressPlan
        _ = plan.ownCommandsNeeded
        for k in plan.wanted.indices {
            for kernel in [false, true] {
                _ = plan.kind(k, throughKernel: kernel)
                _ = plan.sentence(k, throughKernel: kernel, kept: .notYet(file: "f"))
            }
            _ = plan.settingKind(k)
            if let u = plan.sharesWith[k] { precondition(u < plan.wanted.count && plan.wanted[u] == plan.wanted[k], "telemetry not on its UID's address") }
        }
    }
    // The resolver's key file shares the grammar.
    _ = try? EIDKeyring.parse(bytes)
    if let v = JSONValue(parsing: bytes) {
        precondition(JSONValue(parsing: Array(v.text.utf8)) == v, "JSON that does not read back as itself")
    }
    _ = try? ConfigEditor.settingUUIDs(BeaconUUID.version4(random: [UInt8](repeating: 7, count: 16)), in: bytes, replacing: bytes.count % 2 == 0)
}

private func fuzzHCI(_ bytes: [UInt8]) {
    var framer = H4Framer()
    // Fed in two pieces at a split the input chooses: the framer must give the same packets however bytes arrive.
    let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
    framer.append(Array(bytes[..<split]))
    var flow = CommandFlow()
    _ = flow.enqueue(.reset, token: 1)
    _ = flow.enqueue(.leSetExtendedAdvertisingEnable(enable: true, sets: [AdvertisingSetEnable(handle: 0)]), token: 2)
    var appended = false
    while true {
        guard let packet = try? framer.next() else {
            if appended { break }
            appended = true
            framer.append(Array(bytes[split...]))
            continue
        }
        _ = KernelDeviceEvent(h4Packet: [packet.type.rawValue] + packet.bytes)
        guard packet.type == .event, let event = try? HCIEvent(packet: packet.bytes) else { continue }
        _ = flow.received(event)
        _ = event.connectableAdvertisingInterruption
        if case .commandComplete(_, _, let r) = event {
            _ = try? LocalVersionInformation(returnParameters: r)
            _ = try? SupportedCommands(returnParameters: r)
            _ = try? LEFeatures(returnParameters: r)
            _ = AdvertisingPlan.reportedTxPower(for: .leReadAdvertisingPhysicalChannelTxPower, returnParameters: r)
        }
        if case .leMeta(let sub, let p) = event { scanReports(sub, p) }
    }
    _ = flow.timerFired()
}

private func fuzzAdvertisingReports(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    // The first byte picks the subevent (legacy 0x02 or extended 0x0D, or anything else); the rest are parameters.
    let sub: UInt8 = first & 1 == 0 ? AdvertisingReport.legacySubevent : first & 2 == 0 ? AdvertisingReport.extendedSubevent : first
    scanReports(sub, Array(bytes.dropFirst()))
    // The data alone, as frame recognition sees it.
    _ = BeaconFrame(advertisingData: Array(bytes.dropFirst()))
}

/// What `scan --expect` checks the reports against: an iBeacon, an AltBeacon with the same identity (a mismatch when
/// heard as the other), an Eddystone-UID and its telemetry, and a beacon with a chosen address.
private let expected: [ExpectedBeacon] = {
    let text = """
        [[beacon]]
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        major = 1
        minor = 1
        [[beacon]]
        format = "altbeacon"
        uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
        major = 1
        minor = 2
        address = "C6:12:34:56:78:9A"
        [[beacon]]
        format = "eddystone-uid"
        namespace = "00112233445566778899"
        instance = "A1B2C3D4E5F6"
        [[beacon]]
        format = "eddystone-tlm"
        [controller]
        backend = "hci"
        """
    return ExpectedBeacon.all(in: try! BeaconConfiguration.parse(Array(text.utf8)), path: "/fuzz.conf")
}()

private func scanReports(_ sub: UInt8, _ p: [UInt8]) {
    guard let reports = try? AdvertisingReport.parse(subevent: sub, parameters: p) else { return }
    var check = AirCheck(expected)
    // A small table per input, so an input with more senders than it holds exercises the eviction.
    var table = ScanTable<ScanEntry>(capacity: 4)
    var clock: UInt64 = 0
    for r in reports {
        let frame = BeaconFrame(advertisingData: r.data)
        clock &+= 100_000
        table.record(ScanEntry.key(for: frame, r), make: { ScanEntry(frame: frame, report: r) }) { $0.heard(r, at: clock) }
        // Any key index (also out of range) and any period against any time: the replay window's arithmetic too.
        check.record(frame, r, at: clock, eidMatch: r.data.first.map {
            AirCheck.EIDMatch(key: Int($0) - 128, periodStart: UInt32(truncatingIfNeeded: r.data.count &* 2_654_435_761), heardAt: UInt32(truncatingIfNeeded: clock))
        })
        if case .iBeacon(let b) = frame {
            let d = Ranging.distance(rssi: Double(r.rssi), measuredPower: b.measuredPower)
            precondition(d.map { $0.isFinite && $0 >= 0 } ?? true, "distance \(String(describing: d))")
            _ = Ranging.proximity(distance: d)
        }
    }
    precondition(table.count <= table.capacity)
    // Every verdict and every output of the check is total, whatever the reports.
    for e in check.results {
        precondition(e.mismatches.count <= AirCheck.mismatchLimit)
        _ = AirCheck.jsonLine(e)
        _ = AirCheck.textLine(e)
    }
    precondition(check.unexpected.count <= AirCheck.unexpectedLimit)
    _ = check.prometheusText(device: "hci1", startedAt: clock, duration: 1)
    for e in table.entries {
        let line = e.jsonLine(final: true)
        precondition(!line.contains("nan") && !line.contains("inf"), "JSON line with a non-number: \(line)")
    }
}

private func fuzzMgmt(_ bytes: [UInt8]) {
    var flow = MgmtCommandFlow()
    _ = flow.enqueue(.readControllerInformation, index: 0, token: 1)
    _ = flow.enqueue(.readAdvertisingFeatures, index: 0, token: 2)
    // Frames as the socket delivers them: the first byte of each chunk says how long the chunk is.
    var i = 0
    while i < bytes.count {
        let n = min(Int(bytes[i]), bytes.count - i - 1)
        let frame = Array(bytes[(i + 1)..<(i + 1 + n)])
        i += 1 + n
        guard let event = try? MgmtEvent(frame: frame) else { continue }
        for a in flow.received(event) {
            if case .complete(_, .success(let params)) = a {
                _ = try? MgmtControllerInformation(returnParameters: params)
                if let f = try? MgmtAdvertisingFeatures(returnParameters: params) {
                    // The kernel's instance list, as whatever it says, into the instance choice.
                    let wanted = (0..<Int((params.first ?? 1) % 8)).map { _ in fuzzRequest }
                    _ = MgmtInstancePlan.make(wanted, current: nil, maxInstances: f.maxInstances, ours: Set(f.instances.prefix(2)),
                                              foreign: Set(f.instances.dropFirst(2)), commands: .extended, canSetTxPower: true)
                }
            }
        }
        if case .commandComplete(let op, let status, _) = event.kind {
            let step = MgmtStep(.readVersion)
            _ = MgmtAdvertisingPlan.fallbackReason(after: MgmtStepFailure(index: 0, step: step, failure: MgmtFailure(status: status)))
            _ = op.description
        }
    }
    _ = flow.timerFired()
    _ = flow.closed()
}

private func fuzzDeviceEvents(_ bytes: [UInt8]) {
    _ = KernelDeviceEvent(h4Packet: bytes)
    _ = KernelDeviceEvent(eventPacket: bytes)
}

/// A beacon request for the targets that need one (its bytes do not matter to them).
let fuzzRequest = AdvertisingRequest(data: try! AdvertisingData(raw: [0x02, 0x01, 0x06]), type: .nonConnectableUndirected,
                                     interval: AdvertisingInterval(milliseconds: 100)!, txPower: nil)
