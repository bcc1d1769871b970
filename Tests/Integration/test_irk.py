"""`beacond irk` prints a resolving key only: one a config names as `resolving_key_file` (issue #53). An EID identity
key, a bindkey or any other private file of the caller's is refused, symlinked or not, and nothing of it is printed;
while it holds the key the process cannot be dumped or traced (as run's)."""
from __future__ import annotations

import fcntl
import os
import pwd
import subprocess
from pathlib import Path

from conftest import APPLE_UUID, NOBODY, beacond_path, run_cli
from test_eid import write_key

IRK = '8f2a5c0e19b34d7ea6c1f0d2b3e4a596'
EID = '9f11c1b2d3e4f5a6b7c8d9e0f1a2b3c4'
BIND = '231d39c1d7cc1ab1aee224cd096db932'
ALL = (f'[[beacon]]\nname = "door"\nuuid = "{APPLE_UUID}"\nmajor = 1\nminor = 1\naddress = "resolvable"\n'
       'resolving_key_file = "door.irk"\n\n'
       '[[beacon]]\nname = "shelf"\nformat = "eddystone-eid"\nidentity_key_file = "shelf.key"\n\n'
       '[[beacon]]\nname = "report"\nformat = "bthome"\nbindkey_file = "home.key"\n')


def site(tmp_path, text=ALL):
    keys = tmp_path / 'keys'
    write_key(keys / 'door.irk', IRK + '\n')
    write_key(keys / 'shelf.key', EID + '\n')
    write_key(keys / 'home.key', BIND + '\n')
    conf = tmp_path / 'beacond.conf'
    conf.write_text(text)
    return conf, keys


def secrets_in(text: str) -> list[str]:
    return [k for k in (IRK, EID, BIND) if any(k[i:i + 8] in text.lower() for i in range(0, 25))]


def test_bug_irk_file_printed_an_eddystone_eid_identity_key(tmp_path):
    """`irk FILE` printed any private key file of the caller's: an EID identity key, named by no config as a resolving
    key, came out in every gateway's form (issue #53)."""
    conf, keys = site(tmp_path)
    for f in (keys / 'shelf.key', keys / 'home.key'):
        r = run_cli('irk', str(f))
        assert r.returncode == 78 and r.stdout == '' and secrets_in(r.stderr) == [], r.stdout + r.stderr


def test_the_configs_resolving_key_by_beacon_name_file_name_or_path(tmp_path):
    conf, keys = site(tmp_path)
    (tmp_path / 'alias.irk').symlink_to(keys / 'door.irk')
    for which in ([], ['door'], ['door.irk'], [str(keys / 'door.irk')], [str(tmp_path / 'alias.irk')]):
        r = run_cli('irk', '-c', str(conf), *which)
        assert r.returncode == 0, (which, r.stderr)
        assert f'Home Assistant, Private BLE Device (IRK)   {IRK}' in r.stdout, r.stdout
        assert secrets_in(r.stdout) == [IRK], r.stdout


def test_an_identity_key_a_bindkey_or_another_file_is_never_printed(tmp_path):
    conf, keys = site(tmp_path)
    other = write_key(tmp_path / 'other.key', 'ec0234a357c8ad05341010a60a397d9b\n')
    (tmp_path / 'alias.key').symlink_to(keys / 'shelf.key')
    cases = {
        'shelf': "'shelf' is [[beacon]] #2 (shelf), which has no resolving key",
        'shelf.key': "is the identity_key_file of [[beacon]] #2 (shelf): an Eddystone-EID identity key, never printed",
        str(tmp_path / 'alias.key'): "is the identity_key_file of [[beacon]] #2 (shelf): an Eddystone-EID identity key, never printed",
        str(keys / 'home.key'): "is the bindkey_file of [[beacon]] #3 (report): a BTHome bindkey, never printed",
        str(other): f"is not a resolving key of {conf}: irk prints only a key the config names as resolving_key_file",
        'nosuch': f"is not a resolving key of {conf}: irk prints only a key the config names as resolving_key_file",
    }
    for which, said in cases.items():
        r = run_cli('irk', '-c', str(conf), which)
        assert r.returncode == 78 and r.stdout == '', (which, r.stdout, r.stderr)
        assert said in r.stderr, (which, r.stderr)
        assert secrets_in(r.stdout + r.stderr) == [], r.stderr
    # Without a config that names it, a key file is not printed either.
    r = run_cli('irk', '-c', str(tmp_path / 'none.conf'), str(keys / 'door.irk'))
    assert r.returncode == 78 and r.stdout == '' and 'none.conf' in r.stderr, r.stderr


def test_a_config_with_several_resolving_keys_asks_which(tmp_path):
    text = ALL.replace('name = "shelf"\nformat = "eddystone-eid"\nidentity_key_file = "shelf.key"',
                       f'name = "shelf"\nuuid = "{APPLE_UUID}"\nmajor = 1\nminor = 2\naddress = "resolvable"\nresolving_key_file = "shelf.key"')
    conf, keys = site(tmp_path, text)
    r = run_cli('irk', '-c', str(conf))
    assert r.returncode == 64 and r.stdout == '', r.stderr
    assert "names 2 resolving keys: say which, by its beacon's name (door, shelf) or its file (door.irk, shelf.key)" in r.stderr, r.stderr
    r = run_cli('irk', '-c', str(conf), 'shelf')
    assert r.returncode == 0 and EID in r.stdout, r.stderr


def test_while_it_holds_the_key_irk_cannot_be_dumped(open_tmp):
    """/proc/PID of a process that may not be dumped belongs to root (proc(5)): irk run as nobody, held on a full pipe
    while it writes the key out."""
    nobody = pwd.getpwnam('nobody')
    conf, keys = site(open_tmp)
    for f in (keys, *keys.iterdir()):
        os.chown(f, nobody.pw_uid, nobody.pw_gid)
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: one page
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b'x' * 512)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    p = subprocess.Popen([*NOBODY, str(beacond_path()), 'irk', '-c', str(conf), 'door'], stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    try:
        import time
        deadline = time.monotonic() + 10
        while 'pipe_write' not in Path(f'/proc/{p.pid}/wchan').read_text():  # blocked writing the key out
            assert time.monotonic() < deadline and p.poll() is None, 'irk did not block on its output'
            time.sleep(0.02)
        assert os.stat(f'/proc/{p.pid}/status').st_uid == 0
    finally:
        out = b''
        while chunk := os.read(r, 65536):
            out += chunk
        os.close(r)
        p.wait(10)
    assert p.returncode == 0 and IRK.encode() in out, p.stderr.read()
