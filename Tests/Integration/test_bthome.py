"""beacond's health as BTHome v2 on Bumble's controller, decoded by bthome-ble 3.8.0 (the parser Home Assistant 2024.3.3
runs, pinned in requirements.txt) as the second radio hears it: plain, and encrypted with AES-CCM under the bindkey
(verified and read with it, no values without it or with another key); the values (the beacons on the air beside the
self-report, a problem while a beacon has no uuid yet, beacond's uptime growing); a new frame with each change and at
least every minute; the counter above every earlier one after a restart, a kill included, so that one parser (as Home
Assistant keeps one per device) takes the new frames. And Home Assistant's own BTHome integration (Tests/Integration/ha/
bthome.py, in HA's venv) makes a device with those sensors from beacond's frames, asking for the bindkey when encrypted.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from bthome_ble import BTHomeBluetoothDeviceData
from bluetooth_data_tools import parse_advertisement_data_tuple
from home_assistant_bluetooth import BluetoothServiceInfoBleak

from conftest import APPLE_UUID, kept_addresses
from harness.lab import Lab, wait_for
from test_home_assistant import HA_PYTHON, HERE, scan_responses

BINDKEY = '5f0b2c9d31e84a7690c1d2e3f4a5b6c7'
UUID_FCD2 = '0000fcd2-0000-1000-8000-00805f9b34fb'


def ibeacon(minor: int) -> str:
    return f'[[beacon]]\nuuid = "{APPLE_UUID}"\nmajor = 7\nminor = {minor}\n'


def self_report(name: str | None = None, encrypted: bool = False) -> str:
    return ('[[beacon]]\nformat = "bthome"\n' + (f'name = "{name}"\n' if name else '')
            + ('bindkey_file = "home.key"\n' if encrypted else ''))


def write_key(tmp_path: Path) -> None:
    keys = tmp_path / 'keys'
    keys.mkdir(exist_ok=True)
    (keys / 'home.key').write_text(BINDKEY + '\n')
    os.chmod(keys / 'home.key', 0o600)


def frames(lab: Lab) -> list:
    """The BTHome frames heard, in order: each report whose data holds service data for 0xFCD2."""
    return [r for r in list(lab.received) if b'\x16\xd2\xfc' in r.data]


def service_data(data: bytes) -> bytes:
    """The service data under 0xFCD2 as Home Assistant's parsing gives it (without the UUID), read by
    bluetooth-data-tools, the parser HA runs on every advertisement."""
    return parse_advertisement_data_tuple((data,))[2][UUID_FCD2]


def counter(data: bytes) -> int:
    return int.from_bytes(service_data(data)[-8:-4], 'little')


def decode(parser: BTHomeBluetoothDeviceData, r, name: str = 'beacond') -> dict:
    """What bthome-ble makes of one report: its sensor and binary sensor values by key. bthome-ble keeps the last
    values of a device between updates: a copy is taken, and only this update's keys are new."""
    info = BluetoothServiceInfoBleak(name=name, address=r.address.split('/')[0], rssi=r.rssi, manufacturer_data={},
                                     service_data={UUID_FCD2: service_data(r.data)}, service_uuids=[], source='lab',
                                     device=None, advertisement=None, connectable=False, time=r.at, tx_power=None)
    before = parser.packet_id
    update = parser.update(info)
    values = {k.key: v.native_value for k, v in update.entity_values.items()}
    values |= {k.key: v.native_value for k, v in update.binary_entity_values.items()}
    values['accepted'] = parser.packet_id != before or before is None
    return values


def test_plain_frames_are_read_by_bthome_ble_and_renewed_every_minute(tmp_path, processes, state_directory):
    """Slow (about 55 s): waits for the frame that renews the first (the fifth telemetry tick, 50 s on)."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + ibeacon(2) + self_report(name='shop7-pi'))
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        first = wait_for(lambda: frames(lab), 10, what='a BTHome frame')[0]
        address = kept_addresses(state_directory)['bthome']
        assert first.address.split('/')[0] == address and service_data(first.data)[0] == 0x40
        parser = BTHomeBluetoothDeviceData()
        values = decode(parser, first)
        assert values['count_1'] == 2 and values['problem'] is False and values['count_2'] <= 10, values
        # At least once a minute a new frame: the next packet id and the uptime of then, nothing else changed.
        later = wait_for(lambda: [r for r in frames(lab) if r.data != first.data], 75, interval=0.5, what="the minute's frame")[0]
        assert later.at - first.at <= 60, later.at - first.at
        again = decode(parser, later)
        assert again['accepted'] and again['packet_id'] == (values['packet_id'] + 1) % 256, again
        assert again['count_1'] == 2 and again['problem'] is False and 45 <= again['count_2'] <= 60, again
        assert b.proc.poll() is None


def test_encrypted_frames_verify_only_with_the_bindkey_and_follow_a_reload(tmp_path, processes, state_directory):
    write_key(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + self_report(encrypted=True))
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        first = wait_for(lambda: frames(lab), 10, what='a BTHome frame')[0]
        assert first.address.split('/')[0] == kept_addresses(state_directory)['bthome']
        assert service_data(first.data)[0] == 0x41 and len(first.data) == 27, first.data.hex()
        keyed = BTHomeBluetoothDeviceData(bindkey=bytes.fromhex(BINDKEY))
        values = decode(keyed, first)
        assert keyed.bindkey_verified and not keyed.decryption_failed
        assert values['count_1'] == 1 and values['problem'] is False and values['count_2'] <= 10, values
        # Without the key nothing but the signal; with another key, a failed decryption and nothing either.
        keyless = BTHomeBluetoothDeviceData()
        assert set(decode(keyless, first)) == {'signal_strength', 'accepted'} and not keyless.bindkey_verified
        wrong = BTHomeBluetoothDeviceData(bindkey=bytes(16))
        assert set(decode(wrong, first)) == {'signal_strength', 'accepted'} and wrong.decryption_failed
        # A reload 11 s later (after a telemetry tick) adds a beacon and one without a uuid yet: a new frame at once,
        # which the same parser takes (its counter is higher).
        time.sleep(11)
        conf.write_text(ibeacon(1) + ibeacon(2) + '[[beacon]]\nmajor = 7\nminor = 3\n' + self_report(encrypted=True))
        b.signal(signal.SIGHUP)
        later = wait_for(lambda: [r for r in frames(lab) if r.data != first.data], 10, what='the frame after the reload')[0]
        again = decode(keyed, later)
        assert again['accepted'] and keyed.bindkey_verified and counter(later.data) > counter(first.data)
        assert again['count_1'] == 2 and again['problem'] is True and again['count_2'] >= values['count_2'] + 10, again
        assert b.proc.poll() is None
    assert BINDKEY not in b.log() and BINDKEY.upper() not in b.log()


@pytest.mark.parametrize('stop', [signal.SIGTERM, signal.SIGKILL], ids=['stopped', 'killed'])
def test_after_a_restart_the_counter_is_above_every_earlier_one(tmp_path, processes, state_directory, stop):
    write_key(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + self_report(encrypted=True))
    sock = tmp_path / 'hci.sock'
    keyed = BTHomeBluetoothDeviceData(bindkey=bytes.fromhex(BINDKEY))
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        first = wait_for(lambda: frames(lab), 10, what='a BTHome frame')[0]
        decode(keyed, first)
        assert keyed.bindkey_verified
        b.signal(stop)
        b.wait(10)
        before = {r.data for r in frames(lab)}
        last = max(counter(d) for d in before)
        # The same state directory, as the unit's restart has it. Its open resets the controller: what is heard once
        # it advertises is the new run's.
        again = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        wait_for(lambda: 'Advertising 2 beacons' in again.log(), 10, what='the new run on the air')
        lab.clear_received()
        new = wait_for(lambda: frames(lab), 10, what="the new run's frame")[0]
        assert counter(new.data) > last, (counter(new.data), last)
        # bthome-ble drops a frame whose counter went down; this one it takes, with its values.
        values = decode(keyed, new)
        assert keyed.encryption_counter == counter(new.data) and values['count_1'] == 1, values
    # The counters file: the address and the end of what was reserved, above the counter on the air.
    kept = dict(line.split() for line in (state_directory / 'bthome-counters').read_text().splitlines() if not line.startswith('#'))
    assert int(kept[kept_addresses(state_directory)['bthome']]) > counter(new.data)


def home_assistant(given: dict) -> dict:
    if not HA_PYTHON.exists():
        pytest.fail(f"Home Assistant's venv is missing ({HA_PYTHON}): run `make venv-ha` (or set BEACOND_HA_PYTHON)", pytrace=False)
    r = subprocess.run([str(HA_PYTHON), str(HERE / 'ha' / 'bthome.py')], capture_output=True, text=True, timeout=120,
                       input=json.dumps(given))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize('encrypted', [False, True], ids=['plain', 'encrypted'])
def test_home_assistant_makes_a_device_with_the_sensors_from_the_self_report(tmp_path, processes, state_directory, encrypted):
    write_key(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ibeacon(1) + self_report(name='shop7-pi', encrypted=encrypted))
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        first = wait_for(lambda: frames(lab), 10, what='a BTHome frame')[0]
        address = first.address.split('/')[0]
        name = scan_responses(lab, {(address, first.data)})[(address, first.data)]
        # A second frame for after the device is added: a reload that adds a beacon, 11 s on.
        time.sleep(11)
        conf.write_text(ibeacon(1) + ibeacon(2) + self_report(name='shop7-pi', encrypted=encrypted))
        b.signal(signal.SIGHUP)
        later = wait_for(lambda: [r for r in frames(lab) if r.data != first.data], 10, what='the frame after the reload')[0]

    def report(data: bytes) -> dict:
        return {'address': address, 'address_type': 1, 'rssi': first.rssi, 'data': data.hex()}
    out = home_assistant({'address': address, 'bindkey': BINDKEY if encrypted else None, 'wrong_bindkey': '00' * 16,
                          'first': [report(first.data), report(name)], 'later': [report(later.data), report(name)]})
    steps = [(s['step_id'], s['errors']) for s in out['flow']]
    if encrypted:
        # HA asks for the bindkey, refuses another key, and takes beacond's.
        assert steps == [('get_encryption_key', {}), ('get_encryption_key', {'bindkey': 'decryption_failed'}), (None, None)], out['flow']
        assert out['entry']['data'] == {'bindkey': BINDKEY}
    else:
        assert steps == [('bluetooth_confirm', None), (None, None)], out['flow']
        assert out['entry']['data'] == {}
    title = f'shop7-pi {address.replace(":", "")[-4:]}'
    assert out['entry']['unique_id'] == address and out['entry']['title'] == title
    assert [(d['name'], d['model']) for d in out['device']] == [(title, 'BTHome sensor')]
    entities = {e['unique_id'].split('-', 1)[1]: e for e in out['entities']}
    assert set(entities) == {'count_1', 'count_2', 'problem', 'packet_id', 'signal_strength'}, entities
    # The frame after the reload: two beacons on the air, no problem, beacond's uptime (10 s or more).
    assert entities['count_1']['state'] == '2' and entities['problem']['state'] == 'off', entities
    assert entities['problem']['device_class'] == 'problem' and int(entities['count_2']['state']) >= 10, entities
    assert entities['count_1']['entity_id'] == f'sensor.shop7_pi_{address.replace(":", "")[-4:].lower()}_count_1'
