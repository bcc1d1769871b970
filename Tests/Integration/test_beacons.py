"""Several beacons on one radio ([[beacon]]): their own advertising sets on an extended controller, time slices on a
legacy-only one, reloads that touch only what changed, the capacity error, and the address policy.

What is on the air comes from Bumble's controller (each set's data, parameters and random address) and from the
second radio on the link (what it heard, from which address); the frames are written out from the specifications
(conftest.ibeacon_bytes, test_scan.altbeacon_bytes, test_formats.eddystone_uid_bytes) and decoded independently
(beacontools for iBeacon and Eddystone, the Android Beacon Library layout for AltBeacon).
"""
from __future__ import annotations

import os
import re
import signal
import time

import pytest

from conftest import APPLE_UUID, ibeacon_bytes, kept_address, kept_addresses, run_cli
from harness.lab import Lab, wait_for
from harness.notify import NotifyListener
from test_formats import INSTANCE, NAMESPACE, eddystone_uid_bytes
from test_scan import altbeacon_bytes, altbeacon_decode

IB = f'[[beacon]]\nuuid = "{APPLE_UUID}"\nmajor = 1\nminor = 2\n'
ALT = f'[[beacon]]\nformat = "altbeacon"\nuuid = "{APPLE_UUID}"\nmajor = 513\nminor = 1027\nmeasured_power = -61\nreserved = 7\n'
EDDY = f'[[beacon]]\nformat = "eddystone-uid"\nnamespace = "{NAMESPACE}"\ninstance = "{INSTANCE}"\nmeasured_power = -20\ninterval_ms = 250\n'
IB_BYTES = ibeacon_bytes(major=1, minor=2)
ALT_BYTES = altbeacon_bytes(APPLE_UUID, 513, 1027, -61, reserved=7)
EDDY_BYTES = eddystone_uid_bytes(NAMESPACE, INSTANCE, -20)


def enabled_sets(lab: Lab) -> dict[int, dict]:
    return {h: s for h, s in lab.state()['sets'].items() if s['enabled']}


def heard_all(lab: Lab, frames: list[bytes], timeout: float) -> dict[bytes, set[str]]:
    """Waits until the second radio heard every frame; returns the addresses each came from."""
    def got():
        by = {}
        for r in list(lab.received):
            by.setdefault(r.data, set()).add(r.address)
        return all(f in by for f in frames) and by
    return wait_for(got, timeout, what=f'the scanner to hear all of {[f.hex()[:20] for f in frames]}')


def check_decoded(frames: dict[bytes, set[str]]) -> None:
    from beacontools import parse_packet
    ib = parse_packet(IB_BYTES)
    assert (ib.uuid, ib.major, ib.minor) == (APPLE_UUID.lower(), 1, 2)
    assert altbeacon_decode(ALT_BYTES) == {'uuid': APPLE_UUID.replace('-', '').lower(), 'major': 513, 'minor': 1027,
                                           'power': -61, 'data': 7}
    uid = parse_packet(EDDY_BYTES)
    assert (uid.namespace, uid.instance, uid.tx_power) == (NAMESPACE, INSTANCE, -20)
    assert set(frames) >= {IB_BYTES, ALT_BYTES, EDDY_BYTES}
    # And Bumble's AD parser: the structures each frame is made of.
    from bumble.core import AdvertisingData
    ib_ad = AdvertisingData.from_bytes(IB_BYTES)
    assert ib_ad.get(AdvertisingData.FLAGS) == 0x06
    assert ib_ad.get(AdvertisingData.MANUFACTURER_SPECIFIC_DATA) == (0x004C, bytes.fromhex('0215') + IB_BYTES[9:])
    alt_ad = AdvertisingData.from_bytes(ALT_BYTES)
    assert alt_ad.get(AdvertisingData.MANUFACTURER_SPECIFIC_DATA) == (0x0118, ALT_BYTES[7:])
    eddy_ad = AdvertisingData.from_bytes(EDDY_BYTES)
    service = eddy_ad.get(AdvertisingData.SERVICE_DATA_16_BIT_UUID)
    assert str(service[0]).endswith('FEAA') and service[1] == EDDY_BYTES[11:]  # UUID-16:FEAA


def test_three_formats_each_on_its_own_set_with_exact_bytes(tmp_path, processes, state_directory):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + EDDY)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        notify = NotifyListener(tmp_path)
        try:
            b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'NOTIFY_SOCKET': notify.path})
            sets = wait_for(lambda: (s := enabled_sets(lab)) and len(s) == 3 and s, 10, what='three sets enabled')
            assert sorted(s['data'] for s in sets.values()) == sorted([IB_BYTES, ALT_BYTES, EDDY_BYTES])
            by_data = {s['data']: s for s in sets.values()}
            assert by_data[IB_BYTES]['interval_min'] == 160 and by_data[EDDY_BYTES]['interval_min'] == 400  # its own 250 ms
            # Each beacon its own set and its own static address, the ones the state directory keeps.
            kept = kept_addresses(state_directory)
            address = {d: s['random_address'] for d, s in by_data.items()}
            assert len(set(address.values())) == 3 and set(address.values()) == set(kept.values())
            assert all(s['own_address_type'] == 1 and s['properties'] == 0x0010 for s in sets.values())
            frames = heard_all(lab, [IB_BYTES, ALT_BYTES, EDDY_BYTES], timeout=5)
            check_decoded(frames)
            assert all(frames[f] == {address[f]} for f in (IB_BYTES, ALT_BYTES, EDDY_BYTES))
            status = notify.wait_for('STATUS=Advertising 3 beacons')
            assert status == (f'STATUS=Advertising 3 beacons on unix:{sock}: iBeacon every 100 ms from {address[IB_BYTES]}, '
                              f'AltBeacon every 100 ms from {address[ALT_BYTES]}, Eddystone-UID every 250 ms from {address[EDDY_BYTES]} '
                              '(extended, 3 sets)')
            # One journal line per beacon.
            wait_for(lambda: sum('Beacon ' in l and ' of 3: ' in l for l in b.lines) == 3, 5, what='one line per beacon')
        finally:
            notify.close()


def test_legacy_only_controller_time_slices_every_beacon_within_a_bound(tmp_path, processes):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + EDDY)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', extended=False) as lab:
        notify = NotifyListener(tmp_path)
        try:
            processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'NOTIFY_SOCKET': notify.path})
            status = notify.wait_for('STATUS=Advertising 3 beacons')
            # One advertiser at the shortest interval (100 ms); each beacon has every third slot.
            assert re.search(r'iBeacon every 300 ms from \S+, AltBeacon every 300 ms from \S+, Eddystone-UID every 300 ms from ', status), status
            assert 'time-sliced' in status
            lab.clear_received()
            start = time.monotonic()
            frames = heard_all(lab, [IB_BYTES, ALT_BYTES, EDDY_BYTES], timeout=3)
            took = time.monotonic() - start
            check_decoded(frames)
            assert took < 3
            assert not any(s['enabled'] for s in lab.state()['sets'].values())
            # Every beacon keeps coming round: each heard again in the next 2 s.
            lab.clear_received()
            heard_all(lab, [IB_BYTES, ALT_BYTES, EDDY_BYTES], timeout=2)
        finally:
            notify.close()


def test_reload_adding_and_removing_a_beacon_leaves_the_others_untouched(tmp_path, processes, tcp_lab, state_directory):
    lab_state_directory = state_directory
    lab, device = tcp_lab
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT)
    b = processes('run', '-c', str(conf), '-d', device)
    sets = wait_for(lambda: (s := enabled_sets(lab)) and len(s) == 2 and s, 10, what='two sets')
    handle_of = {s['data']: h for h, s in sets.items()}
    seen = len(lab.state()['commands'])

    def commands_since():
        return lab.state()['commands'][seen:]

    # Add Eddystone-UID: a new set; nothing is sent for the two already on the air.
    conf.write_text(IB + ALT + EDDY)
    b.signal(signal.SIGHUP)
    sets = wait_for(lambda: (s := enabled_sets(lab)) and len(s) == 3 and s, 10, what='three sets after the reload')
    new = [h for h, s in sets.items() if s['data'] == EDDY_BYTES]
    assert len(new) == 1 and new[0] not in handle_of.values()
    assert {s['data']: h for h, s in sets.items() if s['data'] != EDDY_BYTES} == handle_of
    for _, op, p in commands_since():
        if op in (0x2035, 0x2036, 0x2037, 0x203C):
            assert p[0] == new[0], f'{op:#06x} touched set {p[0]}'
        if op == 0x2039:
            assert p[1] == 1 and p[2] == new[0], f'enable/disable touched {p.hex()}'
    # Remove the AltBeacon: its set goes; the iBeacon's and Eddystone's sets get no command.
    seen = len(lab.state()['commands'])
    conf.write_text(IB + EDDY)
    b.signal(signal.SIGHUP)
    # Removed, not only disabled (the disable and the removal are two commands: wait for the second).
    wait_for(lambda: len(enabled_sets(lab)) == 2 and ALT_BYTES not in [x['data'] for x in lab.state()['sets'].values()],
             10, what="the AltBeacon's set removed")
    for _, op, p in commands_since():
        if op in (0x2035, 0x2036, 0x2037, 0x203C):
            assert p[0] == handle_of[ALT_BYTES], f'{op:#06x} touched set {p[0]}'
        if op == 0x2039:
            assert p[1] == 1 and p[2] == handle_of[ALT_BYTES], f'enable/disable touched {p.hex()}'
    # Edit the iBeacon's measured power: only its data changes, in place (no disable of any set).
    seen = len(lab.state()['commands'])
    conf.write_text(IB + 'measured_power = -60\n' + EDDY)
    b.signal(signal.SIGHUP)
    wait_for(lambda: ibeacon_bytes(major=1, minor=2, power=-60) in [s['data'] for s in enabled_sets(lab).values()], 10, what='power -60')
    ops = [(op, p[0]) for _, op, p in commands_since()]
    assert ops == [(0x2037, handle_of[IB_BYTES])], ops
    # Edit its minor: another identity, so its own new address (its set alone restarted); the Eddystone set untouched.
    before = lab.state()['sets'][handle_of[IB_BYTES]]['random_address']
    seen = len(lab.state()['commands'])
    conf.write_text(IB.replace('minor = 2', 'minor = 3') + EDDY)
    b.signal(signal.SIGHUP)
    wait_for(lambda: ibeacon_bytes(major=1, minor=3) in [s['data'] for s in enabled_sets(lab).values()], 10, what='minor 3')
    after = next(s for s in enabled_sets(lab).values() if s['data'] == ibeacon_bytes(major=1, minor=3))['random_address']
    assert after != before and after in kept_addresses(lab_state_directory).values()
    assert {p[0] for _, op, p in commands_since() if op in (0x2035, 0x2036, 0x2037)} == {handle_of[IB_BYTES]}
    # A broken file keeps all of them.
    conf.write_text(IB + EDDY + '[[beacon]]\nmajor = "x"\n')
    before = enabled_sets(lab)
    b.signal(signal.SIGHUP)
    wait_for(lambda: 'Keeping the previous configuration' in b.log(), 5, what='the broken file refused')
    assert enabled_sets(lab) == before
    assert b.proc.poll() is None


def test_more_beacons_than_sets_is_a_clear_error(tmp_path, processes):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + EDDY)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', max_sets=2) as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        wait_for(lambda: 'The config has 3 beacons, but the controller on' in b.log(), 10, what='the capacity error')
        assert 'has 2 advertising sets' in b.log()
        assert not enabled_sets(lab)  # none of them on the air: no silent drop of the third
        assert b.proc.poll() is None


def test_static_address_is_the_same_after_a_restart(tmp_path, processes, state_directory):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    sock = tmp_path / 'hci.sock'
    addresses = []
    for _ in range(2):
        with Lab(f'unix-server:{sock}') as lab:
            b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
            frames = heard_all(lab, [IB_BYTES], timeout=10)
            addresses.append(frames[IB_BYTES])
            assert b.stop() == 0
    static = kept_address(state_directory)
    assert addresses == [{static}, {static}]
    assert int(static[:2], 16) >> 6 == 0b11  # a random static address
    # Another machine (another state directory) gets another address.
    other = tmp_path / 'other-state'
    other.mkdir()
    with Lab(f'unix-server:{sock}') as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'STATE_DIRECTORY': str(other)})
        frames = heard_all(lab, [IB_BYTES], timeout=10)
    assert frames[IB_BYTES] == {kept_address(other)} != {static}


@pytest.mark.parametrize('policy', ['public', 'rotating'])
def test_public_and_rotating_addresses(tmp_path, processes, policy):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + f'[advertising]\naddress = "{policy}"\n')
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        frames = heard_all(lab, [IB_BYTES], timeout=10)
        (address,) = frames[IB_BYTES]
        if policy == 'public':
            assert address.split('/')[0] == 'F0:F1:F2:F3:F4:F5'  # Bumble marks a public address '/P'
        else:
            assert int(address[:2], 16) >> 6 == 0b00 and address != 'F0:F1:F2:F3:F4:F5'  # non-resolvable private


@pytest.mark.parametrize('name,text,error', [
    ('addresses', '# a comment\nnot an address\n', 'addresses:2: not a random static address followed by a beacon\'s identity; fix or remove that line'),
    ('static-address', 'not an address\n', 'does not hold a random static address'),  # the file earlier versions kept
    # bug: a file over the 1 MiB read cap was read cut: the lines past the cut (this beacon's) were lost, the beacon
    # got a new MAC, and the rewrite dropped them for good.
    ('addresses', '#' * (1 << 20) + '\nC6:12:34:56:78:9A ' + f'ibeacon {APPLE_UUID} 1 2\n',
     'addresses is larger than 1 MiB'),
], ids=['damaged line', 'earlier version', 'over the cap'])
def test_a_damaged_address_file_is_an_error_not_a_new_identity(tmp_path, processes, state_directory, name, text, error):
    (state_directory / name).write_text(text)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        wait_for(lambda: error in b.log(), 10, what='the error')
        assert not lab.advertising()
        assert (state_directory / name).read_text() == text


def test_payload_and_check_config_print_every_beacon(tmp_path):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + EDDY)
    r = run_cli('payload', '-c', str(conf))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [IB_BYTES.hex(), ALT_BYTES.hex(), EDDY_BYTES.hex()]
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('beacon ') >= 3 and 'eddystone-uid' in r.stdout and 'altbeacon' in r.stdout
    # With a mistake in the second beacon, the message names it and where.
    conf.write_text(IB + ALT.replace('major = 513', 'major = 70000') + EDDY)
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 78
    assert f"{conf}:8:9: error: 'major' in [[beacon]] #2 must be from 0 to 65535, found 70000" in r.stderr, r.stderr


TLM = '[[beacon]]\nformat = "eddystone-tlm"\n'
TLM_PREFIX = bytes.fromhex('0201060303aafe1116aafe2000')


def tlm_fields(data: bytes) -> tuple[int, int, int, int]:
    """(battery mV, temperature 8.8 raw, advertising PDU count, time in 0.1 s), from the Eddystone-TLM layout."""
    assert data[:len(TLM_PREFIX)] == TLM_PREFIX and len(data) == 25, data.hex()
    f = data[len(TLM_PREFIX):]
    return (int.from_bytes(f[0:2], 'big'), int.from_bytes(f[2:4], 'big'), int.from_bytes(f[4:8], 'big'),
            int.from_bytes(f[8:12], 'big'))


def host_temperature() -> int:
    """What the frame must say: this machine's first thermal zone in 8.8 fixed point, or 0x8000 without one."""
    try:
        milli = int(open('/sys/class/thermal/thermal_zone0/temp').read().split()[0])
    except (OSError, ValueError, IndexError):
        print('NOTE: this machine has no thermal zone: the TLM temperature must be 0x8000, "not supported"')
        return 0x8000
    return (milli * 256 // 1000) & 0xFFFF


def test_eddystone_tlm_reports_mains_power_the_thermal_zone_and_honest_counts(tmp_path, processes):
    from beacontools import parse_packet
    from beacontools.packet_types.eddystone import EddystoneTLMFrame
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + TLM)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        started = time.monotonic()
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')

        def tlm():
            return next((s['data'] for s in enabled_sets(lab).values() if s['data'].startswith(TLM_PREFIX)), None)
        first = wait_for(tlm, 10, what='the TLM set')
        vbatt, temp, count, tenths = tlm_fields(first)
        assert vbatt == 0  # mains powered
        assert abs(temp - host_temperature()) <= 256 or temp == host_temperature()
        assert (count, tenths) == (0, 0)  # just started
        # Every 10 s new values, sent as a data update of that set alone.
        second = wait_for(lambda: (d := tlm()) and d != first and d, 14, what='new TLM values')
        seen = time.monotonic() - started
        vbatt, temp2, count2, tenths2 = tlm_fields(second)
        assert vbatt == 0
        assert abs(tenths2 - seen * 10) <= 25, (tenths2, seen)  # time since start, 0.1 s
        # Two beacons at 100 ms for ~10 s: 3 PDUs per event (channels 37, 38, 39), ~600.
        assert 500 <= count2 <= 700, count2
        # The second radio hears it and beacontools decodes it as TLM.
        heard = wait_for(lambda: next((r.data for r in list(lab.received) if r.data.startswith(TLM_PREFIX)), None), 5,
                         what='the scanner to hear the TLM frame')
        frame = parse_packet(heard)
        assert isinstance(frame, EddystoneTLMFrame) and frame.voltage == 0


def name_response(name: str) -> bytes:
    """A scan response with one Complete Local Name structure (AD type 0x09)."""
    raw = name.encode()
    return bytes([len(raw) + 1, 0x09]) + raw


def test_a_name_goes_into_a_scan_response_and_makes_only_that_beacon_scannable(tmp_path, processes):
    from bumble.core import AdvertisingData
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + 'name = "Shelf 12 – Café"\n' + ALT)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        first = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        sets = wait_for(lambda: (s := enabled_sets(lab)) and len(s) == 2 and s, 10, what='two sets')
        by_data = {s['data']: s for s in sets.values()}
        named, plain = by_data[IB_BYTES], by_data[ALT_BYTES]
        assert named['properties'] == 0x0012  # legacy PDU, scannable: ADV_SCAN_IND
        assert named['scan_response'] == name_response('Shelf 12 – Café')
        # Bumble's own AD parser reads the name back.
        assert AdvertisingData.from_bytes(named['scan_response']).get(AdvertisingData.COMPLETE_LOCAL_NAME) == 'Shelf 12 – Café'
        assert plain['properties'] == 0x0010 and plain['scan_response'] == b''  # without a name nothing changes
    # One beacond per device and state directory: the first goes before the second starts on the same socket.
    assert first.stop() == 0
    # A legacy-only controller: ADV_SCAN_IND and LE Set Scan Response Data.
    conf.write_text(IB + 'name = "Shelf 12"\n')
    with Lab(f'unix-server:{sock}', extended=False) as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        family, st = wait_for(lambda: (a := lab.advertising()) and a[1]['data'] == IB_BYTES and a, 10, what='legacy advertising')
        assert family == 'legacy' and st['type'] == 2 and st['scan_response'] == name_response('Shelf 12')


def test_without_a_state_directory_the_default_falls_back_to_public_and_an_explicit_static_is_an_error(tmp_path, processes):
    """A hand-started beacond (no systemd StateDirectory=, no root for /var/lib) still puts the beacon on the air."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    sock = tmp_path / 'hci.sock'
    nowhere = {'STATE_DIRECTORY': str(tmp_path / 'missing' / 'state')}  # mkdir fails: its parent does not exist
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=nowhere)
        frames = heard_all(lab, [IB_BYTES], timeout=10)
        assert {a.split('/')[0] for a in frames[IB_BYTES]} == {'F0:F1:F2:F3:F4:F5'}
        wait_for(lambda: "advertising from the controller's public address until it can be kept" in b.log(), 5, what='the warning')
        assert b.log().count('Cannot keep a static address') == 1  # once, not per apply
        assert b.stop() == 0  # one beacond per device, with a state directory or without (issue #53)
    conf.write_text(IB + '[advertising]\naddress = "static"\n')
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=nowhere)
        wait_for(lambda: 'Cannot keep a static address' in b.log() and 'retrying in' in b.log(), 10, what='the error')
        assert not lab.advertising()


def test_the_tlm_refresh_does_not_repeat_the_applys_warnings(tmp_path, processes):
    """Bug: every 10 s refresh of an Eddystone-TLM frame logged the apply's warnings again (here: a TX power that a
    legacy controller cannot set)."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(TLM + '[advertising]\ntx_power = 0\n')
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', extended=False) as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        first = wait_for(lambda: (a := lab.advertising()) and a[1]['data'].startswith(TLM_PREFIX) and a[1]['data'], 10,
                         what='the TLM frame on the legacy advertiser')
        # The controller got the refresh (new values: a data command of its own), twice.
        # The state as it was seen: a second look can fall in the 2 s off-and-on refresh, when nothing is on the air.
        second = wait_for(lambda: (a := lab.advertising()) and a[1]['data'] != first and a, 15, what='the first refresh')[1]['data']
        wait_for(lambda: (a := lab.advertising()) and a[1]['data'] not in (first, second) and a, 15, what='the second refresh')
        warning = 'tx_power = 0 is ignored'
        assert b.log().count(warning) == 1, b.log()


def test_a_new_static_address_survives_a_power_cut_its_directory_is_synced(tmp_path, state_directory):
    """Bug: the static address was renamed into place without syncing its directory, so a power cut right after the
    first start could lose the name and give the beacons a new identity. strace shows the system calls as made."""
    import re
    import shutil
    import subprocess
    from conftest import beacond_path
    strace = shutil.which('strace')
    if strace is None:
        pytest.fail('strace is not installed (scripts/deps.sh --all installs it): the check cannot run')
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    sock = tmp_path / 'hci.sock'
    trace = tmp_path / 'trace.txt'
    with Lab(f'unix-server:{sock}') as lab:
        p = subprocess.Popen([strace, '-f', '-qq', '-e', 'trace=open,openat,fsync,fdatasync,rename,renameat,renameat2,link,linkat,close',
                              '-o', str(trace), str(beacond_path()), 'run', '-c', str(conf), '-d', f'unix:{sock}'],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            heard_all(lab, [IB_BYTES], timeout=20)
        finally:
            # Stop beacond itself (strace's child); strace exits with it.
            children = open(f'/proc/{p.pid}/task/{p.pid}/children').read().split()
            for c in children:
                os.kill(int(c), signal.SIGTERM)
            p.wait(timeout=20)
    lines = trace.read_text().splitlines()
    # Its own temporary file (.addresses.<random>) is put into place.
    renamed = next((i for i, l in enumerate(lines) if re.search(r'(?:rename|link)\w*\(.*"\.addresses\.\w+".*"addresses"', l)), None)
    assert renamed is not None, 'the temporary file was not put into place (rename or link):\n' + '\n'.join(lines[-40:])
    # Which descriptor names the state directory at each point: opened on its path, or a component at a time from
    # "/" (openat on the descriptor of the directory above), until closed.
    fds = {}
    synced = False
    for i, l in enumerate(lines):
        l = re.sub(r'^\d+\s+', '', l)
        if m := re.match(r'open(?:at)?\((?:AT_FDCWD, )?"([^"]+)".*\) = (\d+)$', l):
            fds[m.group(2)] = m.group(1).rstrip('/')
        elif (m := re.match(r'openat\((\d+), "([^"/]+)".*\) = (\d+)$', l)) and m.group(1) in fds:
            fds[m.group(3)] = fds[m.group(1)] + '/' + m.group(2)
        elif m := re.match(r'close\((\d+)\)', l):
            fds.pop(m.group(1), None)
        elif (m := re.match(r'f(?:data)?sync\((\d+)\)', l)) and i > renamed and fds.get(m.group(1)) == str(state_directory):
            synced = True
            break
    assert synced, 'the state directory was not synced after the rename:\n' + '\n'.join(lines[renamed:renamed + 20])


def test_a_stop_on_a_controller_beacond_owns_clears_every_set_in_two_commands(tmp_path, processes):
    """Bug: a stop sent a disable and a remove per set, each with its 2 s timeout, against the fixed 3 s stop
    deadline; on an H4 controller, which beacond owns, LE Clear Advertising Sets does it in one."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + EDDY)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        wait_for(lambda: len(enabled_sets(lab)) == 3, 10, what='three sets enabled')
        t0 = time.monotonic()
        assert b.stop() == 0
        after = [(op, prm) for t, op, prm in lab.state()['commands'] if t >= t0]
        # Every set disabled at once (Number_of_Sets 0 disables all), then all removed.
        assert after == [(0x2039, b'\x00\x00'), (0x203D, b'')], after
        assert lab.state()['sets'] == {}
