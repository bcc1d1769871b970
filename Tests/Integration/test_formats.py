"""beacond advertising AltBeacon and Eddystone-UID ([beacon] format) on Bumble's controller, extended and legacy-only.

The expected frames are written out from the specifications in these tests (test_scan.altbeacon_bytes and the
Eddystone-UID layout below), the controller's state says what is on the air, the second radio must hear it, and the
bytes are decoded independently: beacontools for Eddystone, the Android Beacon Library's AltBeacon layout.
"""
from __future__ import annotations

import json
import signal

import pytest

from conftest import APPLE_UUID, ibeacon_bytes, run_cli
from harness.lab import Lab
import output_schema
from test_run import heard, on_air
from test_scan import altbeacon_bytes, altbeacon_decode

NAMESPACE = '00112233445566778899'
INSTANCE = 'a1b2c3d4e5f6'


def eddystone_uid_bytes(namespace: str, instance: str, power0m: int) -> bytes:
    """02 01 06 | 03 03 AA FE | 17 16 AA FE 00 <power at 0 m> <namespace> <instance> 00 00, from the Eddystone spec."""
    return (bytes.fromhex('0201060303aafe1716aafe00') + power0m.to_bytes(1, 'big', signed=True)
            + bytes.fromhex(namespace) + bytes.fromhex(instance) + b'\x00\x00')


ALT_CONF = (f'[beacon]\nformat = "altbeacon"\nuuid = "{APPLE_UUID}"\nmajor = 513\nminor = 1027\nmeasured_power = -61\n'
            'company_id = 0x0118\nreserved = 7\n')
EDDY_CONF = f'[beacon]\nformat = "eddystone-uid"\nnamespace = "{NAMESPACE}"\ninstance = "{INSTANCE.upper()}"\nmeasured_power = -20\n'
ALT = altbeacon_bytes(APPLE_UUID, 513, 1027, -61, reserved=7)
EDDY = eddystone_uid_bytes(NAMESPACE, INSTANCE, -20)


@pytest.mark.parametrize('extended', [True, False], ids=['extended', 'legacy'])
@pytest.mark.parametrize('text,expected', [(ALT_CONF, ALT), (EDDY_CONF, EDDY)], ids=['altbeacon', 'eddystone-uid'])
def test_each_format_goes_on_the_air_with_exact_bytes(tmp_path, processes, extended, text, expected):
    from beacontools import parse_packet
    conf = tmp_path / 'beacond.conf'
    conf.write_text(text)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', extended=extended) as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        family, st = on_air(lab, expected)
        assert family == ('extended' if extended else 'legacy')
        data = heard(lab, expected)
        assert len(data) == 31
        if expected is ALT:
            assert altbeacon_decode(data) == {'uuid': APPLE_UUID.replace('-', '').lower(), 'major': 513, 'minor': 1027,
                                              'power': -61, 'data': 7}
        else:
            uid = parse_packet(data)
            assert (uid.namespace, uid.instance, uid.tx_power) == (NAMESPACE, INSTANCE, -20)
        assert b.proc.poll() is None


def test_payload_and_check_config_speak_each_format(tmp_path):
    alt, eddy = tmp_path / 'alt.conf', tmp_path / 'eddy.conf'
    alt.write_text(ALT_CONF)
    eddy.write_text(EDDY_CONF)
    assert run_cli('payload', '-c', str(alt), check=True).stdout.strip() == ALT.hex()
    assert run_cli('payload', '-c', str(eddy), check=True).stdout.strip() == EDDY.hex()
    j = output_schema.loads('payload', run_cli('payload', '-c', str(eddy), '--format', 'json', check=True).stdout)
    assert (j['format'], j['namespace'], j['instance'], j['measured_power_0m']) == ('eddystone-uid', NAMESPACE, INSTANCE, -20)
    j = output_schema.loads('payload', run_cli('payload', '-c', str(alt), '--format', 'json', check=True).stdout)
    assert (j['format'], j['company_id'], j['reserved'], j['measured_power']) == ('altbeacon', 0x0118, 7, -61)
    # Eddystone-TLM with scan --json's names (temperature_c, battery_mv): one vocabulary for both commands.
    tlm = tmp_path / 'tlm.conf'
    tlm.write_text('[beacon]\nformat = "eddystone-tlm"\n')
    j = output_schema.loads('payload', run_cli('payload', '-c', str(tlm), '--format', 'json', check=True).stdout)
    assert j['format'] == 'eddystone-tlm' and j['battery_mv'] == 0 and 'temperature_c' in j and 'temperature' not in j, j
    out = run_cli('check-config', '-c', str(eddy), check=True).stdout
    assert 'format          eddystone-uid' in out and '-20 dBm at 0 m' in out, out
    wrong = tmp_path / 'wrong.conf'
    wrong.write_text(EDDY_CONF + 'major = 1\n')
    r = run_cli('check-config', '-c', str(wrong))
    assert r.returncode == 78
    assert f"{wrong}:6:1: error: 'major' in [beacon] belongs to formats \"ibeacon\" and \"altbeacon\", not to this beacon's format \"eddystone-uid\"" in r.stderr


def test_a_reload_changes_the_format_on_the_air(tmp_path, processes, notify):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(f'[beacon]\nuuid = "{APPLE_UUID}"\nmajor = 513\nminor = 1027\nmeasured_power = -61\n')
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'NOTIFY_SOCKET': notify.path})
        on_air(lab, ibeacon_bytes(major=513, minor=1027, power=-61))
        for text, expected in ((ALT_CONF, ALT), (EDDY_CONF, EDDY)):
            conf.write_text(text)
            b.signal(signal.SIGHUP)
            on_air(lab, expected)
            heard(lab, expected)
        status = notify.wait_for('STATUS=Advertising Eddystone-UID')
        assert f'namespace {NAMESPACE} instance {INSTANCE}' in status, status
        assert b.proc.poll() is None
