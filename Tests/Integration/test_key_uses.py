"""One key file serves one use (issue #53): a file named as an Eddystone-EID identity key, a resolving key or a bindkey
at once is refused, whatever names reach it (the same name, another path, a symlink), with a message naming both uses;
handing the resolving key to Home Assistant would otherwise put the EID key in its backups. Two beacons sharing one
resolving key (one device to the gateways) stay allowed."""
from __future__ import annotations

from conftest import APPLE_UUID, run_cli
from test_eid import write_key

KEY = '9f11c1b2d3e4f5a6b7c8d9e0f1a2b3c4'


def resolvable(minor: int, key: str) -> str:
    return (f'[[beacon]]\nuuid = "{APPLE_UUID}"\nmajor = 1\nminor = {minor}\naddress = "resolvable"\n'
            f'resolving_key_file = "{key}"\n\n')


def eid(key: str) -> str:
    return f'[[beacon]]\nformat = "eddystone-eid"\nidentity_key_file = "{key}"\n\n'


def bthome(key: str) -> str:
    return f'[[beacon]]\nformat = "bthome"\nname = "shop7"\nbindkey_file = "{key}"\n\n'


def check(tmp_path, text):
    write_key(tmp_path / 'keys' / 'one.key', KEY + '\n')
    (tmp_path / 'keys' / 'alias.key').unlink(missing_ok=True)
    (tmp_path / 'keys' / 'alias.key').symlink_to('one.key')
    conf = tmp_path / 'beacond.conf'
    conf.write_text(text)
    return conf, run_cli('check-config', '-c', str(conf))


def test_one_file_as_identity_key_and_resolving_key_is_refused_naming_both_uses(tmp_path):
    conf, r = check(tmp_path, resolvable(1, 'one.key') + eid('one.key'))
    assert r.returncode == 78, r.stdout + r.stderr
    assert (f"{conf}:10:21: error: 'identity_key_file' in [[beacon]] #2: the file it names is also the resolving_key_file "
            "of [[beacon]] #1 (line 6): a file holds one key for one use") in r.stderr, r.stderr
    assert KEY[:8] not in r.stdout + r.stderr


def test_through_another_name_or_a_symlink_it_is_the_same_file(tmp_path):
    conf, r = check(tmp_path, resolvable(1, 'alias.key') + bthome(str(tmp_path / 'keys' / 'one.key')))
    assert r.returncode == 78, r.stdout + r.stderr
    assert "'bindkey_file' in [[beacon]] #2: the file it names is also the resolving_key_file of [[beacon]] #1 (line 6)" in r.stderr, r.stderr


def test_two_beacons_may_share_one_resolving_key(tmp_path):
    conf, r = check(tmp_path, resolvable(1, 'one.key') + resolvable(2, 'alias.key'))
    assert r.returncode == 0, r.stderr


def test_irk_refuses_a_resolving_key_that_is_also_an_identity_key(tmp_path):
    conf, _ = check(tmp_path, resolvable(1, 'one.key') + eid('alias.key'))
    r = run_cli('irk', '-c', str(conf))
    assert r.returncode == 78 and r.stdout == '' and KEY[:8] not in r.stderr, r.stdout + r.stderr
    assert 'is also the resolving_key_file of [[beacon]] #1' in r.stderr, r.stderr
