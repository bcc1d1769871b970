// libFuzzer entry point: the config parser, schema and editor, and the HCI event decoder and H4 framer, on any bytes.
// Built by fuzz/run.sh together with the BluetoothHCI and BeaconCore sources as one module.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = size > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: size)) : []
    // The config path: whole-file checks, grammar, schema, and the gen-uuid --set editor.
    if let config = try? BeaconConfiguration.parse(bytes) {
        _ = config.beacon.advertisingData
    }
    _ = try? ConfigEditor.settingUUID(BeaconUUID.version4(random: [UInt8](repeating: 7, count: 16)), in: bytes)
    // The controller path: whatever a broken or hostile controller sends.
    var framer = H4Framer()
    framer.append(bytes)
    while let packet = try? framer.next() {
        if packet.type == .event, let event = try? HCIEvent(packet: packet.bytes),
           case .commandComplete(_, _, let r) = event {
            _ = try? LocalVersionInformation(returnParameters: r)
            _ = try? SupportedCommands(returnParameters: r)
            _ = try? LEFeatures(returnParameters: r)
        }
    }
    return 0
}
