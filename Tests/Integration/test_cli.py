"""The tools around the daemon, run as a user runs them: exit codes, output, files on disk."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import uuid as uuidlib
from pathlib import Path

import pytest
from beacontools import parse_packet
from bumble.core import AdvertisingData

from conftest import APPLE_UUID, FIXTURES, ROOT, beacond_path, config_text, ibeacon_bytes, run_cli
import output_schema

UUID_RE = re.compile(r'^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$')


@pytest.mark.parametrize('args,golden', [
    (['--help'], 'help.txt'), (['help', 'run'], 'help-run.txt'), (['gen-uuid', '--help'], 'help-gen-uuid.txt'),
    (['help', 'payload'], 'help-payload.txt'), (['help', 'check-config'], 'help-check-config.txt'),
    (['gen-key', '--help'], 'help-gen-key.txt'), (['irk', '--help'], 'help-irk.txt'),
    (['scan', '--help'], 'help-scan.txt'), (['help', 'status'], 'help-status.txt'), (['reload', '--help'], 'help-reload.txt'),
])
def test_help_text_matches_golden_file(args, golden):
    r = run_cli(*args)
    assert r.returncode == 0 and r.stderr == ''
    assert r.stdout == (FIXTURES / 'help' / golden).read_text()


def test_usage_error_exits_64_with_usage_on_stderr():
    r = run_cli('run', '--frobnicate')
    assert r.returncode == 64 and r.stdout == ''
    assert r.stderr == ("Error: unknown option '--frobnicate'\n"
                        "Usage: beacond run [--config PATH] [--device SPEC] [--log-level LEVEL]\n"
                        "  See 'beacond --help' for more information.\n")


@pytest.mark.parametrize('major,minor,power', [(1, 1, -59), (0, 0, -127), (65535, 65535, 20), (258, 772, 0)])
def test_payload_decodes_identically_in_independent_decoders(tmp_path, major, minor, power):
    conf = tmp_path / 'b.conf'
    conf.write_text(config_text(major=major, minor=minor, measured_power=power))
    r = run_cli('payload', '--config', str(conf))
    assert r.returncode == 0
    data = bytes.fromhex(r.stdout.strip())
    assert data == ibeacon_bytes(major=major, minor=minor, power=power)
    decoded = parse_packet(data)  # beacontools
    assert (str(decoded.uuid).upper(), decoded.major, decoded.minor, decoded.tx_power) == (APPLE_UUID, major, minor, power)
    ad = AdvertisingData.from_bytes(data)  # Bumble's AD parser
    assert ad.get(AdvertisingData.FLAGS) == 0x06
    company, payload = ad.get(AdvertisingData.MANUFACTURER_SPECIFIC_DATA)
    assert company == 0x004C and payload[:2] == b'\x02\x15' and len(payload) == 23


def test_payload_hcitool_lines_carry_the_same_bytes(tmp_path):
    conf = tmp_path / 'b.conf'
    conf.write_text(config_text(interval_ms=200, connectable=True) + '\n[controller]\ndevice = "hci1"\n')
    lines = run_cli('payload', '-c', str(conf), '--format', 'hcitool', check=True).stdout.splitlines()
    assert lines[0] == 'hcitool -i hci1 cmd 0x08 0x0006 40 01 40 01 00 00 00 00 00 00 00 00 00 07 00'  # 320 units, ADV_IND
    data_cmd = lines[1].split()
    assert data_cmd[:6] == ['hcitool', '-i', 'hci1', 'cmd', '0x08', '0x0008']
    params = bytes.fromhex(''.join(data_cmd[6:]))
    assert params[0] == 30 and params[1:31] == ibeacon_bytes() and params[31:] == b'\x00' and len(params) == 32
    assert lines[2] == 'hcitool -i hci1 cmd 0x08 0x000a 01'


def test_payload_json(tmp_path):
    conf = tmp_path / 'b.conf'
    conf.write_text(config_text(minor=7, tx_power=-4))
    j = output_schema.loads('payload', run_cli('payload', '-c', str(conf), '-f', 'json', check=True).stdout)
    assert j == {'uuid': APPLE_UUID, 'major': 1, 'minor': 7, 'measured_power': -59, 'interval_ms': 100,
                 'connectable': False, 'pdu': 'ADV_NONCONN_IND', 'tx_power': -4,
                 'advertising_data': ibeacon_bytes(minor=7).hex(),
                 # hci0, backend auto: static on a legacy controller (a Pi: raw HCI), the kernel's own on one with sets
                 'address': None, 'address_setting': 'static', 'address_setting_with_sets': 'kernel'}


BAD = sorted((FIXTURES / 'bad').glob('*.conf'))


@pytest.mark.parametrize('path', BAD, ids=[p.name for p in BAD])
def test_bad_config_exits_78_naming_file_line_and_column(path: Path):
    expected = [line[len('# expect: '):] for line in path.read_bytes().decode('utf-8', 'replace').splitlines()
                if line.startswith('# expect: ')]
    for command in ('check-config', 'payload'):
        r = run_cli(command, '--config', str(path))
        assert r.returncode == 78, r.stderr
        errors = [l for l in r.stderr.splitlines() if ': error: ' in l]
        assert len(errors) == len(expected), r.stderr
        for e in expected:
            where, text = e.split(' ', 1)
            assert any(l.startswith(f'{path}:{where}: error: ') and text in l for l in errors), (e, r.stderr)


def test_missing_config_file_is_one_clear_error(tmp_path):
    r = run_cli('check-config', '-c', str(tmp_path / 'nope.conf'))
    assert r.returncode == 78
    assert r.stderr.startswith(f'{tmp_path}/nope.conf: error: no such file')


def test_check_config_prints_the_normalized_beacon(tmp_path):
    shipped = run_cli('check-config', '-c', str(ROOT / 'config' / 'beacond.conf'))
    assert shipped.returncode == 0 and 'OK, but there is no beacon yet' in shipped.stdout, shipped.stdout
    conf = tmp_path / 'beacond.conf'
    conf.write_text((ROOT / 'config' / 'beacond.conf').read_text())
    uuid = run_cli('gen-uuid', '--set', str(conf), check=True).stdout.strip()
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 0
    assert f'uuid            {uuid}' in r.stdout and 'interval        100 ms (160 × 0.625 ms)' in r.stdout


def test_gen_uuid_100000_unique_valid_v4():
    r = run_cli('gen-uuid', '--count', '100000')
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert len(lines) == 100000 and len(set(lines)) == 100000
    for line in lines:
        assert UUID_RE.match(line), line
        u = uuidlib.UUID(line)
        assert u.version == 4 and u.variant == uuidlib.RFC_4122


def test_gen_uuid_lower():
    out = run_cli('gen-uuid', '--lower', check=True).stdout.strip()
    assert out == out.lower() and uuidlib.UUID(out).version == 4


def test_gen_uuid_set_changes_exactly_one_line_and_keeps_mode(tmp_path):
    conf = tmp_path / 'beacond.conf'
    original = (ROOT / 'config' / 'beacond.conf').read_text()
    conf.write_text(original)
    os.chmod(conf, 0o640)
    # The shipped file has no uuid: --set adds one line right after [beacon] and touches nothing else.
    r = run_cli('gen-uuid', '--set', str(conf))
    assert r.returncode == 0, r.stderr
    first = r.stdout.strip()
    assert UUID_RE.match(first)
    before, after = original.splitlines(keepends=True), conf.read_text().splitlines(keepends=True)
    at = before.index('[beacon]\n') + 1
    assert after == before[:at] + [f'uuid = "{first}"\n'] + before[at:]
    # With a uuid there, --set keeps it (a fleet shares one UUID): exit 78 naming the line, the file untouched.
    r = run_cli('gen-uuid', '--set', str(conf))
    assert r.returncode == 78 and f"{conf}:{at + 1}:8: error: 'uuid' in [beacon] is already {first}" in r.stderr, r.stderr
    assert 'pass --replace' in r.stderr and conf.read_text().splitlines(keepends=True) == after
    # --replace changes exactly that line.
    r = run_cli('gen-uuid', '--set', str(conf), '--replace')
    assert r.returncode == 0, r.stderr
    second = r.stdout.strip()
    assert UUID_RE.match(second) and second != first
    again = conf.read_text().splitlines(keepends=True)
    assert len(again) == len(after)
    changed = [i for i, (a, b) in enumerate(zip(after, again)) if a != b]
    assert changed == [at] and again[at] == after[at].replace(first, second)
    assert stat.S_IMODE(conf.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ['beacond.conf']  # no temporary file left behind
    assert run_cli('check-config', '-c', str(conf)).returncode == 0


def test_gen_uuid_set_refuses_a_broken_file_and_leaves_it_untouched(tmp_path):
    conf = tmp_path / 'broken.conf'
    text = '[beacon]\nuuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\nmajor = 1\nminor = 1\n'
    conf.write_text(text)
    r = run_cli('gen-uuid', '--set', str(conf))
    assert r.returncode == 78 and f"{conf}:2:8: error: 'uuid' in [beacon]: unterminated string" in r.stderr
    assert conf.read_text() == text


def test_the_readme_demo_runs_from_this_checkout():
    # `make demo` is one of the two commands the README promises on a fresh machine: keep it working.
    r = subprocess.run([sys.executable, str(ROOT / 'Tests' / 'Integration' / 'harness' / 'demo.py'), '--beacond', str(beacond_path())],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    # Three beacons on the Pi's radio model, each heard from its own address, in turn, then nothing on the air.
    heard = re.findall(r'second radio heard iBeacon uuid=(\S+) major=7 minor=(\d) measured_power=-59 dBm from (\S+): \d+ times', r.stdout)
    assert len(heard) == 3 and len({u for u, _, _ in heard}) == 1, r.stdout[-1500:]
    assert sorted(m for _, m, _ in heard) == ['1', '2', '3'] and len({a for _, _, a in heard}) == 3, heard
    assert 'CYW43455' in r.stdout and 'controller advertising now: off' in r.stdout, r.stdout[-1500:]


def test_irk_prints_the_key_in_each_gateways_form_and_refuses_a_readable_file(tmp_path):
    key = tmp_path / 'keys' / 'shelf1.irk'
    key.parent.mkdir()
    key.write_text('ec0234a357c8ad05341010a60a397d9b\n')
    key.chmod(0o600)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(config_text().replace('\n\n[advertising]', '\naddress = "resolvable"\nresolving_key_file = "shelf1.irk"\n\n[advertising]'))
    r = run_cli('irk', '-c', str(conf), str(key))
    assert r.returncode == 0, r.stderr
    assert 'Home Assistant, Private BLE Device (IRK)   ec0234a357c8ad05341010a60a397d9b' in r.stdout, r.stdout
    assert 'ESPHome (irk:)                             ec0234a357c8ad05341010a60a397d9b' in r.stdout
    # Theengs reverses what it is given; base64 is of the reversed bytes (Apple's keychain form), as Python makes it.
    import base64
    rev = bytes.fromhex('ec0234a357c8ad05341010a60a397d9b')[::-1]
    m = re.search(r'--identities ([0-9A-F:]{17}) ([0-9a-f]{32})', r.stdout)
    assert m and m.group(2) == rev.hex() and int(m.group(1)[:2], 16) >> 6 == 0b11, r.stdout
    assert base64.b64encode(rev).decode() in r.stdout
    # The same checks as run's: a key readable by others is refused, and nothing of it is printed.
    key.chmod(0o644)
    r = run_cli('irk', '-c', str(conf))
    assert r.returncode == 78 and 'ec0234' not in r.stdout + r.stderr and 'mode 644' in r.stderr, r.stderr
