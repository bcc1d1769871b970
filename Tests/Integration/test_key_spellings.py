"""A key pasted where a key file's name belongs never reaches stderr (the journal, STATUS, Ansible's output), in any
spelling a user may paste it: as `beacond irk` prints it, UUID-style, colon-separated, hex with one typo (issue #53)."""
from __future__ import annotations

import re

import pytest

from conftest import APPLE_UUID, run_cli

SPELLINGS = {
    'base64': 'dHVQiYLiTV2W1HUaNORnQw==',
    'uuid-style': '9f11c1b2-d3e4-f5a6-b7c8-d9e0f1a2b3c4',
    'colon-separated': '9f:11:c1:b2:d3:e4:f5:a6:b7:c8:d9:e0:f1:a2:b3:c4',
    'one typo': '9f11c1b2d3e4f5agb7c8d9e0f1a2b3c4',
}
BEACONS = {
    'resolving_key_file': f'[beacon]\nuuid = "{APPLE_UUID}"\nmajor = 1\nminor = 1\naddress = "resolvable"\n',
    'bindkey_file': '[beacon]\nformat = "bthome"\nname = "shop7"\n',
    'identity_key_file': '[beacon]\nformat = "eddystone-eid"\n',
}


def bare(text: str) -> str:
    return re.sub(r'[:\-= ]', '', text.lower())


@pytest.mark.parametrize('key', BEACONS)
@pytest.mark.parametrize('spelling', SPELLINGS)
def test_a_key_pasted_unquoted_is_said_by_kind_and_length_only(tmp_path, key, spelling):
    secret = SPELLINGS[spelling]
    conf = tmp_path / 'beacond.conf'
    conf.write_text(BEACONS[key] + f'{key} = {secret}\n')
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 78, r.stderr
    line = BEACONS[key].count('\n') + 1
    assert (f"{conf}:{line}:{len(key) + 4}: error: '{key}' in [beacon]: the value ({len(secret)} characters) is not valid here; "
            "it is not shown, since it may be a key") in r.stderr, r.stderr
    flat = bare(r.stdout + r.stderr)
    s = bare(secret)
    assert not [s[i:i + 6] for i in range(len(s) - 5) if s[i:i + 6] in flat], r.stderr
