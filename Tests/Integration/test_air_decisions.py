"""One place decides what goes on the air (#52), on Bumble's controller playing the Pi's radio (a legacy-only CYW43455,
harness/personalities.py), heard by a second Bumble radio and read by independent decoders (bluetooth-data-tools'
resolver, bthome-ble):

- beside another program's scan (the controller then refuses beacond's random address, as a Pi's does while the kernel
  scans for Home Assistant), beacons with a private address (resolvable, Eddystone-EID) are never heard from the
  public address: they pause, `status` says so, and they come back once the scan has ended; a static beacon keeps the
  public address meanwhile;
- every encrypted BTHome frame heard decrypts under the address it was heard from;
- a damaged counters file, or a full state directory, leaves the iBeacons on the air and the self-report off (never in
  plaintext);
- a state directory restored from a backup repeats no (address, counter) pair.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest
from bthome_ble import BTHomeBluetoothDeviceData

from conftest import APPLE_UUID, beacond_path, free_port, ibeacon_bytes
from harness.lab import Lab, wait_for
from harness.personalities import CYW43455
from test_bthome import BINDKEY, counter, decode, frames, self_report
from test_eid import PREFIX as EID_PREFIX, write_key
from test_resolvable import IRK, resolves

PUBLIC = 'F0:F1:F2:F3:F4:F5'  # the lab radio's public address
PI = CYW43455


def ibeacon(minor: int, extra: str = '') -> str:
    return f'[[beacon]]\nuuid = "{APPLE_UUID}"\nmajor = 7\nminor = {minor}\n{extra}'


def heard_from(lab: Lab, match, since: float = 0.0) -> set[str]:
    """The addresses the second radio heard a frame from (`match` picks the frames) since `since`."""
    return {r.address.split('/')[0] for r in list(lab.received) if r.at >= since and match(r.data)}


def status(conf, run_dir) -> dict:
    r = subprocess.run([str(beacond_path()), 'status', '--json', '--config', str(conf)], capture_output=True, text=True,
                       timeout=60, env={**os.environ, 'RUNTIME_DIRECTORY': str(run_dir)})
    return json.loads(r.stdout)


def write_keys(tmp_path) -> None:
    write_key(tmp_path / 'keys' / 'shop.irk', IRK + '\n')
    write_key(tmp_path / 'keys' / 'shop.key')
    write_key(tmp_path / 'keys' / 'home.key', BINDKEY + '\n')


def test_private_beacons_pause_beside_another_scanner_and_come_back(tmp_path, processes, state_directory):
    write_keys(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + ibeacon(2, 'address = "resolvable"\nresolving_key_file = "shop.irk"\n')
                    + '[[beacon]]\nformat = "eddystone-eid"\nidentity_key_file = "shop.key"\nrotation_exponent = 1\n')
    static, private = ibeacon_bytes(major=7, minor=1), ibeacon_bytes(major=7, minor=2)
    is_eid = lambda d: d.startswith(EID_PREFIX)  # noqa: E731
    run_dir = tmp_path / 'run'
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', personality=PI) as lab:
        b = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}', env={'RUNTIME_DIRECTORY': str(run_dir)})
        wait_for(lambda: heard_from(lab, lambda d: d == static) and heard_from(lab, lambda d: d == private)
                 and heard_from(lab, is_eid), 15, what='the three beacons heard')
        lab.kernel_scan(True)
        wait_for(lambda: 'another program scans' in b.log(), 10, what='beacond to meet the refused address')
        t0 = time.monotonic()
        # The static beacon from the public address; the private ones paused, and said so. The window for "nothing of
        # theirs" starts once the static beacon is heard from the public address: that apply is the one that paused them
        # (on a busy machine it may come well after the log line).
        wait_for(lambda: PUBLIC in heard_from(lab, lambda d: d == static, t0), 10, what='the static beacon from the public address')
        t0 = min(r.at for r in list(lab.received) if r.at >= t0 and r.data == static and r.address.split('/')[0] == PUBLIC)
        st = wait_for(lambda: (s := status(conf, run_dir)) and not s['ok'] and s, 10, what='status to name the paused beacons')
        beacons = st['daemons'][0]['beacons']
        assert [x['on_air'] for x in beacons] == [True, False, False], beacons
        assert all('another program scans' in x['paused'] for x in beacons[1:]) and beacons[0]['paused'] is None, beacons
        assert any('beacon 2 is not on the air' in p and 'another program scans' in p for p in st['problems']), st['problems']
        time.sleep(4)  # two EID periods and many slots while the scan runs
        during = (heard_from(lab, lambda d: d == private, t0 + 0.5), heard_from(lab, is_eid, t0 + 0.5))
        assert during == (set(), set()), f'heard while paused: {during}'
        lab.kernel_scan(False)
        t1 = time.monotonic()
        wait_for(lambda: heard_from(lab, lambda d: d == private, t1) and heard_from(lab, is_eid, t1), 25,
                 what='the private beacons back after the scan')
        assert b.proc.poll() is None
    # Never the public address, before, during or after; the resolvable ones all resolve under the key.
    assert PUBLIC not in heard_from(lab, lambda d: d == private) | heard_from(lab, is_eid)
    assert all(resolves(IRK, a) for a in heard_from(lab, lambda d: d == private))


def test_every_bthome_frame_decrypts_under_the_address_it_was_heard_from(tmp_path, processes, state_directory):
    write_keys(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + self_report(encrypted=True))
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', personality=PI) as lab:
        b = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}')
        wait_for(lambda: frames(lab), 15, what='a BTHome frame')
        lab.kernel_scan(True)
        wait_for(lambda: 'another program scans' in b.log(), 10, what='beacond to meet the refused address')
        wait_for(lambda: PUBLIC in heard_from(lab, lambda d: d == ibeacon_bytes(major=7, minor=1)), 10, what='the iBeacon from the public address')
        time.sleep(3)
        lab.kernel_scan(False)
        t1 = time.monotonic()
        wait_for(lambda: [r for r in frames(lab) if r.at > t1], 25, what='the self-report back after the scan')
        heard = frames(lab)
        assert b.proc.poll() is None
    assert heard
    for r in heard:
        parser = BTHomeBluetoothDeviceData(bindkey=bytes.fromhex(BINDKEY))
        decode(parser, r)
        assert parser.bindkey_verified and not parser.decryption_failed, f'{r.address}: {r.data.hex()} does not decrypt there'
    assert PUBLIC not in {r.address.split('/')[0] for r in heard}


def test_damaged_counters_leave_the_ibeacons_on_the_air_and_the_self_report_off(tmp_path, processes, state_directory):
    write_keys(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + ibeacon(2) + self_report(encrypted=True))
    (state_directory / 'bthome-counters').write_text('# beacond\nC6:12:34:56:78:9A 12x\n')
    run_dir = tmp_path / 'run'
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', personality=PI) as lab:
        b = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}', env={'RUNTIME_DIRECTORY': str(run_dir)})
        wait_for(lambda: heard_from(lab, lambda d: d == ibeacon_bytes(major=7, minor=1))
                 and heard_from(lab, lambda d: d == ibeacon_bytes(major=7, minor=2)), 15, what='both iBeacons heard')
        st = wait_for(lambda: (s := status(conf, run_dir)) and s['daemons'] and s['daemons'][0]['phase'] == 'advertising' and s, 10,
                      what='status')
        beacons = st['daemons'][0]['beacons']
        assert [x['on_air'] for x in beacons] == [True, True, False] and 'bthome-counters:2' in beacons[2]['paused'], beacons
        assert not st['ok'] and any('beacon 3 is not on the air' in p for p in st['problems']), st['problems']
        time.sleep(11)  # a tick: tried again, refused again, said once
        assert b.log().count('The BTHome self-report stays off the air') == 1, b.log()
        assert frames(lab) == [], 'a self-report went out although its counters could not be kept'
        # Fixed: back at the next tick, encrypted.
        (state_directory / 'bthome-counters').write_text('# beacond\n')
        first = wait_for(lambda: frames(lab), 15, what='the self-report back once the file is fixed')[0]
        parser = BTHomeBluetoothDeviceData(bindkey=bytes.fromhex(BINDKEY))
        decode(parser, first)
        assert parser.bindkey_verified
        assert b.proc.poll() is None


def test_a_full_state_directory_leaves_the_ibeacons_on_the_air(tmp_path, processes, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip('NOT RUN: mounting a 32 KiB tmpfs as the full state directory needs root')
    write_keys(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + self_report(encrypted=True))
    state = tmp_path / 'state'
    state.mkdir()
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=32k,mode=0755', 'tmpfs', str(state)], check=True)
    try:
        monkeypatch.setenv('STATE_DIRECTORY', str(state))
        # A first run keeps the addresses and counters (as on a Pi that ran for months); then the disk fills up.
        port = free_port()
        with Lab(f'tcp-server:127.0.0.1:{port}', personality=PI) as lab:
            first = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}')
            wait_for(lambda: frames(lab), 15, what='a BTHome frame')
            assert first.stop() == 0
        with open(state / 'filler', 'wb') as f:
            try:
                f.write(bytes(64 * 1024))
            except OSError:
                pass
        port = free_port()
        with Lab(f'tcp-server:127.0.0.1:{port}', personality=PI) as lab:
            b = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}')
            try:
                wait_for(lambda: heard_from(lab, lambda d: d == ibeacon_bytes(major=7, minor=1)), 15, what='the iBeacon heard')
            except AssertionError as e:
                raise AssertionError(f'{e}; its log:\n{b.log()}') from None
            time.sleep(3)
            assert frames(lab) == [], 'a self-report went out although its counters could not be kept'
            assert 'The BTHome self-report stays off the air' in b.log(), b.log()
            assert b.proc.poll() is None
            b.stop()
    finally:
        subprocess.run(['umount', '-l', str(state)], check=False)


def test_a_restored_state_directory_repeats_no_nonce(tmp_path, processes, state_directory):
    write_keys(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + self_report(encrypted=True))
    backup = tmp_path / 'backup'
    sent: list[tuple[str, int, bytes]] = []

    def one_run() -> None:
        port = free_port()
        with Lab(f'tcp-server:127.0.0.1:{port}', personality=PI) as lab:
            b = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}')
            wait_for(lambda: frames(lab), 15, what='a BTHome frame')
            assert b.stop() == 0
            sent.extend({(r.address.split('/')[0], counter(r.data), r.data) for r in frames(lab)})

    one_run()
    shutil.copytree(state_directory, backup)  # the backup, taken after a first run
    time.sleep(1.1)
    one_run()
    before = len(sent)
    shutil.rmtree(state_directory)
    shutil.copytree(backup, state_directory)  # restored: its counters are older than the second run's
    time.sleep(1.1)
    one_run()
    old, new = sent[:before], sent[before:]
    assert new and old
    reused = {(a, c) for a, c, _ in new} & {(a, c) for a, c, _ in old}
    assert not reused, f'(address, counter) sent again after the restore: {sorted(reused)}'
    assert not {d for _, _, d in new} & {d for _, _, d in old}, 'a frame byte-identical to an earlier one'


def test_a_controller_back_within_the_period_gets_the_same_private_address(tmp_path, processes, state_directory):
    """bug (by reading, #52): each connection chose its own private addresses, so a controller that went away and came
    back within an address period put the beacon on the air from a new one, a second address for the same period."""
    write_keys(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(2, 'address = "resolvable"\nresolving_key_file = "shop.irk"\n'))
    frame = ibeacon_bytes(major=7, minor=2)
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', personality=PI) as lab:
        b = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}')
        before = wait_for(lambda: heard_from(lab, lambda d: d == frame), 15, what='the resolvable beacon heard')
        enables = len(lab.enabled_at())
        lab.disconnect(reopen_after=1.0)
        wait_for(lambda: len(lab.enabled_at()) > enables, 15, what='advertising enabled again after the controller came back')
        t = time.monotonic()
        after = wait_for(lambda: heard_from(lab, lambda d: d == frame, t), 10, what='the beacon heard after the reconnect')
        assert b.proc.poll() is None
    assert len(before) == 1 and after == before, (before, after)
    assert all(resolves(IRK, a) for a in before)
