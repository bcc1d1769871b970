"""`beacond scan --expect`: a second radio checks beacond configs against the air. The beacons are put on the air by a
real `beacond run` on one Bumble controller; `scan --expect` listens on a second controller of the same link. What
it says is checked against the first controller's own state (each set's data and random address), and its metrics
file with Prometheus' own text parser (prometheus-client)."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from conftest import APPLE_UUID, beacond_path, free_port, run_cli
from harness.lab import Lab, wait_for
import output_schema
from test_beacons import ALT, EDDY, IB, TLM
from test_eid import KEY, eid, write_key
from test_formats import INSTANCE, NAMESPACE

EID = '[[beacon]]\nformat = "eddystone-eid"\nidentity_key_file = "shop.key"\nrotation_exponent = 10\nmeasured_power = -20\n'
HCI = '[controller]\nbackend = "hci"\n'


def expect(device: str, *args: str, timeout: str = '20') -> tuple[int, list[dict], str]:
    r = run_cli('scan', '--device', device, '--timeout', timeout, '--json', '--expect', *args)
    return r.returncode, output_schema.lines('expect', r.stdout), r.stderr


def metrics(path) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def per_beacon(m: dict, name: str) -> dict[tuple, float]:
    """One metric by the beacon's identity: its labels but config, beacon (its number in the file) and device."""
    return {tuple((k, v) for k, v in labels if k not in ('config', 'beacon', 'device')): v
            for (n, labels), v in m.items() if n == name}


def identity(format: str, **labels: str) -> tuple:
    """A beacon's identity labels as per_beacon keys them (sorted by name, as metrics() keeps them)."""
    return tuple(sorted({'format': format, **labels}.items()))


@pytest.fixture
def two_radios(tmp_path):
    port1, port2 = free_port(), free_port()
    with Lab(f'tcp-server:127.0.0.1:{port1}', scan=False, second_transport=f'tcp-server:127.0.0.1:{port2}') as lab:
        yield lab, f'tcp:127.0.0.1:{port1}', f'tcp:127.0.0.1:{port2}'


def test_every_beacon_heard_exits_0_early_with_each_address_and_writes_the_metrics(tmp_path, processes, two_radios):
    lab, radio, verifier = two_radios
    write_key(tmp_path / 'keys' / 'shop.key')
    conf = tmp_path / 'shop7.conf'
    conf.write_text(IB + ALT + EDDY + TLM + EID + HCI)
    processes('run', '-c', str(conf), '-d', radio)
    wait_for(lambda: len([s for s in lab.state()['sets'].values() if s['enabled']]) == 5, 10, what='five sets on the air')
    prom = tmp_path / 'textfile' / 'beacond-verify.prom'
    started = time.monotonic()
    code, lines, err = expect(verifier, str(conf), '--metrics', str(prom), timeout='60')
    took = time.monotonic() - started
    assert code == 0, err
    entries = [l for l in lines if l['kind'] == 'expect']
    assert [(e['beacon'], e['format'], e['status']) for e in entries] == [
        (1, 'ibeacon', 'heard'), (2, 'altbeacon', 'heard'), (3, 'eddystone-uid', 'heard'), (4, 'eddystone-tlm', 'heard'),
        (5, 'eddystone-eid', 'heard')]
    # Each frame came from the address its set has in the first controller (the TLM from its UID's).
    sets = lab.state()['sets'].values()
    by_data = {s['data'][:20]: s['random_address'] for s in sets}
    address = {e['format']: e['address'] for e in entries}
    assert address['ibeacon'] == by_data[bytes.fromhex('0201061aff4c000215') + bytes.fromhex(APPLE_UUID.replace('-', ''))[:11]]
    assert address['eddystone-tlm'] == address['eddystone-uid'] != address['ibeacon'] != address['altbeacon']
    assert entries[0]['uuid'] == APPLE_UUID and entries[0]['minor'] == 2 and entries[0]['rssi'] == -50  # Bumble's RSSI
    summary = lines[-1]
    assert summary['kind'] == 'expect_summary' and summary['heard'] == 5 and summary['exit'] == 0
    # It stopped once all five were heard, not at the timeout (a bound only a hang breaks).
    assert summary['seconds'] < 50 and took < 55
    m = metrics(prom)
    assert set(per_beacon(m, 'beacond_verify_beacon_heard').values()) == {1.0}
    assert len(per_beacon(m, 'beacond_verify_beacon_heard')) == 5
    # One label per identifier (Eddystone's prefixed: Prometheus' own `instance` is the scrape target's); the EID
    # beacon by its key file's name, and the key itself nowhere in the file.
    assert set(per_beacon(m, 'beacond_verify_beacon_heard')) == {
        identity('ibeacon', uuid=APPLE_UUID, major='1', minor='2'),
        identity('altbeacon', uuid=APPLE_UUID, major='513', minor='1027'),
        identity('eddystone-uid', eddystone_namespace=NAMESPACE.lower(), eddystone_instance=INSTANCE.lower()),
        identity('eddystone-tlm'),
        identity('eddystone-eid', key_file='shop.key')}
    assert KEY.lower() not in prom.read_text().lower()
    assert set(per_beacon(m, 'beacond_verify_beacon_rssi_dbm').values()) == {-50.0}
    seen = per_beacon(m, 'beacond_verify_beacon_last_seen_timestamp_seconds').values()
    assert all(abs(t - time.time()) < 120 for t in seen)
    assert m[('beacond_verify_success', (('device', verifier),))] == 1.0
    assert oct(os.stat(prom).st_mode & 0o777) == '0o644'


def test_a_beacon_not_on_the_air_is_missing_exit_2_naming_it(tmp_path, processes, two_radios):
    lab, radio, verifier = two_radios
    running = tmp_path / 'running.conf'
    running.write_text(IB + ALT + HCI)
    processes('run', '-c', str(running), '-d', radio)
    wait_for(lambda: len([s for s in lab.state()['sets'].values() if s['enabled']]) == 2, 10, what='two sets on the air')
    expected = tmp_path / 'expected.conf'
    expected.write_text(IB + ALT + IB.replace('minor = 2', 'minor = 99') + HCI)
    prom = tmp_path / 'verify.prom'
    prom.write_text('stale\n')
    code, lines, err = expect(verifier, str(expected), '--metrics', str(prom), timeout='10')
    assert code == 2, err
    assert [(e['beacon'], e['status']) for e in lines if e['kind'] == 'expect'] == [(1, 'heard'), (2, 'heard'), (3, 'missing')]
    missing = next(e for e in lines if e.get('status') == 'missing')
    assert 'address' not in missing and missing['minor'] == 99 and missing['line'] == 12
    assert f'1 of 3 beacons not heard on {verifier} within 10.0 s: {APPLE_UUID} major 1 minor 99 (beacon 3 of 3 in {expected}:12)' in err
    m = metrics(prom)
    minor99 = identity('ibeacon', uuid=APPLE_UUID, major='1', minor='99')
    assert per_beacon(m, 'beacond_verify_beacon_heard')[minor99] == 0.0
    assert minor99 not in per_beacon(m, 'beacond_verify_beacon_last_seen_timestamp_seconds')
    # PromQL selects it by its identifiers.
    assert m[('beacond_verify_beacon_heard', (('beacon', '3'), ('config', str(expected)), ('device', verifier),
                                              ('format', 'ibeacon'), ('major', '1'), ('minor', '99'), ('uuid', APPLE_UUID)))] == 0.0
    assert m[('beacond_verify_beacons', (('device', verifier), ('state', 'missing')))] == 1.0
    assert m[('beacond_verify_success', (('device', verifier),))] == 0.0


def test_the_identity_with_another_power_or_format_is_a_mismatch_exit_3(tmp_path, processes, two_radios):
    lab, radio, verifier = two_radios
    # On the air: the iBeacon with measured_power -65, and minor 7 as an AltBeacon.
    running = tmp_path / 'running.conf'
    running.write_text(IB.replace('minor = 2', 'minor = 2\nmeasured_power = -65')
                       + ALT.replace('major = 513\nminor = 1027', 'major = 1\nminor = 7') + HCI)
    processes('run', '-c', str(running), '-d', radio)
    wait_for(lambda: len([s for s in lab.state()['sets'].values() if s['enabled']]) == 2, 10, what='two sets on the air')
    # The configs say -59 (the default) and an iBeacon; a third file's beacon is missing.
    a, b = tmp_path / 'a.conf', tmp_path / 'b.conf'
    a.write_text(IB + IB.replace('minor = 2', 'minor = 7') + HCI)
    b.write_text(IB.replace('major = 1', 'major = 2') + HCI)
    code, lines, err = expect(verifier, str(a), str(b), timeout='10')
    assert code == 3, err
    entries = [l for l in lines if l['kind'] == 'expect']
    assert [(e['config'], e['status']) for e in entries] == [(str(a), 'mismatch'), (str(a), 'mismatch'), (str(b), 'missing')]
    assert [m['differences'] for m in entries[0]['mismatches']] == [['measured_power -65 on the air; the config says -59']]
    assert entries[0]['mismatches'][0]['measured_power'] == -65 and entries[0]['mismatches'][0]['address']
    assert [m['differences'] for m in entries[1]['mismatches']] == [['heard as an AltBeacon; the config says iBeacon']]
    assert f'{APPLE_UUID} major 1 minor 2 (beacon 1 of 2 in {a}:1) is on the air with other content: measured_power -65 on the air; the config says -59' in err
    assert f'major 2 minor 2 (the beacon in {b}:1)' in err


def test_the_text_report_a_directory_of_configs_and_the_mistakes(tmp_path, processes, two_radios):
    lab, radio, verifier = two_radios
    fleet = tmp_path / 'fleet'
    fleet.mkdir()
    (fleet / 'shop1.conf').write_text(IB + HCI)
    (fleet / 'shop2.conf').write_text(EDDY + HCI)
    (fleet / 'README').write_text('not a config')
    processes('run', '-c', str(fleet / 'shop1.conf'), '-d', radio)  # shop 2's beacon is not on the air
    wait_for(lab.advertising, 10, what='shop 1 on the air')
    r = run_cli('scan', '--device', verifier, '--timeout', '10', '--expect', str(fleet))
    # Not a terminal, but --expect's report is text unless --json is given.
    assert r.returncode == 2, r.stderr
    assert r.stdout.startswith(f'Listening on {verifier} for 2 beacons from 2 config files (at most 10.0 s)\n')
    assert f'HEARD    {APPLE_UUID} major 1 minor 2  (the beacon in {fleet}/shop1.conf:1)\n         heard from ' in r.stdout
    assert f'MISSING  Eddystone-UID namespace 00112233445566778899 instance a1b2c3d4e5f6  (the beacon in {fleet}/shop2.conf:1)\n' in r.stdout
    assert r.stdout.endswith(f'1 of 2 heard as configured on {verifier} in ' + r.stdout.rsplit(' in ', 1)[1])
    # Mistakes: a config error names file:line:col (78); a config without a uuid has nothing to expect (78).
    bad = tmp_path / 'bad.conf'
    bad.write_text('[beacon]\nuuid = "x"\nmajor = 1\nminor = 1\n')
    r = run_cli('scan', '--device', verifier, '--expect', str(bad))
    assert r.returncode == 78 and f"{bad}:2:9: error: 'uuid' in [beacon] is not a valid UUID" in r.stderr
    bad.write_text('[beacon]\nmajor = 1\nminor = 1\n')
    r = run_cli('scan', '--device', verifier, '--expect', str(bad))
    assert r.returncode == 78 and f'{bad}:1:1: error: [beacon] has no uuid yet: this config puts nothing on the air to expect' in r.stderr
    empty = tmp_path / 'empty'
    empty.mkdir()
    r = run_cli('scan', '--device', verifier, '--expect', str(empty))
    assert r.returncode == 78 and 'no *.conf file in this directory' in r.stderr
    r = run_cli('scan', '--device', verifier, '--expect', str(fleet), '--duration', '2')
    assert r.returncode == 64 and "'--duration' cannot be combined with '--expect'" in r.stderr


def eid_report(eid_bytes: bytes, address: bytes = bytes.fromhex('0102030405c6')) -> bytes:
    """An LE Advertising Report of an Eddystone-EID frame (measured power -20), as a scanner's controller sends it."""
    ad = bytes.fromhex('0201060303aafe0d16aafe30ec') + eid_bytes
    report = bytes([1, 3, 1]) + address + bytes([len(ad)]) + ad + bytes([(-55) & 0xFF])
    params = bytes([0x02]) + report
    return bytes([4, 0x3E, len(params)]) + params


def expect_injected(tmp_path, reports: list[bytes], *configs) -> tuple[int, list[dict], str]:
    """`scan --expect CONFIGS --json` on Bumble's controller, which hears exactly REPORTS (a recording played to the
    receiver: what a replaying attacker's radio would make it hear)."""
    from bumble import hci
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, extended=False) as lab:
        # Options after the configs: --expect takes every argument up to the next option.
        p = subprocess.Popen([str(beacond_path()), 'scan', '--device', f'tcp:127.0.0.1:{port}', '--timeout', '4', '--json',
                              '--expect', *map(str, configs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: hci.HCI_LE_SET_SCAN_ENABLE_COMMAND in lab.opcodes(), 20, what='scanning enabled')
            lab.inject(*reports)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    return p.returncode, output_schema.lines('expect', out), err


def test_a_replayed_eid_is_never_heard_and_the_current_one_is_with_its_period_offset(tmp_path):
    write_key(tmp_path / 'keys' / 'shop.key')
    conf = tmp_path / 'eid.conf'
    conf.write_text(EID + HCI)
    now = int(time.time())
    # A recording of the beacon two periods (K = 10: 2 × 1024 s) ago: a dead or stolen beacon's frame, played back.
    code, lines, err = expect_injected(tmp_path, [eid_report(eid(KEY, 10, now - 2048))], conf)
    assert code == 3, err
    [entry] = [l for l in lines if l['kind'] == 'expect']
    assert entry['status'] == 'mismatch' and 'address' not in entry, entry
    [m] = entry['mismatches']
    assert m['differences'] == ["the EID of 2 periods ago by this scanner's clock (a recording replayed, or the beacon's "
                                "clock is behind): --expect takes the current period ±60 s"], m
    assert -2048 - 60 <= m['eid_period_offset_s'] <= -1025, m
    assert 'is on the air with other content: the EID of 2 periods ago' in err
    # The current period's EID is heard, its offset 0.
    code, lines, err = expect_injected(tmp_path, [eid_report(eid(KEY, 10, int(time.time())))], conf)
    assert code == 0, err
    [entry] = [l for l in lines if l['kind'] == 'expect']
    assert entry['status'] == 'heard' and entry['eid_period_offset_s'] == 0, entry


def test_two_configs_with_one_key_are_both_heard_and_a_config_named_twice_is_checked_once(tmp_path):
    write_key(tmp_path / 'keys' / 'shop.key')
    a, b = tmp_path / 'a.conf', tmp_path / 'b.conf'
    a.write_text(EID + HCI)
    b.write_text(EID.replace('measured_power = -20', 'measured_power = -20\n# the same beacon, checked from a second file') + HCI)
    code, lines, err = expect_injected(tmp_path, [eid_report(eid(KEY, 10, int(time.time())))], a, b, tmp_path, a)
    assert code == 0, err
    entries = [l for l in lines if l['kind'] == 'expect']
    # a.conf named twice and again through its directory: one expectation, so one series in the metrics.
    assert [(e['config'], e['status']) for e in entries] == [(str(a), 'heard'), (str(b), 'heard')], entries


def test_the_metrics_never_go_through_a_symlinked_directory(tmp_path):
    """The verifier runs as root and node_exporter's directory sits in the prometheus user's home: a symlink put there
    must not make it write anywhere else. The check's verdict stands; the metrics are refused, and say why."""
    conf = tmp_path / 'shop.conf'
    conf.write_text(IB + HCI)
    target = tmp_path / 'etc-cron.d'
    target.mkdir()
    (tmp_path / 'home').mkdir()
    (tmp_path / 'home' / 'node-exporter').symlink_to(target)
    code, _, err = expect_injected(tmp_path, [], conf, '--metrics', str(tmp_path / 'home' / 'node-exporter' / 'beacond-verify-hci1.prom'))
    assert code == 1, err
    assert (f"cannot write the metrics to {tmp_path}/home/node-exporter/beacond-verify-hci1.prom: open({tmp_path}/home/node-exporter): "
            f"{tmp_path}/home/node-exporter is a symbolic link (or not a directory), which is not followed") in err, err
    assert list(target.iterdir()) == []
    # A real directory of root's (this user's): written, mode 0644.
    (tmp_path / 'home' / 'node-exporter').unlink()
    code, _, err = expect_injected(tmp_path, [], conf, '--metrics', str(tmp_path / 'home' / 'node-exporter' / 'beacond-verify-hci1.prom'))
    assert code == 2 and (tmp_path / 'home' / 'node-exporter' / 'beacond-verify-hci1.prom').is_file(), err
