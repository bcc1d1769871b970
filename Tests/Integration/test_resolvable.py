"""address = "resolvable" (#44): a beacon private to strangers and known to the shop's gateways. beacond runs a
resolvable iBeacon on a Bumble controller with advertising sets and on a legacy-only one (time slices); a second
Bumble radio hears it. The addresses heard are checked with bluetooth-data-tools' resolver (what Home Assistant's
Private BLE Device runs), given the key in the form `beacond irk` prints for Home Assistant: every one resolves,
none under another key, and a new one comes every address_rotation_s. `scan --expect` says HEARD for the beacon and
MISMATCH (exit 3) for its frame replayed from another address; `scan --json --eid-keys` names the key."""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import run_cli
from harness.lab import Lab, wait_for
import output_schema
from test_beacons import IB, IB_BYTES
from test_eid import write_key
from test_expect import expect, expect_injected, two_radios  # noqa: F401 (a fixture)
from test_home_assistant import HA_PYTHON, HERE

IRK = '8f2a5c0e19b34d7ea6c1f0d2b3e4a596'
WRONG = 'ec0234a357c8ad05341010a60a397d9b'
RESOLVABLE = IB + 'address = "resolvable"\nresolving_key_file = "shop.irk"\n'


def resolves(key_hex: str, address: str) -> bool:
    from bluetooth_data_tools import get_cipher_for_irk, resolve_private_address
    return resolve_private_address(get_cipher_for_irk(bytes.fromhex(key_hex)), address)


def home_assistant_form(conf, form: str = 'Home Assistant') -> str:
    """The config's resolving key as `beacond irk` prints it for Home Assistant's Private BLE Device (or in base64)."""
    out = run_cli('irk', '-c', str(conf), check=True).stdout
    return re.search(form + r'[^\n]*?  ([0-9a-f]{32}|[A-Za-z0-9+/]{22}==)$', out, re.M).group(1)


def addresses_heard(lab: Lab, frame: bytes) -> list[tuple[float, str]]:
    """Each address the frame came from, with when it was first heard, in order."""
    first: dict[str, float] = {}
    for r in list(lab.received):
        if r.data == frame:
            first.setdefault(r.address.split('/')[0], r.at)
    return sorted((t, a) for a, t in first.items())


@pytest.mark.parametrize('extended', [True, False], ids=['extended', 'legacy'])
def test_the_addresses_resolve_under_the_key_alone_and_change_every_rotation(tmp_path, processes, extended):
    write_key(tmp_path / 'keys' / 'shop.irk', IRK + '\n')
    conf = tmp_path / 'beacond.conf'
    conf.write_text(RESOLVABLE + '[advertising]\naddress_rotation_s = 2\n')
    assert home_assistant_form(conf) == IRK
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', extended=extended) as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        heard = wait_for(lambda: len(addresses_heard(lab, IB_BYTES)) >= 4 and addresses_heard(lab, IB_BYTES), 20,
                         what='four addresses of the beacon')
        if extended:
            # A rotation takes the set off for a moment (its new address is written while it is disabled): a loaded
            # CI run read the state just then and found no set enabled. The set must come back, from an address of the key.
            sets = wait_for(lambda: [s['random_address'] for s in lab.state()['sets'].values() if s['enabled']], 5,
                            what='the set enabled (a rotation disables it for a moment)')
            assert len(sets) == 1 and resolves(IRK, sets[0]), sets
        assert b.stop() == 0
    addresses = [a for _, a in heard]
    assert len(set(addresses)) == len(addresses)
    assert all(resolves(IRK, a) for a in addresses), addresses
    assert not any(resolves(WRONG, a) for a in addresses), addresses
    # A new address every 2 s: the gaps between the first sightings of consecutive addresses (the first rotation
    # comes 2 s after the start, at the latest; the scanner's sightings are at most one interval late).
    gaps = [round(t2 - t1, 2) for (t1, _), (t2, _) in zip(heard, heard[1:])]
    print(f'\naddresses {addresses}, gaps {gaps} s')
    assert all(1.5 <= g <= 2.6 for g in gaps[1:]), gaps


def test_scan_expect_hears_the_beacon_and_names_a_copy_from_another_address(tmp_path, processes, two_radios):  # noqa: F811
    lab, radio, verifier = two_radios
    write_key(tmp_path / 'keys' / 'shop.irk', IRK + '\n')
    conf = tmp_path / 'shop7.conf'
    conf.write_text(RESOLVABLE + '[controller]\nbackend = "hci"\n')
    processes('run', '-c', str(conf), '-d', radio)
    wait_for(lambda: any(s['enabled'] for s in lab.state()['sets'].values()), 10, what='the beacon on the air')
    code, lines, err = expect(verifier, str(conf))
    assert code == 0, err
    [entry] = [l for l in lines if l['kind'] == 'expect']
    assert entry['status'] == 'heard' and entry['resolving_key_file'] == 'shop.irk'
    assert resolves(IRK, entry['address'])
    # `scan --json` with the keyring: the frame's address resolves under the key, by its name.
    keyring = tmp_path / 'keys.conf'
    keyring.write_text('[[beacon]]\nname = "shop7-door"\nidentity_key_file = "shop.irk"\n'
                       '[[beacon]]\nname = "other"\nidentity_key = "' + WRONG + '"\n')
    r = run_cli('scan', '--device', verifier, '--duration', '3', '--json', '--eid-keys', str(keyring))
    assert r.returncode == 0, r.stderr
    ibeacons = [l for l in output_schema.lines('scan', r.stdout) if l.get('kind') == 'ibeacon']
    assert ibeacons and all(l['address_resolved_by'] == 'shop7-door' and 'resolved' not in l for l in ibeacons), ibeacons

    # The same frame replayed from an address of another key, and from a static one: a copy, named, exit 3.
    for address in ('70:81:94:0D:FB:AA', 'C6:12:34:56:78:9A'):
        code, lines, err = expect_injected(tmp_path, [ibeacon_report(IB_BYTES, address)], conf)
        assert code == 3, err
        [entry] = [l for l in lines if l['kind'] == 'expect']
        assert entry['status'] == 'mismatch' and entry['mismatches'][0]['address'] == address, entry
        assert f'from {address} (random), which does not resolve' in entry['mismatches'][0]['differences'][0]
        assert address in err


def ibeacon_report(data: bytes, address: str) -> bytes:
    """An LE Advertising Report (ADV_NONCONN_IND from a random address), as a scanner's controller sends it."""
    report = bytes([1, 3, 1]) + bytes.fromhex(address.replace(':', ''))[::-1] + bytes([len(data)]) + data + bytes([(-55) & 0xFF])
    params = bytes([0x02]) + report
    return bytes([4, 0x3E, len(params)]) + params


def test_home_assistants_private_ble_device_tracks_two_rotations_as_one_device(tmp_path, processes):
    """Home Assistant's own integration (in its venv, ha/private_ble_device.py), given the key as `beacond irk`
    prints it (hex, and base64), follows the beacon across a rotation; another key finds nothing."""
    if not HA_PYTHON.exists():
        pytest.fail(f"Home Assistant's venv is missing ({HA_PYTHON}): run `make venv-ha` (or set BEACOND_HA_PYTHON)", pytrace=False)
    write_key(tmp_path / 'keys' / 'shop.irk', IRK + '\n')
    conf = tmp_path / 'beacond.conf'
    conf.write_text(RESOLVABLE + '[advertising]\naddress_rotation_s = 2\n')
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        wait_for(lambda: len(addresses_heard(lab, IB_BYTES)) >= 3, 20, what='three addresses of the beacon')
        received = list(lab.received)
    # The second and third addresses: each heard from its start.
    (_, a), (_, b) = addresses_heard(lab, IB_BYTES)[1:3]
    rotations = [[{'address': x, 'address_type': 1, 'rssi': r.rssi, 'data': r.data.hex()}
                  for r in received if r.data == IB_BYTES and r.address.split('/')[0] == x][:3] for x in (a, b)]

    def home_assistant(irk: str) -> dict:
        r = subprocess.run([str(HA_PYTHON), str(HERE / 'ha' / 'private_ble_device.py')], capture_output=True, text=True,
                           timeout=120, input=json.dumps({'irk': irk, 'rotations': rotations}))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)
    for form in ('Home Assistant', 'base64'):
        out = home_assistant(home_assistant_form(conf, form))
        assert out['flow'] == [['user', {}], [None, None, None]], out
        assert out['entry']['unique_id'] == IRK and out['devices'] == 1, out
        assert out['tracked'] == [{'state': 'home', 'current_address': a}, {'state': 'home', 'current_address': b}], out
    assert home_assistant(WRONG)['flow'][1][:2] == ['user', {'irk': 'irk_not_found'}]
