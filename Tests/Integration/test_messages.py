"""The words a careful owner reads (issue #53 §4), each held to the fact it states where a test can: tried as a new
user would, these misled."""
from __future__ import annotations

import os
import re
import subprocess

from conftest import ROOT, beacond_path, run_cli
from test_eid import write_key


def test_gen_uuid_set_again_says_the_uuid_is_there_not_that_the_file_is_invalid(tmp_path):
    conf = tmp_path / 'b.conf'
    conf.write_text('[beacon]\nmajor = 1\nminor = 1\n')
    assert run_cli('gen-uuid', '--set', str(conf)).returncode == 0
    r = run_cli('gen-uuid', '--set', str(conf))
    assert r.returncode == 78 and 'must be a valid config' not in r.stderr, r.stderr
    assert f"Error: not changing {conf}: its uuid is kept" in r.stderr and 'is already' in r.stderr, r.stderr
    # A file that does not parse still says so.
    conf.write_text('[beacon\n')
    r = run_cli('gen-uuid', '--set', str(conf))
    assert r.returncode == 78 and 'must be a valid config before and after the change' in r.stderr, r.stderr


def test_irk_on_a_missing_key_file_shows_no_name(tmp_path):
    conf = tmp_path / 'beacond.conf'
    conf.write_text('[beacon]\nuuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"\nmajor = 1\nminor = 1\naddress = "resolvable"\n'
                    'resolving_key_file = "door-secret.irk"\n')
    r = run_cli('irk', '-c', str(conf))
    assert r.returncode == 78 and 'does not exist' in r.stderr, r.stderr
    assert 'door-secret' not in r.stderr and 'a name is never shown' in r.stderr, r.stderr


def test_gen_key_says_what_the_key_is_for_whatever_its_use(tmp_path):
    r = run_cli('gen-key', str(tmp_path / 'door.irk'))
    assert r.returncode == 0, r.stderr
    assert 'identity key' not in r.stdout, r.stdout
    assert re.search(r'Wrote a new 128-bit key to .*door\.irk \(mode 0600\)', r.stdout), r.stdout
    for use in ('identity_key_file', 'resolving_key_file', 'bindkey_file'):
        assert use in r.stdout, r.stdout


def test_a_missing_config_names_the_example_the_package_installs(tmp_path):
    r = run_cli('check-config', '-c', str(tmp_path / 'none.conf'))
    m = re.search(r'copy the example (\S+), then', r.stderr)
    assert r.returncode == 78 and m, r.stderr
    assert 'config/' not in r.stderr
    # What the package holds there: scripts/install.sh, as build-deb.sh runs it (PREFIX=/usr), installs the config.
    pages = tmp_path / 'man'
    pages.mkdir()
    (pages / 'beacond.8').write_text('')
    (pages / 'beacond.conf.5').write_text('')
    stage = tmp_path / 'stage'
    subprocess.run(['sh', str(ROOT / 'scripts' / 'install.sh'), str(beacond_path())], check=True, capture_output=True,
                   env={**os.environ, 'DESTDIR': str(stage), 'PREFIX': '/usr', 'SYSCONFDIR': '/etc', 'MAN_PAGES': str(pages)})
    assert 'PREFIX=/usr' in (ROOT / 'scripts' / 'build-deb.sh').read_text()
    assert (stage / m.group(1).lstrip('/')).read_text() == (ROOT / 'config' / 'beacond.conf').read_text()


def test_check_config_says_each_named_beacons_pdu_and_how_often_a_pi_sends_each(tmp_path):
    """Three named beacons (config/three-beacons.conf) were each "scannable", then summed up as `pdu ADV_NONCONN_IND`,
    with `interval 100 ms` where a Pi, whose controller has no advertising sets, sends each every 300 ms."""
    conf = tmp_path / 'three.conf'
    conf.write_text((ROOT / 'config' / 'three-beacons.conf').read_text()
                    .replace('[[beacon]]\n', '[[beacon]]\nuuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"\n'))
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 0, r.stderr
    assert 'ADV_NONCONN_IND' not in r.stdout, r.stdout
    assert r.stdout.count('    pdu           ADV_SCAN_IND (scannable: its name in a scan response)\n') == 3, r.stdout
    # #54: what the slots are depends on the controller, which only a start can tell: said so.
    assert ('  interval        100 ms (160 × 0.625 ms) for each beacon on a controller with advertising sets; on one without '
            "(every Raspberry Pi's), the 3 beacons take turns in 100 ms slots, each restarted from its beacon's address and "
            'advertising every 35 ms within it: each every 300 ms on a Bluetooth 5.0 controller or later (690 ms before 5.0, '
            "whose floor is 100 ms); a controller slow to answer gets longer slots, and 'beacond status' says what each beacon gets\n") in r.stdout, r.stdout
    assert '  pdu             ADV_SCAN_IND (non-connectable; scannable: a beacon has a name)\n' in r.stdout, r.stdout


def test_the_readmes_status_example_is_what_a_pi_says(tmp_path, processes):
    """The README's `systemctl status` line showed an extended controller; it is the line beacond writes on a model
    of a Pi's radio (the CYW43455: no advertising sets), for the README's own first config, address aside."""
    import json
    from harness.lab import Lab, wait_for
    from harness.personalities import CYW43455
    readme = (ROOT / 'README.md').read_text()
    m = re.search(r'^\s+Status: "(Advertising [^"]+)"$', readme, re.M)
    assert m, 'no Status: line in the README'
    said = m.group(1)
    conf = tmp_path / 'beacond.conf'
    conf.write_text('[beacon]\nuuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"\nmajor = 1\nminor = 1\n')
    xdg = tmp_path / 'xdg'
    xdg.mkdir(mode=0o700)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', personality=CYW43455):
        processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'XDG_RUNTIME_DIR': str(xdg)})
        line = wait_for(lambda: (r := run_cli('status', '--json', '-c', str(conf), env={**os.environ, 'XDG_RUNTIME_DIR': str(xdg)}))
                        and r.returncode == 0 and json.loads(r.stdout)['daemons'][0]['status'], 10, what='advertising')
    address = re.compile(r'[0-9A-F]{2}(:[0-9A-F]{2}){5}')
    assert address.sub('ADDRESS', said) == address.sub('ADDRESS', line).replace('unix:' + str(sock), 'hci0'), (said, line)


def test_the_demos_docstring_names_the_pis_its_radio_model_is_in():
    """harness/demo.py put the Pi 400 on the CYW43455; its BCM43456 is another personality. The Pis the docstring
    names are those of the personality the demo plays."""
    from harness import demo
    from harness.personalities import CYW43455
    m = re.search(r'playing a CYW43455 \(the radio of the (?:Raspberry )?Pi ([^:]+):', ' '.join(demo.__doc__.split()))
    assert m, demo.__doc__
    named = re.split(r', | and ', m.group(1))
    listed = re.search(r'Raspberry Pi ([^(]+)\(', CYW43455.devices).group(1)
    assert named and all(re.search(rf'(^|, ){re.escape(n)}(,|$)', listed.strip()) for n in named), (named, listed)
