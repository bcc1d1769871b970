"""Home Assistant's own iBeacon Tracker coordinator decides on what a second radio heard from beacond.

HA's coordinator (home-assistant/core `ibeacon/coordinator.py`) drops a new fixed-MAC iBeacon whose device has no name,
unless its UUID is on the "allow nameless UUIDs" list; HA's parsers alone (test_addresses.py) cannot show that rule.
Here Home Assistant 2024.3.3 (the last release on Python 3.11, with today's rule and list) runs in its own venv
(Tests/Integration/ha/): its core, its bluetooth manager, its merging of an advertisement with its scan
response (as for an ESPHome proxy, which forwards each raw report), and the coordinator itself.

The advertisements are the reports Bumble's scanner radio heard. Bumble's link does not carry a real scan response
(its scanner makes one up from the advertising data), so each scan response is the one the controller holds for that
advertisement at that moment (its state: data, scan response data, address and whether it is scannable), which is
what it answers a scan request with; on a legacy controller it is sampled slot by slot while beacond time-slices.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import APPLE_UUID, ROOT, ibeacon_bytes
from harness.lab import Lab, wait_for
from harness.personalities import AX200, CYW43455
from test_beacons import heard_all, name_response

HERE = Path(__file__).resolve().parent
HA_PYTHON = Path(os.environ.get('BEACOND_HA_PYTHON', ROOT / '.venv-ha' / 'bin' / 'python'))
UUID = APPLE_UUID.lower()
NAMED = {7: 'Shelf 7', 8: 'Till 2'}
CONF = ''.join(f'[[beacon]]\nuuid = "{APPLE_UUID}"\nmajor = 1\nminor = {m}\n' + (f'name = "{NAMED[m]}"\n' if m in NAMED else '')
               for m in (7, 8, 9))
FRAMES = {m: ibeacon_bytes(major=1, minor=m) for m in (7, 8, 9)}


def home_assistant(reports: list[dict], allow_nameless_uuids: list[str] | None = None) -> dict[str, str]:
    """unique_id → name of every device HA's coordinator created from these reports."""
    if not HA_PYTHON.exists():
        pytest.fail(f"Home Assistant's venv is missing ({HA_PYTHON}): run `make venv-ha` (or set BEACOND_HA_PYTHON)",
                    pytrace=False)
    r = subprocess.run([str(HA_PYTHON), str(HERE / 'ha' / 'coordinator.py')], capture_output=True, text=True,
                       timeout=120, input=json.dumps({'reports': reports, 'allow_nameless_uuids': allow_nameless_uuids or []}))
    assert r.returncode == 0, r.stderr
    return {d['unique_id']: d['name'] for d in json.loads(r.stdout)['new']}


def scan_responses(lab: Lab, wanted: set[tuple[str, bytes]]) -> dict[tuple[str, bytes], bytes | None]:
    """(address, advertising data) → the scan response the controller held with it (None: not scannable), sampled from
    the controller's state until every wanted pair was seen on the air."""
    got: dict[tuple[str, bytes], bytes | None] = {}

    def sample() -> bool:
        s = lab.state()
        on = []
        if s['legacy']['enabled']:
            a = s['legacy']  # ADV_IND (0) and ADV_SCAN_IND (2) answer scan requests; ADV_NONCONN_IND (3) does not
            on.append((a['random_address'], a['data'], a['scan_response'] if a['type'] in (0, 2) else None))
        for st in s['sets'].values():
            if st['enabled']:  # advertising event properties bit 1: scannable
                on.append((st['random_address'], st['data'], st['scan_response'] if st['properties'] & 0x02 else None))
        for address, data, response in on:
            got[(str(address).split('/')[0], data)] = response
        return wanted <= got.keys()
    wait_for(sample, 10, what=f'the controller to hold each of {len(wanted)} advertisements')
    return got


@pytest.mark.parametrize('personality', [CYW43455, AX200], ids=str)
def test_home_assistant_makes_a_device_of_each_named_beacon_and_of_a_nameless_one_only_when_its_uuid_is_allowed(
        tmp_path, processes, state_directory, personality):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(CONF)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', personality=personality) as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        heard = heard_all(lab, list(FRAMES.values()), timeout=10)
        address = {m: next(iter(heard[f])).split('/')[0] for m, f in FRAMES.items()}
        assert all(len(heard[f]) == 1 for f in FRAMES.values()) and len(set(address.values())) == 3, heard
        rssi = {r.data: r.rssi for r in list(lab.received)}
        responses = scan_responses(lab, {(address[m], f) for m, f in FRAMES.items()})
    for m, f in FRAMES.items():
        # A named beacon answers with its name. On a legacy controller the one advertiser stays scannable while
        # beacond time-slices, so a nameless beacon's slot answers with an empty scan response; with sets it is not
        # scannable at all.
        nameless = b'' if personality is CYW43455 else None
        assert responses[(address[m], f)] == (name_response(NAMED[m]) if m in NAMED else nameless), m
    # What an actively scanning proxy forwards, twice over: each advertisement, then its scan response if it has one.
    reports = []
    for _ in range(2):
        for m, f in FRAMES.items():
            for data in (f, responses[(address[m], f)]):
                if data is not None:
                    reports.append({'address': address[m], 'address_type': 1, 'rssi': rssi[f], 'data': data.hex()})

    def device(m: int, name: str) -> tuple[str, str]:
        return f'{UUID}_1_{m}_{address[m]}', f'{name} {address[m].replace(":", "")[-4:]}'

    # HA's default: the named beacons become devices under their names; the nameless one is dropped.
    assert home_assistant(reports) == dict(device(m, n) for m, n in NAMED.items())
    # With the UUID on the allow-list, every beacon, the nameless one too. Each is made at its first advertisement,
    # before its scan response came, so each is named after its identity.
    assert home_assistant(reports, allow_nameless_uuids=[UUID]) == dict(device(m, f'{UUID}_1_{m}') for m in FRAMES)
