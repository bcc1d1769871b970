"""Eddystone-EID on Bumble's controller: the identifier for the wall clock, a new one at every period boundary from a
new non-resolvable address, the exact bytes for the counter at that moment (computed here with OpenSSL's AES through
pyca/cryptography, an implementation beacond does not use), and the key handling `run`, check-config and payload
share: mode 0600 or refused, 32 hex digits or refused, never printed.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from conftest import beacond_path, run_cli
from harness.lab import Lab, wait_for
import output_schema

KEY = '0102030405060708090A111213141516'
PREFIX = bytes.fromhex('0201060303aafe0d16aafe30')


def aes(key: bytes, block: bytes) -> bytes:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    e = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return e.update(block) + e.finalize()


def eid(key_hex: str, k: int, t: int) -> bytes:
    """The Eddystone EID specification's computation (eid-computation.md)."""
    key = bytes.fromhex(key_hex)
    temporary = aes(key, bytes(11) + b'\xff\x00\x00' + ((t >> 16) & 0xFFFF).to_bytes(2, 'big'))
    return aes(temporary, bytes(11) + bytes([k]) + ((t >> k) << k & 0xFFFFFFFF).to_bytes(4, 'big'))[:8]


def test_the_specification_computation_here_matches_the_published_vectors():
    assert eid(KEY, 10, 0).hex().upper() == 'A9B76A71C5F89290'  # RadiusNetworks/ephemeral_calc
    assert eid(KEY, 10, 2000).hex().upper() == '4144413E45FEFA58'


def write_key(path, text=KEY + '\n', mode=0o600):
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)
    return path


def eid_config(tmp_path, k=1, power=-20, key_name='shop.key'):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(f'[beacon]\nformat = "eddystone-eid"\nidentity_key_file = "{key_name}"\nrotation_exponent = {k}\n'
                    f'measured_power = {power}\n')
    return conf


def test_the_frame_changes_at_each_boundary_from_a_new_address_with_the_exact_bytes(tmp_path, processes):
    write_key(tmp_path / 'keys' / 'shop.key')
    conf = eid_config(tmp_path, k=1)  # a new EID every 2 s
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        wait_for(lambda: any(r.data.startswith(PREFIX) for r in list(lab.received)), 10, what='an EID frame')
        lab.clear_received()
        time.sleep(7)
        heard = [(r.at, r.data, r.address) for r in list(lab.received) if r.data.startswith(PREFIX)]
        assert b.proc.poll() is None
    # Each frame: the identifier for the 2 s period of the wall clock when it was heard, or the period before (on a
    # busy machine the report can reach the scanner's thread late after a boundary).
    offset = time.time() - time.monotonic()
    periods: dict[bytes, set[str]] = {}
    for at, data, address in heard:
        wall = at + offset
        t = int(wall)
        ok = {eid(KEY, 1, t), eid(KEY, 1, t - 2)}
        assert data[12] == 0xEC and data[13:] in ok, f'{data.hex()} at {wall:.2f}'
        periods.setdefault(data[13:], set()).add(address)
    assert len(periods) >= 3, f'only {len(periods)} EIDs in 7 s at K = 1'
    # A new non-resolvable private address (top bits 00) with each EID, one per EID, never reused.
    addresses = [min(a) for a in periods.values()]
    assert all(len(a) == 1 for a in periods.values()), periods
    assert len(set(addresses)) == len(addresses)
    assert all(int(a[:2], 16) >> 6 == 0b00 for a in addresses), addresses
    assert KEY not in b.log() and KEY.lower() not in b.log()


@pytest.mark.parametrize('text,mode,error', [
    (KEY + '\n', 0o644, 'can be read by its group or by others (mode 644): a key must be private to its owner; chmod 600 it'),
    (KEY[:30] + '\n', 0o600, 'holds 30 hex digits; an Eddystone-EID identity key is 128 bits: 32 hex digits'),
    ('not a key at all\n', 0o600, 'is not an identity key: expected 32 hex digits'),
])
def test_a_bad_key_file_is_a_config_error_at_its_key(tmp_path, processes, text, mode, error):
    write_key(tmp_path / 'keys' / 'shop.key', text, mode)
    conf = eid_config(tmp_path)
    for command in ('check-config', 'payload'):
        r = run_cli(command, '-c', str(conf))
        assert r.returncode == 78, r.stderr
        assert f"{conf}:3:21: error: 'identity_key_file' in [beacon]: the file it names in {tmp_path}/keys {error}" in r.stderr, r.stderr
        assert KEY not in r.stderr and KEY[:30] not in r.stderr
    b = processes('run', '-c', str(conf), '-d', 'unix:/nonexistent')
    assert b.wait(10) == 78
    (tmp_path / 'keys' / 'shop.key').unlink()
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 78 and (f"the file it names in {tmp_path}/keys does not exist: make one with 'beacond gen-key {tmp_path}/keys/NAME', "
                                   "NAME as on that line (a name is never shown: it may be a key)") in r.stderr, r.stderr
    assert 'shop.key' not in r.stderr


def test_a_key_owned_by_another_user_is_refused(tmp_path):
    """Whoever owns a key file can change it (chmod, then write): a key owned by neither root nor beacond's user is a
    config error, whatever its mode."""
    if os.geteuid() != 0:
        pytest.skip('NOT RUN: giving the key to another user needs root (CI runs the suite as root)')
    key = tmp_path / 'keys' / 'shop.key'
    write_key(key)
    conf = eid_config(tmp_path)
    assert run_cli('check-config', '-c', str(conf)).returncode == 0
    os.chown(key, 65534, 65534)
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 78, r.stderr
    assert (f"{conf}:3:21: error: 'identity_key_file' in [beacon]: the file it names in {key.parent} is owned by user 65534, neither root nor the user "
            f"beacond runs as (0): whoever owns a key can change it; chown root it") in r.stderr, r.stderr


def test_a_fifo_where_a_config_key_or_keyring_belongs_is_refused_at_once(tmp_path):
    """open(2) of a FIFO waits for a writer: check-config (the role's validate:), gen-uuid --set and the verifier
    would hang. Each refuses it at once instead (a hang fails here by the timeout)."""
    import subprocess
    fifo = tmp_path / 'fifo.conf'
    os.mkfifo(fifo)
    def run(*args):
        return subprocess.run([str(beacond_path()), *map(str, args)], capture_output=True, text=True, timeout=10)
    r = run('check-config', '-c', fifo)
    assert r.returncode == 78 and f'{fifo}: error: is not a regular file (a FIFO, a device or a socket), not a config file' in r.stderr, r.stderr
    r = run('gen-uuid', '--set', fifo)
    assert r.returncode == 78 and f'{fifo}: error: is not a regular file, not a config file' in r.stderr, r.stderr
    r = run('scan', '--device', 'unix:/nonexistent', '--eid-keys', fifo)
    assert r.returncode == 78 and 'is not a regular file (a FIFO' in r.stderr, r.stderr
    r = run('scan', '--device', 'unix:/nonexistent', '--expect', fifo)
    assert r.returncode == 78 and 'is not a regular file (a FIFO' in r.stderr, r.stderr
    (tmp_path / 'keys').mkdir()
    os.mkfifo(tmp_path / 'keys' / 'shop.key')
    conf = eid_config(tmp_path)
    r = run('check-config', '-c', conf)
    assert r.returncode == 78 and f"the file it names in {tmp_path}/keys is not a regular file" in r.stderr, r.stderr


def test_a_process_holding_keys_cannot_be_dumped(tcp_lab):
    """PR_SET_DUMPABLE=0 once keys are read: no core file and no ptrace by the same user. The kernel says so by
    giving /proc/PID's files to root instead of the process's user; beacond runs here as nobody, so the difference
    shows. An iBeacon-only run beside it keeps its own user's files (the check can fail)."""
    import shutil
    import subprocess
    import tempfile
    if os.geteuid() != 0:
        pytest.skip('NOT RUN: running beacond as another user needs root (CI runs the suite as root)')
    lab, device = tcp_lab
    d = tempfile.mkdtemp(prefix='beacond-dumpable-')
    try:
        os.chmod(d, 0o755)
        os.mkdir(f'{d}/keys', 0o755)
        write_key(Path(d) / 'keys' / 'shop.key')
        os.chown(f'{d}/keys/shop.key', 65534, 65534)
        os.mkdir(f'{d}/state', 0o755)
        os.chown(f'{d}/state', 65534, 65534)
        # A copy of the binary nobody may run (the checkout may be in a private directory, as CI's mktemp -d is).
        binary = f'{d}/beacond'
        shutil.copy(beacond_path(), binary)
        os.chmod(binary, 0o755)
        with open(f'{d}/eid.conf', 'w') as f:
            f.write('[beacon]\nformat = "eddystone-eid"\nidentity_key_file = "shop.key"\n\n[controller]\nbackend = "hci"\n')
        owners = {}
        for name in ('eid', 'ib'):
            env = {**os.environ, 'STATE_DIRECTORY': f'{d}/state'}
            # An iBeacon-only process that stays up: a scan of the same controller, which reads no key.
            from conftest import free_port
            from harness.lab import Lab, wait_for
            port = free_port()
            other = Lab(f'tcp-server:127.0.0.1:{port}', scan=False) if name == 'ib' else None
            if other:
                other.__enter__()
            args = (['run', '-c', f'{d}/eid.conf', '-d', device] if name == 'eid'
                    else ['scan', '--device', f'tcp:127.0.0.1:{port}', '--duration', '30'])
            p = subprocess.Popen([binary, *args], user=65534, group=65534, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                if name == 'eid':
                    wait_for(lab.advertising, 10, what='the EID beacon on the air')
                else:
                    wait_for(lambda: {0x200C, 0x2042} & set(other.opcodes()), 10, what='scanning enabled')  # legacy or extended
                owners[name] = os.stat(f'/proc/{p.pid}/environ').st_uid if p.poll() is None else p.stderr.read()
            finally:
                p.kill()
                p.wait()
                if other:
                    other.__exit__(None, None, None)
        assert owners == {'eid': 0, 'ib': 65534}, owners
    finally:
        shutil.rmtree(d)


def test_a_relative_key_is_looked_up_in_the_credentials_directory(tmp_path):
    """As the units pass /etc/beacond/keys (LoadCredential=eid:…, each file as eid_NAME), or a credential of its own."""
    creds = tmp_path / 'creds'
    write_key(creds / 'eid_shop.key')
    write_key(creds / 'other.key', '00' * 16 + '\n')
    conf = eid_config(tmp_path)
    env = {**os.environ, 'CREDENTIALS_DIRECTORY': str(creds)}
    r = run_cli('payload', '-c', str(conf), '--time', '0', env=env)
    assert r.returncode == 0, r.stderr
    # K = 1 here: the EID of the period starting at 0.
    assert r.stdout.strip() == (PREFIX + b'\xec' + eid(KEY, 1, 0)).hex()
    r = run_cli('payload', '-c', str(eid_config(tmp_path, key_name='other.key')), '--time', '0', env=env)
    assert r.stdout.strip() == (PREFIX + b'\xec' + eid('00' * 16, 1, 0)).hex()
    # A key the unit was not started with: the credentials are a read-only copy made at start, so the way out is
    # gen-key into /etc/beacond/keys and a restart, never gen-key into the credentials directory.
    r = run_cli('check-config', '-c', str(eid_config(tmp_path, key_name='new.key')), env=env)
    assert r.returncode == 78 and (f"the file it names in {creds} is not among the keys the unit was started with: make it with 'sudo beacond "
                                   "gen-key /etc/beacond/keys/NAME', NAME as on that line, if it is new, then restart the unit (systemctl restart; "
                                   "a reload does not read new keys)") in r.stderr, r.stderr
    assert f'gen-key {creds}' not in r.stderr


def test_payload_time_check_config_and_gen_key(tmp_path):
    write_key(tmp_path / 'keys' / 'shop.key')
    conf = eid_config(tmp_path, k=10)
    r = run_cli('payload', '-c', str(conf), '--time', '2000', '--format', 'json')
    assert r.returncode == 0, r.stderr
    j = output_schema.loads('payload', r.stdout)
    assert (j['eid'], j['period_start'], j['rotation_exponent'], j['measured_power_0m']) == ('4144413e45fefa58', 1024, 10, -20)
    assert j['advertising_data'] == (PREFIX + b'\xec').hex() + '4144413e45fefa58'
    # Near the end of the 32-bit counter: the top period, and a temporary-key rollover between 65535 and 65536.
    for t in (4294967295, 65535, 65536):
        r = run_cli('payload', '-c', str(conf), '--time', str(t))
        assert r.stdout.strip() == (PREFIX + b'\xec' + eid(KEY, 10, t)).hex(), t
    out = run_cli('check-config', '-c', str(conf)).stdout
    assert 'identity_key_file shop.key (a 128-bit key, read; never printed)' in out and KEY not in out
    assert 'rotation_exponent 10 (a new EID every 2^10 s = 1024 s, from the wall clock)' in out
    key = tmp_path / 'new.key'
    r = run_cli('gen-key', str(key))
    assert r.returncode == 0, r.stderr
    assert oct(os.stat(key).st_mode & 0o777) == '0o600'
    text = key.read_text()
    assert len(text) == 33 and all(c in '0123456789abcdef' for c in text.strip()) and text not in r.stdout
    r = run_cli('gen-key', str(key))
    assert r.returncode == 1 and 'exists: gen-key never replaces a key' in r.stderr
    assert key.read_text() == text


def test_scan_resolves_the_beacon_by_its_key_and_a_wrong_key_does_not(tmp_path, processes):
    from conftest import free_port
    write_key(tmp_path / 'keys' / 'shop.key')
    conf = eid_config(tmp_path, k=2)
    port1, port2 = free_port(), free_port()
    keys = tmp_path / 'keys.toml'
    keys.write_text(f'[[beacon]]\nname = "shop 7"\nidentity_key_file = "shop.key"\nrotation_exponent = 2\n\n'
                    f'[[beacon]]\nname = "other"\nidentity_key = "{"00" * 16}"\nrotation_exponent = 2\n')
    wrong = tmp_path / 'wrong.toml'
    wrong.write_text(f'[[beacon]]\nname = "shop 7"\nidentity_key = "{KEY[:-1]}7"\nrotation_exponent = 2\n')
    with Lab(f'tcp-server:127.0.0.1:{port1}', scan=False, second_transport=f'tcp-server:127.0.0.1:{port2}') as lab:
        processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port1}')
        wait_for(lab.advertising, 10, what='beacond run advertising')
        r = run_cli('scan', '--device', f'tcp:127.0.0.1:{port2}', '--duration', '5', '--json', '--eid-keys', str(keys))
        assert r.returncode == 0, r.stderr
        final = [output_schema.loads('scan', l) for l in r.stdout.splitlines() if '"final":true' in l and '"summary"' not in l]
        # One entry for the beacon, whatever its EIDs and addresses in 5 s (K = 2: two or three of each).
        assert [(f['kind'], f['name'], f['resolved']) for f in final] == [('eddystone-eid', 'shop 7', True)], final
        f = final[0]
        assert bytes.fromhex(f['eid']) == eid(KEY, 2, f['time_counter']) and f['time_counter'] % 4 == 0
        assert abs(f['time_counter'] - time.time()) < 12
        r = run_cli('scan', '--device', f'tcp:127.0.0.1:{port2}', '--duration', '3', '--json', '--eid-keys', str(wrong))
        final = [output_schema.loads('scan', l) for l in r.stdout.splitlines() if '"final":true' in l and '"summary"' not in l]
        assert final and all(f['kind'] == 'eddystone-eid' and not f['resolved'] and 'name' not in f for f in final), final
        # Without a keyring: the raw EIDs.
        r = run_cli('scan', '--device', f'tcp:127.0.0.1:{port2}', '--duration', '2', '--json')
        assert any(l.get('kind') == 'eddystone-eid' for l in output_schema.lines('scan', r.stdout))
    # A mistake in the keyring: exit 78 naming file:line:col.
    wrong.write_text('[[beacon]]\nname = "x"\nrotation_exponent = 16\nidentity_key = "00"\n')
    r = run_cli('scan', '--device', 'unix:/nonexistent', '--eid-keys', str(wrong))
    assert r.returncode == 78
    assert f"{wrong}:3:21: error: 'rotation_exponent' in [[beacon]] #1 must be an integer from 0 to 15" in r.stderr, r.stderr
    assert f"{wrong}:4:16: error: 'identity_key' in [[beacon]] #1 must be 32 hex digits (128 bits)" in r.stderr


def test_a_reload_with_a_new_key_is_a_data_update_of_that_beacon(tmp_path, processes):
    """Only the key changed: the same period, so the same address, and the set's data is replaced in place (no
    disable); the other beacon is not touched."""
    write_key(tmp_path / 'keys' / 'shop.key')
    conf = tmp_path / 'beacond.conf'
    ib = '[[beacon]]\nuuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"\nmajor = 1\nminor = 2\n\n'
    conf.write_text(ib + '[[beacon]]\nformat = "eddystone-eid"\nidentity_key_file = "shop.key"\nrotation_exponent = 15\n')
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')

        def eid_set():
            return next(((h, s) for h, s in lab.state()['sets'].items() if s['enabled'] and s['data'].startswith(PREFIX[:12])), None)
        handle, before = wait_for(eid_set, 10, what='the EID set')
        t = int(time.time())
        assert before['data'][13:] in {eid(KEY, 15, t), eid(KEY, 15, t - 1)}
        seen = len(lab.state()['commands'])
        write_key(tmp_path / 'keys' / 'shop.key', '00' * 15 + '01\n')
        b.signal(1)
        wait_for(lambda: (s := eid_set()) and s[1]['data'] != before['data'], 10, what='the new EID')
        after = eid_set()[1]
        assert after['data'][13:] == eid('00' * 15 + '01', 15, int(time.time()))
        assert after['random_address'] == before['random_address']
        ops = [(op, p[0]) for _, op, p in lab.state()['commands'][seen:]]
        assert ops == [(0x2037, handle)], ops  # LE Set Extended Advertising Data on that set, nothing else


def test_check_config_keys_names_where_relative_keys_are_for_a_file_checked_elsewhere(tmp_path):
    """Ansible's `validate:` checks the new file at a temporary path before it replaces the config: without --keys a
    relative identity_key_file is looked up beside that temporary file, and is not there."""
    (tmp_path / 'etc').mkdir()
    write_key(tmp_path / 'etc' / 'keys' / 'shop.key')
    elsewhere = tmp_path / 'tmp'
    elsewhere.mkdir()
    conf = eid_config(elsewhere)
    r = run_cli('check-config', '--config', str(conf))
    assert r.returncode == 78 and f"{conf}:3:21: error: 'identity_key_file' in [beacon]: the file it names in {elsewhere}/keys does not exist" in r.stderr, r.stderr
    r = run_cli('check-config', '--config', str(conf), '--keys', str(tmp_path / 'etc' / 'keys'))
    assert r.returncode == 0, r.stderr
    assert 'a 128-bit key, read; never printed' in r.stdout and KEY not in r.stdout


def test_a_key_systemd_passes_as_a_credential_may_be_readable_by_the_units_own_group(tmp_path):
    """Bug: systemd 257 (Debian 13) makes credential files 0440, the unit's group readable (252 made them 0400), and
    beacond refused its key there: EID beacons did not start under the units on Debian 13 (found by the VM fleet
    test). The credentials directory is the unit's alone; elsewhere a key readable by its group is still refused."""
    creds = tmp_path / 'credentials'
    creds.mkdir()
    write_key(creds / 'eid_shop.key', mode=0o440)
    conf = eid_config(tmp_path)
    r = run_cli('check-config', '--config', str(conf), env={**os.environ, 'CREDENTIALS_DIRECTORY': str(creds)})
    assert r.returncode == 0, r.stderr
    os.chmod(creds / 'eid_shop.key', 0o444)
    r = run_cli('check-config', '--config', str(conf), env={**os.environ, 'CREDENTIALS_DIRECTORY': str(creds)})
    assert r.returncode == 78 and 'can be read by others (mode 444)' in r.stderr, r.stderr
    write_key(tmp_path / 'keys' / 'shop.key', mode=0o640)
    r = run_cli('check-config', '--config', str(conf))
    assert r.returncode == 78 and 'can be read by its group or by others (mode 640)' in r.stderr, r.stderr


def test_a_key_pasted_without_quotes_is_never_printed(tmp_path):
    """bug: `identity_key_file = 9f11…` in beacond.conf, or `identity_key = 00…ff` in a keyring, printed the whole key
    in its error (stderr, the journal, STATUS, Ansible's output). Only its kind and length now, at file:line:col."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(f'[beacon]\nformat = "eddystone-eid"\nidentity_key_file = {KEY.lower()}\n')
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 78, r.stderr
    assert f"{conf}:3:21: error: 'identity_key_file' in [beacon]: the value (32 hex digits) is not valid here; it is not shown" in r.stderr, r.stderr
    keyring = tmp_path / 'keyring'
    keyring.write_text(f'[[beacon]]\nname = "shop"\nidentity_key = {KEY}\n')
    r = run_cli('scan', '--device', 'unix:/nonexistent', '--eid-keys', str(keyring))
    assert r.returncode == 78, r.stderr
    assert f"{keyring}:3:16: error: 'identity_key' in [beacon]: the value (32 hex digits) is not valid here" in r.stderr, r.stderr
    for out in (r.stderr, r.stdout):
        assert all(KEY[i:i + 8].lower() not in out.lower() for i in range(0, 25)), out


def test_a_resolver_table_past_its_bound_is_refused_with_what_to_do(tmp_path):
    """keys × (2 × window + 1) EIDs are computed and held: 1,000 keys at --eid-window 1000 took 257 MB. At most
    4,000,000 (about 150 MiB); past that, a clear error before anything is computed."""
    keyring = tmp_path / 'keys.toml'
    keyring.write_text(''.join(f'[[beacon]]\nname = "b{i}"\nidentity_key = "{i:032x}"\n\n' for i in range(2000)))
    r = run_cli('scan', '--device', 'unix:/nonexistent', '--eid-keys', str(keyring), '--eid-window', '1000')
    assert r.returncode == 78, r.stderr
    assert ('2000 keys with --eid-window 1000 make 4002000 EIDs to hold, more than the 4000000 allowed: give a smaller '
            'window') in r.stderr, r.stderr
    r = run_cli('scan', '--device', 'unix:/nonexistent', '--eid-keys', str(keyring), '--eid-window', '2')
    assert r.returncode == 69, r.stderr  # read and computed; then no such device


def longest_hex_run(text: str) -> int:
    """Of `text` without the config's SHA-256 (a digest of the file, which tells nothing of a key in it)."""
    import re
    text = re.sub(r'"sha256":"[0-9a-f]{64}"', '"sha256":"…"', text)
    return max((len(m) for m in re.findall(r'[0-9A-Fa-f]+', text)), default=0)


def test_a_pasted_key_reaches_no_log_status_or_state_file(tmp_path, processes, notify, open_tmp):
    """bug (review #43): redaction covered the values of identity_key* keys only. The key pasted as the file's name
    (`.../keys/<key> does not exist (make one with 'beacond gen-key .../<key>')`), the key on the line after
    `identity_key_file =`, or under a misspelled name came back whole: in the journal, in STATUS, and in the state
    file (0644) as reload.errors and last_refused.errors, which any user read with `beacond status --json`, also after
    a later good reload. Now no diagnostic, STATUS or state field has a run of 16 hex digits or a path made from an
    identity_key_file value; the state keeps how many errors and on which lines."""
    from conftest import as_nobody, config_text
    conf = tmp_path / 'beacond.conf'
    conf.write_text(config_text())
    run_dir = open_tmp / 'run'
    env = {'RUNTIME_DIRECTORY': str(run_dir), 'NOTIFY_SOCKET': notify.path}
    sock = tmp_path / 'hci.sock'
    secret = KEY.lower()
    pasted = [
        # The key as the file's name: does not exist.
        (f'[beacon]\nformat = "eddystone-eid"\nidentity_key_file = "{secret}"\n', [3]),
        # The key on the line after `identity_key_file =`, and under a misspelled name.
        (f'[[beacon]]\nformat = "eddystone-eid"\nidentity_key_file =\n{secret}\n\n'
         f'[[beacon]]\nformat = "eddystone-eid"\nidentity-key-file = {secret}\n', [3, 4, 6, 8]),
        # The key with a dash in it, as a name: no run of 16, but still the value of identity_key_file.
        (f'[beacon]\nformat = "eddystone-eid"\nidentity_key_file = "{secret[:12]}-{secret[12:]}"\n', [3]),
    ]
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
        wait_for(lab.advertising, 10, what='on the air')
        for text, lines in pasted:
            conf.write_text(text)
            n = len(notify.assignments())
            r = run_cli('reload', '--config', str(conf), env={**os.environ, **env})
            assert r.returncode == 78, r.stderr
            status = notify.wait_for('STATUS=', after=n + 2)
            state = (run_dir / 'state.json').read_text()
            output_schema.loads('state', state)
            seen = as_nobody('status', '--json', '--config', str(conf), env={'RUNTIME_DIRECTORY': str(run_dir)})
            for what, out in (('reload', r.stdout + r.stderr), ('STATUS', status), ('state.json', state),
                              ("nobody's status --json", seen.stdout + seen.stderr), ('the log', b.log())):
                assert longest_hex_run(out) < 16, f'{what}: {out}'
                assert secret[12:28] not in out.lower() and secret[:12] not in out.lower(), f'{what}: {out}'
            d = output_schema.loads('status', seen.stdout)['daemons'][0]
            assert d['reload']['result'] == 'refused' and d['reload']['error_lines'] == lines, d['reload']
            assert f'kept previous configuration: {conf} has ' in status and f'line{"s" if len(lines) > 1 else ""} {lines[0]}' in status, status
        # A good reload after them: the refusal is kept (its count and lines), its text never was.
        conf.write_text(config_text(minor=2))
        assert run_cli('reload', '--config', str(conf), env={**os.environ, **env}).returncode == 0
        seen = as_nobody('status', '--json', '--config', str(conf), env={'RUNTIME_DIRECTORY': str(run_dir)})
        d = output_schema.loads('status', seen.stdout)['daemons'][0]
        assert d['last_refused']['error_lines'] == [3] and longest_hex_run(seen.stdout) < 16, seen.stdout


def test_a_keyring_past_its_stated_limit_is_refused_at_once_and_one_within_it_stays_small(tmp_path):
    """bug (review #43): a keyring took about 0.9 KB of memory per line while it was read (143 MB for 160,000 lines),
    and the only bound was the 16 MiB file size. Now at most 200,000 lines with content (50,000 keys of four lines)
    are read: past that, a clear error before anything is parsed; at the limit, well under 100 MB."""
    import subprocess
    def write(path, keys):
        with open(path, 'w') as f:
            for i in range(keys):
                f.write(f'[[beacon]]\nname = "b{i}"\nidentity_key = "{i:032x}"\nrotation_exponent = 10\n\n')
    def scan(path):
        r = subprocess.run(['/usr/bin/time', '-f', 'maxrss %M', str(beacond_path()), 'scan', '--device', 'unix:/nonexistent',
                            '--eid-keys', str(path), '--eid-window', '0'], capture_output=True, text=True, timeout=120)
        return r.returncode, r.stderr, int(r.stderr.rsplit('maxrss ', 1)[1].split()[0])
    big = tmp_path / 'big.toml'
    write(big, 60_000)  # 240,000 lines with content, 5.6 MiB: under the file's size limit
    code, err, kib = scan(big)
    assert code == 78, err
    assert f'{big}: error: the key file has more than 200000 lines (blank lines and comments aside)' in err and 'at most 50000 keys' in err, err
    assert kib < 40 * 1024, f'{kib} KiB to refuse it'
    limit = tmp_path / 'limit.toml'
    write(limit, 50_000)
    code, err, kib = scan(limit)
    assert code == 69, err  # read, then no such controller
    assert kib < 100 * 1024, f'{kib} KiB for 50,000 keys'
