#!/usr/bin/env python3
"""Writes the small seed corpus in fuzz/seeds/ (committed; rerun only to change it). Each seed is a valid input of
its target, so the fuzzer starts from the structures beacond really reads."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
IBEACON = bytes.fromhex('0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010001c5')


def write(target, name, data):
    d = os.path.join(HERE, 'seeds', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def legacy_report(data, rssi=0xC5, event_type=3, addr=bytes(range(1, 7))):
    return bytes([1, event_type, 0]) + addr + bytes([len(data)]) + data + bytes([rssi])


def extended_report(data, rssi=0xC5):
    return (bytes([1]) + (0x0010).to_bytes(2, 'little') + bytes([0]) + bytes(range(1, 7)) + bytes([1, 0, 0, 0x7F, rssi])
            + bytes(2) + bytes([0]) + bytes(6) + bytes([len(data)]) + data)


# adv: first byte even = legacy (0x02), odd with bit 1 clear = extended (0x0D); the rest are the LE Meta parameters.
write('adv', 'legacy-ibeacon', b'\x00' + legacy_report(IBEACON))
write('adv', 'extended-ibeacon', b'\x01' + extended_report(IBEACON))
write('adv', 'positive-power', b'\x00' + legacy_report(IBEACON[:-1] + b'\x01', rssi=0xCE))
ALTBEACON = bytes.fromhex('0201061bff1801beac') + bytes(range(20)) + bytes([0xC5, 0])
EDDY_UID = bytes.fromhex('0201060303aafe1716aafe00ee00112233445566778899aabbccddeeff0000')
EDDY_TLM = bytes.fromhex('0201060303aafe1116aafe200000001a800102030400008ca0')
write('adv', 'altbeacon', b'\x00' + legacy_report(ALTBEACON))
write('adv', 'eddystone-uid', b'\x01' + extended_report(EDDY_UID))
write('adv', 'eddystone-tlm', b'\x00' + legacy_report(EDDY_TLM))
write('adv', 'two-reports', b'\x00' + bytes([2]) + legacy_report(IBEACON)[1:] + legacy_report(b'\x02\x01\x06')[1:])
# hci: H4 bytes as a controller sends them.
write('hci', 'reset-complete', bytes.fromhex('040e0401030c00'))
write('hci', 'zero-credits', bytes.fromhex('040e0400030c00'))
write('hci', 'status-then-meta', bytes.fromhex('040f0400013920') + bytes([4, 0x3E, 3, 0x12, 0, 0]))
write('hci', 'adv-report', bytes([4, 0x3E, len(legacy_report(IBEACON)) + 1, 2]) + legacy_report(IBEACON))
write('hci', 'hardware-error', bytes.fromhex('04100142'))
write('hci', 'device-event', bytes.fromhex('04fd0601000300000000'))
# mgmt: chunks of [length][frame]; a frame is event u16, index u16, length u16, parameters.
def mgmt(code, index, params):
    f = code.to_bytes(2, 'little') + index.to_bytes(2, 'little') + len(params).to_bytes(2, 'little') + params
    return bytes([len(f)]) + f
info = bytes(6) + bytes([9]) + (2).to_bytes(2, 'little') + (0x2FF).to_bytes(4, 'little') + (0x201).to_bytes(4, 'little') + bytes(3 + 249 + 11)
write('mgmt', 'controller-info', mgmt(1, 0, (4).to_bytes(2, 'little') + b'\x00' + info[:17]))
features = (0xFFFF).to_bytes(4, 'little') + bytes([31, 31, 4, 1, 1])
write('mgmt', 'features', mgmt(1, 0, (4).to_bytes(2, 'little') + b'\x00' + info[:17]) + mgmt(1, 0, (0x3D).to_bytes(2, 'little') + b'\x00' + features))
write('mgmt', 'removed-and-settings', mgmt(0x24, 0, b'\x04') + mgmt(6, 0, (0x200).to_bytes(4, 'little')) + mgmt(5, 0, b''))
write('mgmt', 'status', mgmt(2, 0, (4).to_bytes(2, 'little') + b'\x11'))
# device: what one read of a device-watching socket returns.
for kind in range(1, 5):
    write('device', f'kind-{kind}', bytes([4, 0xFD, 6, 1, 0, kind, 0, 0, 0]))
