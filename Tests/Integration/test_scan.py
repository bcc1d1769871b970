"""`beacond scan` on a virtual radio, with virtual beacons (and other advertisers) around it on the same link."""
from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import pytest

from conftest import APPLE_UUID, beacond_path, config_text, free_port, ibeacon_bytes, run_cli, kept_address
from harness.lab import Lab, wait_for
import output_schema

OTHER_UUID = '74278BDA-B644-4520-8F0C-720EAF059935'
BEACONS = [  # (address, uuid, major, minor, measured power)
    ('D0:00:00:00:00:01', APPLE_UUID, 1, 1, -59),
    ('D0:00:00:00:00:02', APPLE_UUID, 1, 2, -65),
    ('D0:00:00:00:00:03', OTHER_UUID, 7, 65535, -70),
]
NOT_BEACONS = [
    ('D0:00:00:00:00:04', bytes.fromhex('020106') + bytes.fromhex('09094b6974636865')),  # flags + a name
    # Apple's prefix with a body 2 bytes short: a malformed iBeacon.
    ('D0:00:00:00:00:05', bytes.fromhex('020106') + bytes.fromhex('18ff4c000215') + bytes(19)),
    # The iBeacon layout under another company id.
    ('D0:00:00:00:00:06', bytes.fromhex('020106') + bytes.fromhex('1aff590002 15'.replace(' ', '')) + bytes(21)),
    # A structure whose length runs past the end.
    ('D0:00:00:00:00:07', bytes.fromhex('0201061fff4c000215e2c5')),
]


def advertisers():
    return [(a, ibeacon_bytes(uuid, major, minor, power)) for a, uuid, major, minor, power in BEACONS] + NOT_BEACONS


def scan(device, *args, duration='2'):
    r = run_cli('scan', '--device', device, '--duration', duration, '--json', *args)
    assert r.returncode == 0, r.stderr
    lines = output_schema.lines('scan', r.stdout)
    return [l for l in lines if l.get('final') and l['kind'] != 'summary'], lines


@pytest.fixture(params=[True, False], ids=['extended', 'legacy'])
def room(request):
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, extended=request.param, advertisers=advertisers()) as lab:
        yield lab, f'tcp:127.0.0.1:{port}', request.param


def test_scan_reports_exactly_the_beacons_with_their_fields(room):
    lab, device, extended = room
    final, _ = scan(device)
    got = sorted((b['uuid'], b['major'], b['minor'], b['measured_power'], b['address']) for b in final)
    assert got == sorted((u, ma, mi, p, a) for a, u, ma, mi, p in BEACONS)
    for b in final:
        assert b['kind'] == 'ibeacon' and b['packets'] >= 2 and b['address_type'] == 'public'
        assert b['rssi'] == -50 and b['rssi_smoothed'] == -50.0  # Bumble's emulator reports every packet at -50 dBm
        assert b['proximity'] in ('immediate', 'near', 'far')
    # The distance model, checked by hand: ratio = -50/-59 < 1 → ratio^10.
    first = next(b for b in final if b['minor'] == 1 and b['major'] == 1)
    assert first['distance_m'] == pytest.approx((50 / 59) ** 10, abs=0.01) and first['proximity'] == 'immediate'  # 0.19 m
    far = next(b for b in final if b['minor'] == 65535)
    assert far['distance_m'] == pytest.approx((50 / 70) ** 10, abs=0.01)
    # The scanner used the family the controller offers, and stopped scanning on exit.
    ops = lab.opcodes()
    enable = 0x2042 if extended else 0x200C
    assert ops.count(enable) >= 2 and [p for t, op, p in lab.state()['commands'] if op == enable][-1][:1] == b'\x00'


@pytest.mark.parametrize('args,expected', [
    (['--uuid', OTHER_UUID], [(OTHER_UUID, 7, 65535)]),
    (['--uuid', APPLE_UUID.lower(), '--minor', '2'], [(APPLE_UUID, 1, 2)]),
    (['--major', '1'], [(APPLE_UUID, 1, 1), (APPLE_UUID, 1, 2)]),
    (['--major', '9'], []),
])
def test_filters(args, expected):
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, advertisers=advertisers()) as lab:
        final, _ = scan(f'tcp:127.0.0.1:{port}', *args)
        assert sorted((b['uuid'], b['major'], b['minor']) for b in final) == sorted(expected)


def test_all_shows_other_advertisements_and_bad_frames_as_such():
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, advertisers=advertisers()) as lab:
        final, _ = scan(f'tcp:127.0.0.1:{port}', '--all')
        by_addr = {b['address']: b for b in final}
        assert {a for a, *_ in BEACONS} <= set(by_addr)
        assert by_addr['D0:00:00:00:00:04']['kind'] == 'other'
        assert by_addr['D0:00:00:00:00:05']['kind'] == 'malformed_ibeacon'
        assert 'not 21' in by_addr['D0:00:00:00:00:05']['reason']
        assert by_addr['D0:00:00:00:00:06']['kind'] == 'malformed_ibeacon'
        assert "not Apple's 0x004C" in by_addr['D0:00:00:00:00:06']['reason']
        assert by_addr['D0:00:00:00:00:07']['kind'] == 'malformed_ibeacon'
        assert 'truncated' in by_addr['D0:00:00:00:00:07']['reason']


def test_a_running_beacond_is_seen_by_beacond_scan_on_another_radio(tmp_path, processes, state_directory):
    port1, port2 = free_port(), free_port()
    conf = tmp_path / 'b.conf'
    conf.write_text(config_text(major=4242, minor=77, measured_power=-61))
    with Lab(f'tcp-server:127.0.0.1:{port1}', scan=False, second_transport=f'tcp-server:127.0.0.1:{port2}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port1}')
        wait_for(lab.advertising, 10, what='beacond run advertising')
        final, _ = scan(f'tcp:127.0.0.1:{port2}')
        # From the static address beacond keeps, not the radio's public F0:F1:F2:F3:F4:F5.
        static = kept_address(state_directory)
        assert [(x['uuid'], x['major'], x['minor'], x['measured_power'], x['address']) for x in final] == \
            [(APPLE_UUID, 4242, 77, -61, static)]
        b.stop()


def test_json_streams_updates_each_second_then_final_lines():
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, advertisers=advertisers()[:1]) as lab:
        final, lines = scan(f'tcp:127.0.0.1:{port}', duration='2.5')
        assert len(final) == 1
        assert 2 <= len([l for l in lines if not l.get('final')]) <= 3


def test_scan_usage_errors():
    r = run_cli('scan', '--uuid', 'nope')
    assert r.returncode == 64 and "invalid value for '--uuid'" in r.stderr
    r = run_cli('scan', '--duration', '-1')
    assert r.returncode == 64


def test_scan_without_a_controller_says_so():
    r = run_cli('scan', '--device', f'tcp:127.0.0.1:{free_port()}', '--duration', '1')
    assert r.returncode == 69 and r.stderr.startswith('Error: Cannot open tcp:127.0.0.1:')


def test_ctrl_c_stops_scanning_cleanly(processes):
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, advertisers=advertisers()[:1]) as lab:
        b = processes('scan', '--device', f'tcp:127.0.0.1:{port}', '--json')
        wait_for(lambda: 0x2042 in lab.opcodes() and any(p[:1] == b'\x01' for t, op, p in lab.state()['commands'] if op == 0x2042),
                 10, what='scanning enabled')
        b.signal(signal.SIGINT)
        assert b.wait(10) == 0
        last = [p for t, op, p in lab.state()['commands'] if op == 0x2042][-1]
        assert last[:1] == b'\x00'  # scanning disabled before exit


def test_live_table_on_a_terminal():
    """On a terminal (a pty here) scan draws a table that redraws in place; no JSON."""
    from conftest import beacond_path, on_a_terminal
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, advertisers=advertisers()[:2]):
        text = on_a_terminal([str(beacond_path()), 'scan', '--device', f'tcp:127.0.0.1:{port}', '--duration', '2.2'])
        assert text.count('\x1b[H\x1b[2J') >= 2  # redrawn in place at least twice
        assert 'UUID' in text and 'PROXIMITY' in text and APPLE_UUID in text
        assert '{' not in text  # no JSON on a terminal


def test_beacons_with_measured_power_outside_the_model_do_not_crash_scan_and_get_no_distance():
    # A positive measured power is allowed by the config (measured_power = 1), so one beacond near another would crash
    # every `beacond scan` around it: the distance model left its domain and an integer conversion trapped.
    odd = [('D0:00:00:00:00:11', 1), ('D0:00:00:00:00:12', 0), ('D0:00:00:00:00:13', 127), ('D0:00:00:00:00:14', -128)]
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False,
             advertisers=[(a, ibeacon_bytes(APPLE_UUID, 9, i, p)) for i, (a, p) in enumerate(odd)]) as lab:
        r = run_cli('scan', '--device', f'tcp:127.0.0.1:{port}', '--duration', '2', '--json')
    assert r.returncode == 0, (r.returncode, r.stderr[-400:])
    final = {l['minor']: l for l in output_schema.lines('scan', r.stdout) if l.get('final') and l.get('kind') == 'ibeacon'}
    assert sorted(final) == [0, 1, 2, 3], r.stdout
    for minor in (0, 1, 2):  # +1, 0 and +127 dBm: no distance, proximity unknown
        assert final[minor]['distance_m'] is None and final[minor]['proximity'] == 'unknown', final[minor]
    assert final[3]['distance_m'] == pytest.approx((50 / 128) ** 10, abs=0.01)  # -128 dBm is in the model
    assert 'NaN' not in r.stdout and 'Infinity' not in r.stdout


def rss_kib(pid: int) -> int:
    for line in open(f'/proc/{pid}/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    raise AssertionError('no VmRSS')


def test_a_flood_of_distinct_beacons_keeps_memory_flat_and_the_table_bounded():
    # Three radios that each send a new identity every 10 ms: about 300 new beacons a second.
    port = free_port()
    flooders = [(f'D1:00:00:00:00:0{i}', ibeacon_bytes(OTHER_UUID, 0, 0, -60)) for i in range(3)]
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, flooders=flooders):
        p = subprocess.Popen([str(beacond_path()), 'scan', '--device', f'tcp:127.0.0.1:{port}', '--duration', '24',
                              '--json'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.extend(p.stdout), daemon=True)  # a full pipe would stall scan
        reader.start()
        samples = []
        for t in (8, 14, 20):
            time.sleep(t - (samples[-1][0] if samples else 0))
            samples.append((t, rss_kib(p.pid)))
        p.wait(timeout=30)
        reader.join(timeout=5)
        err = p.stderr.read()
    assert p.returncode == 0, err[-400:]
    lines = [output_schema.loads('scan', l) for l in got]
    final = [l for l in lines if l.get('final') and l['kind'] == 'ibeacon']
    print(f'flood: RSS {samples} KiB; {len(final)} beacons in the final table')
    assert samples[-1][1] - samples[0][1] <= 1024, f'RSS grew from {samples[0][1]} to {samples[-1][1]} KiB under the flood'
    summary = next(l for l in lines if l['kind'] == 'summary')
    print(f'flood: summary {summary}')
    assert summary['capacity'] == 1024 and summary['entries'] == len(final) <= 1024
    assert summary['evicted'] >= 2000, summary  # the flood was real: thousands of identities came and went


def altbeacon_bytes(uuid: str, major: int, minor: int, power: int, company: int = 0x0118, reserved: int = 0) -> bytes:
    """AltBeacon as its specification lays it out, written out here independently of beacond's code."""
    return (bytes.fromhex('0201061bff') + company.to_bytes(2, 'little') + b'\xbe\xac' + bytes.fromhex(uuid.replace('-', ''))
            + major.to_bytes(2, 'big') + minor.to_bytes(2, 'big') + power.to_bytes(1, 'big', signed=True) + bytes([reserved]))


def altbeacon_decode(data: bytes) -> dict:
    """The Android Beacon Library layout m:2-3=beac,i:4-19,i:20-21,i:22-23,p:24-24,d:25-25, offsets counted from the
    manufacturer data's company id (the AD structure's value)."""
    value = data[5:]  # after Flags (3 bytes) and the structure's length and type
    assert value[2:4] == b'\xbe\xac'
    return {'uuid': value[4:20].hex(), 'major': int.from_bytes(value[20:22], 'big'),
            'minor': int.from_bytes(value[22:24], 'big'), 'power': int.from_bytes(value[24:25], 'big', signed=True),
            'data': value[25]}


EDDY_UID = bytes.fromhex('0201060303aafe1716aafe00ee00112233445566778899aabbccddeeff0000')
EDDY_TLM = bytes.fromhex('0201060303aafe1116aafe2000' + '0000' + '1a80' + '01020304' + '00008ca0')


def test_scan_recognizes_altbeacon_and_eddystone_uid_and_tlm_with_their_fields():
    from beacontools import parse_packet
    alt = altbeacon_bytes(OTHER_UUID, 513, 1027, -61, reserved=7)
    # Independent decoders first: beacontools for Eddystone, the Android Beacon Library layout for AltBeacon.
    assert altbeacon_decode(alt) == {'uuid': OTHER_UUID.replace('-', '').lower(), 'major': 513, 'minor': 1027, 'power': -61, 'data': 7}
    uid, tlm = parse_packet(EDDY_UID), parse_packet(EDDY_TLM)
    assert (uid.namespace, uid.instance, uid.tx_power) == ('00112233445566778899', 'aabbccddeeff', -18)
    assert (tlm.voltage, tlm.temperature, tlm.advertising_count, tlm.seconds_since_boot) == (0, 26.5, 0x01020304, 36000)
    port = free_port()
    room = [('D2:00:00:00:00:01', alt), ('D2:00:00:00:00:02', EDDY_UID), ('D2:00:00:00:00:03', EDDY_TLM),
            ('D2:00:00:00:00:04', ibeacon_bytes(APPLE_UUID, 1, 1, -59))]
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, advertisers=room):
        final, _ = scan(f'tcp:127.0.0.1:{port}')
        filtered, _ = scan(f'tcp:127.0.0.1:{port}', '--uuid', OTHER_UUID)
    by_kind = {b['kind']: b for b in final}
    assert sorted(by_kind) == ['altbeacon', 'eddystone-tlm', 'eddystone-uid', 'ibeacon'], final
    a = by_kind['altbeacon']
    # The same names and types as `payload --json` (test_formats): company_id a number, Eddystone's 0 m power
    # measured_power_0m.
    assert (a['uuid'], a['major'], a['minor'], a['measured_power'], a['company_id'], a['reserved']) == \
        (OTHER_UUID, 513, 1027, -61, 0x0118, 7)
    assert a['distance_m'] == pytest.approx((50 / 61) ** 10, abs=0.01) and a['address'] == 'D2:00:00:00:00:01'
    u = by_kind['eddystone-uid']
    assert (u['namespace'], u['instance'], u['measured_power_0m'], u['measured_power']) == \
        ('00112233445566778899', 'aabbccddeeff', -18, -59)  # calibrated at 0 m: 41 dB more than at 1 m
    t = by_kind['eddystone-tlm']
    assert (t['battery_mv'], t['temperature_c'], t['adv_count'], t['uptime_s']) == (0, 26.5, 0x01020304, 3600.0)
    # The UUID filter keeps the AltBeacon with that UUID; Eddystone frames have no UUID and go.
    assert [(b['kind'], b['uuid']) for b in filtered] == [('altbeacon', OTHER_UUID)]
