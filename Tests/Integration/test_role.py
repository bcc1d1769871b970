"""The Ansible role's checks and its config template, with ansible-core itself on this machine: the role's argument
specs and its first tasks (tasks/checks.yml) refuse what would reach a unit file, a path or a shell, and the template
renders what beacond reads as the inventory meant it. The whole role against real hosts is the fleet test's
(Tests/VM/fleet.py).

Every test that runs Ansible runs with each ansible-core the role claims to work with (meta/main.yml, the README):
the newest, the test venv's (Tests/Integration/requirements.txt, the fleet test's control node), and the oldest, in
a venv of its own that scripts/test-venv.sh makes once and keeps outside the checkout
(requirements-ansible-oldest.txt). A version whose venv cannot be made fails its tests, saying so.

yamllint and ansible-lint (production profile, offline) pass over deploy/ansible, as prometheus-community's
node_exporter role has them: in a venv the same script makes (requirements-ansible-lint.txt), failing alike."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conftest import ROOT, beacond_path, run_cli

ROLE = ROOT / 'deploy' / 'ansible' / 'roles' / 'beacond'
NEWEST = ROOT / 'Tests' / 'Integration' / 'requirements.txt'
OLDEST = ROOT / 'Tests' / 'Integration' / 'requirements-ansible-oldest.txt'
LINT = ROOT / 'Tests' / 'Integration' / 'requirements-ansible-lint.txt'
DEPLOY = ROOT / 'deploy' / 'ansible'


def pinned(requirements: Path) -> str:
    """The ansible-core version a requirements file pins."""
    return re.search(r'^ansible-core==(\S+)$', requirements.read_text(), re.M).group(1)


@functools.cache
def made_venv(requirements: Path) -> tuple[Path | None, str]:
    """The venv of a requirements file (made once, then cached by scripts/test-venv.sh: the oldest ansible-core's, the
    linters'), or None and why not."""
    r = subprocess.run(['sh', str(ROOT / 'scripts' / 'test-venv.sh'), str(requirements)], capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        return None, r.stderr.strip()[-2000:]
    return Path(r.stdout.strip()), ''


@pytest.fixture(scope='session', params=[pinned(NEWEST), pinned(OLDEST)], ids=lambda v: f'ansible-core-{v}')
def ansible(request) -> Path:
    """The bin directory of a venv with this ansible-core (checked: `ansible-playbook --version` says it)."""
    version = request.param
    if version == pinned(NEWEST):
        bin_dir = Path(sys.executable).parent
    else:
        venv, why = made_venv(OLDEST)
        if venv is None:
            pytest.fail(f'ANSIBLE-CORE {version}: ITS VENV COULD NOT BE MADE, so the role is not tested with the oldest '
                        f'ansible-core it claims (scripts/test-venv.sh {OLDEST.name}):\n{why}', pytrace=False)
        bin_dir = venv / 'bin'
    playbook = bin_dir / 'ansible-playbook'
    if not playbook.exists():
        pytest.fail(f'ansible-playbook is not in {bin_dir}: make venv', pytrace=False)
    said = subprocess.run([str(playbook), '--version'], capture_output=True, text=True, timeout=120).stdout
    assert re.search(rf'\[core {re.escape(version)}\]', said), f'{playbook} is not ansible-core {version}: {said}'
    return bin_dir

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    __beacond_config_header: Ansible managed (the beacond role)
    __beacond_render:
      beacons: "{{ beacond_beacons }}"
      advertising: "{{ beacond_advertising | default({}) }}"
      controller: "{{ beacond_controller | default({}) }}"
      daemon: "{{ beacond_daemon | default({}) }}"
      key_prefix: "{{ prefix | default('') }}"
  tasks:
    - name: The role's vars (the typed keys the template reads)
      ansible.builtin.include_vars: "{{ role_dir }}/vars/main.yml"
    - name: The role's argument specs
      ansible.builtin.validate_argument_spec:
        argument_spec: "{{ (lookup('file', role_dir ~ '/meta/argument_specs.yml') | from_yaml).argument_specs.main.options }}"
    - name: The role's checks
      ansible.builtin.include_role:
        name: beacond
        tasks_from: checks.yml
    - name: The role's template
      ansible.builtin.template:
        src: "{{ role_dir }}/templates/beacond.conf.j2"
        dest: "{{ out }}"
    # As tasks/config.yml has it: what the health check wants `beacond status` to say of the file's bytes.
    - name: The SHA-256 of the rendered config
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', role_dir ~ '/templates/beacond.conf.j2') | hash('sha256') }}"
        dest: "{{ out }}.sha256"
"""


def play(tmp_path, ansible: Path, **variables) -> tuple[int, str, str]:
    """Runs the play with these variables (a beacon of its own unless given): exit status, output, rendered file."""
    (tmp_path / 'play.yml').write_text(PLAY)
    out = tmp_path / 'beacond.conf'
    if out.exists():
        out.unlink()
    v = {'role_dir': str(ROLE), 'out': str(out), 'beacond_package': 'beacond.deb',
         'beacond_beacons': [{'uuid': UUID, 'major': 7, 'minor': 1}], **variables}
    (tmp_path / 'vars.json').write_text(json.dumps(v))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', 'localhost,', str(tmp_path / 'play.yml'),
                        '-e', f'@{tmp_path / "vars.json"}', '-e', f'ansible_python_interpreter={ansible / "python"}'],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'ANSIBLE_ROLES_PATH': str(ROLE.parent), 'ANSIBLE_NOCOLOR': '1'})
    return r.returncode, r.stdout + r.stderr, out.read_text() if out.exists() else ''


@pytest.mark.parametrize('variables,message', [
    # A newline in the interval put a line of its own (Unit=reboot.target) into the timer unit.
    ({'beacond_verify_interval': '15min\nUnit=reboot.target'}, 'beacond_verify_interval must be a systemd time span'),
    # The device went raw into the probe's shell.
    ({'beacond_verify_device': 'hci1; touch /tmp/owned'}, "beacond_verify_device must be an adapter's name, hciN"),
    # A mapping key rendered as is: a [controller] table of its own that passed validate:.
    ({'beacond_beacons': [{'uuid': UUID, 'major': 7, 'minor': 1, 'name = "x"\n\n[controller]\nbackend': 'hci'}]},
     "hold the config's keys, lower-case names"),
    # A '=' in a key file's name broke the probe's parsing at every later run.
    ({'beacond_eid_keys': {'shop=7.key': '00' * 16}}, 'names key files: letters, digits'),
    ({'beacond_eid_keys': {'../escape': '00' * 16}}, 'names key files: letters, digits'),
    ({'beacond_verify_hosts': ['pi1', 'x/../../etc']}, 'names hosts whose files the verifier keeps'),
    ({'beacond_status_timeout': 0}, 'must be 1 to 3600 seconds'),
    # Python's $ matched before a final newline, and \s a no-break space, which systemd's time span does not take (a
    # timer that runs only at boot).
    ({'beacond_verify_interval': '1h\u00a030min'}, 'beacond_verify_interval must be a systemd time span'),
    ({'beacond_verify_interval': '15min\n'}, 'beacond_verify_interval must be a systemd time span'),
    ({'beacond_verify_device': 'hci1\n'}, "beacond_verify_device must be an adapter's name, hciN"),
    ({'beacond_eid_keys': {'shop.key\n': '00' * 16}}, 'names key files: letters, digits'),
    ({'beacond_verify_hosts': ['pi1\n']}, 'names hosts whose files the verifier keeps'),
    ({'beacond_beacons': [{'uuid': UUID, 'major': 7, 'minor': 1, 'name\n': 'x'}]}, "hold the config's keys, lower-case names"),
    # Checks back to back.
    ({'beacond_verify_interval': '0'}, 'beacond_verify_interval must be at least 1 min'),
    ({'beacond_verify_interval': '59s 999ms'}, 'beacond_verify_interval must be at least 1 min'),
    # The verifier keeps other hosts' keys as HOST--NAME: a '--' in a key's name would make two copies one.
    ({'beacond_eid_keys': {'store--entrance.key': '00' * 16}}, "without '--'"),
    # An absolute key file: beacond.service (DynamicUser) cannot open /etc/beacond/keys itself, and the role's check
    # before anything is replaced read the old key there, not the new one.
    ({'beacond_beacons': [{'format': 'eddystone-eid', 'identity_key_file': '/etc/beacond/keys/shop.key'}],
      'beacond_eid_keys': {'shop.key': '00' * 16}}, 'identity_key_file must be the name of a key in beacond_eid_keys'),
    ({'beacond_beacons': [{'format': 'eddystone-eid', 'identity_key_file': 'other.key'}],
      'beacond_eid_keys': {'shop.key': '00' * 16}}, 'identity_key_file must be the name of a key in beacond_eid_keys'),
    # beacond_keys is the map's name (beacond_eid_keys its old one, still taken): both at once, the role would have to
    # guess which holds a key.
    ({'beacond_keys': {'shop.key': '00' * 16}, 'beacond_eid_keys': {'old.key': '00' * 16}},
     'give beacond_keys alone: beacond_eid_keys is its old name'),
    ({'beacond_keys': {'shop=7.key': '00' * 16}}, 'beacond_keys names key files: letters, digits'),
])
def test_what_reaches_unit_files_paths_and_the_shell_is_refused_before_any_task(tmp_path, ansible, variables, message):
    code, out, rendered = play(tmp_path, ansible, **variables)
    assert code != 0 and message in out, out[-3000:]
    assert rendered == '', 'the template ran after a refused variable'


@pytest.mark.parametrize('interval', ['1min', '90s', '1h 30min', '2h\t5min', '1.5h', '1w'])
def test_a_verify_interval_of_a_minute_or_more_passes(tmp_path, ansible, interval):
    code, out, rendered = play(tmp_path, ansible, beacond_verify_interval=interval)
    assert code == 0, out[-3000:]


def test_a_wrong_type_is_refused_by_the_argument_specs(tmp_path, ansible):
    code, out, _ = play(tmp_path, ansible, beacond_status_timeout='soon')
    assert code != 0 and 'beacond_status_timeout' in out and 'int' in out, out[-3000:]


def test_the_template_renders_what_beacond_reads_as_the_inventory_meant(tmp_path, ansible):
    # A name beyond the Basic Multilingual Plane: to_json wrote surrogate escapes (\\ud83c\\udf70), which TOML forbids.
    code, out, rendered = play(tmp_path, ansible, beacond_beacons=[{'uuid': UUID, 'major': '7', 'minor': 1, 'name': 'Café 🍰 "7"'}],
                               beacond_advertising={'interval_ms': '200', 'connectable': 'yes'})
    assert code == 0, out[-3000:]
    assert 'name = "Café 🍰 \\"7\\""\n' in rendered and 'major = 7\n' in rendered and 'connectable = true\n' in rendered, rendered
    conf = tmp_path / 'beacond.conf'
    checked = run_cli('check-config', '-c', str(conf))
    assert checked.returncode == 0, checked.stderr
    assert 'Café 🍰 "7"' in run_cli('check-config', '-c', str(conf)).stdout
    # The health check's SHA-256 (from the rendering on the control node) is that of the file's bytes on the host.
    assert (tmp_path / 'beacond.conf.sha256').read_text() == hashlib.sha256(conf.read_bytes()).hexdigest()


def test_a_verifier_renders_each_checked_hosts_key_as_its_own_copy(tmp_path, ansible):
    # (A key file is a name in beacond_eid_keys: the checks refuse a path.)
    code, out, text = play(tmp_path, ansible, prefix='pi1--', beacond_eid_keys={'shop.key': '00' * 16},
                           beacond_beacons=[{'format': 'eddystone-eid', 'identity_key_file': 'shop.key'}])
    assert code == 0, out[-3000:]
    assert 'identity_key_file = "pi1--shop.key"\n' in text, text


# Each kind of key file a beacon names (the schema's keyFile keys, `beacond check-config --schema`): an Eddystone-EID
# identity key, a resolvable address's resolving key, the self-report's bindkey. The role handles them as one.
def kind_beacons(kind: str, name: str) -> list[dict]:
    """An iBeacon and a beacon naming `name` through `kind`."""
    named = {'identity_key_file': {'format': 'eddystone-eid', 'identity_key_file': name},
             'resolving_key_file': {'uuid': UUID, 'major': 7, 'minor': 2, 'address': 'resolvable', 'resolving_key_file': name},
             'bindkey_file': {'format': 'bthome', 'bindkey_file': name}}[kind]
    return [{'uuid': UUID, 'major': 7, 'minor': 1}, named]


KINDS = ['identity_key_file', 'resolving_key_file', 'bindkey_file']


@pytest.mark.parametrize('kind', KINDS)
def test_a_key_file_of_each_kind_is_a_name_in_beacond_keys_never_a_path(tmp_path, ansible, kind):
    # An absolute resolving_key_file or bindkey_file passed: the root-run check read it, and beacond.service
    # (DynamicUser) then got "permission denied" (exit 78 at its next start). A name not in the map was removed.
    for value in ('/etc/beacond/keys/door.key', 'other.key'):
        code, out, rendered = play(tmp_path, ansible, beacond_keys={'door.key': KEY}, beacond_beacons=kind_beacons(kind, value))
        assert code != 0 and f'{kind} must be the name of a key in beacond_keys' in out and value in out, out[-3000:]
        assert rendered == '', 'the template ran after a refused variable'
    code, out, rendered = play(tmp_path, ansible, beacond_keys={'door.key': KEY}, beacond_beacons=kind_beacons(kind, 'door.key'))
    assert code == 0, out[-3000:]
    assert f'{kind} = "door.key"\n' in rendered, rendered


@pytest.mark.parametrize('kind', KINDS)
def test_the_check_before_anything_is_replaced_reads_each_key_kind(tmp_path, ansible, kind):
    code, out = staged(tmp_path, ansible, str(beacond_path()), {'door.key': KEY[:31]}, beacons=kind_beacons(kind, 'door.key'))
    assert code != 0 and 'holds 31 hex digits' in out and f"'{kind}'" in out, out[-3000:]
    assert KEY[:31] not in out and KEY[:31].lower() not in out, out[-3000:]
    code, out = staged(tmp_path, ansible, str(beacond_path()), {'door.key': KEY}, beacons=kind_beacons(kind, 'door.key'))
    assert code == 0, out[-3000:]


def test_the_check_before_anything_is_replaced_runs_whenever_a_key_would_go(tmp_path, ansible):
    # Neither the config nor a key changed, and a key is to be removed: the check ran not, and the key went.
    stand_in = tmp_path / 'beacond'
    stand_in.write_text(f'#!/bin/sh\necho checked > {tmp_path}/checked\nexit 0\n')
    stand_in.chmod(0o755)
    code, out = staged(tmp_path, ansible, str(stand_in), {'door.key': KEY}, changed=False,
                       probe=['/etc/beacond/keys/old.key=600 root:root 0'])
    assert code == 0 and (tmp_path / 'checked').exists(), out[-3000:]
    (tmp_path / 'checked').unlink()
    code, out = staged(tmp_path, ansible, str(stand_in), {'door.key': KEY}, changed=False, probe=[])
    assert code == 0 and not (tmp_path / 'checked').exists(), out[-3000:]


@pytest.mark.parametrize('kind', KINDS)
def test_a_key_a_beacon_names_is_never_removed(tmp_path, ansible, kind):
    # A key named by resolving_key_file or bindkey_file but not in the map was removed, and a restart notified: exit 78,
    # every beacon of the host down.
    got = removed(tmp_path, ansible, 'pi1', {'pi1': {**HOST, 'beacond_beacons': kind_beacons(kind, 'door.key')}},
                  stale=['/etc/beacond/keys/door.key', '/etc/beacond/keys/rotated.key'])
    assert got['own'] == ['/etc/beacond/keys/rotated.key'], got


# The verifier's run (tasks/verifier-on.yml) for real, in a copy of the role whose /etc/beacond/verify is in tmp_path,
# with a build of beacond validating what it renders: each checked host's config, the copies of its keys as HOST--NAME
# (two hosts here, with a key of the same name each), and nothing it does not need.
VERIFIER_PLAY = """
- hosts: gw
  connection: local
  gather_facts: false
  vars:
    __beacond_probe: {stdout_lines: []}
  tasks:
    - name: The verifier's configs and keys
      ansible.builtin.include_role:
        name: beacond
        tasks_from: verifier-on.yml
"""


def verifier_run(tmp_path, ansible: Path, hosts: dict) -> tuple[int, str, Path]:
    """The role's verifier-on.yml without its timer and systemd tasks, on the host gw of this inventory, into
    tmp_path/verify: exit status, output, the directory."""
    import shutil
    import yaml
    role = tmp_path / 'roles' / 'beacond'
    shutil.copytree(ROLE, role)
    verify = tmp_path / 'verify'
    (verify / 'keys').mkdir(parents=True)
    for path in role.rglob('*.yml'):
        text = path.read_text().replace('/etc/beacond/verify', str(verify)).replace('/usr/bin/beacond', str(beacond_path()))
        path.write_text(re.sub(r'^\s*(owner|group): root\n', '', text, flags=re.M))
    tasks = yaml.safe_load((role / 'tasks' / 'verifier-on.yml').read_text())
    kept = [t for t in tasks if 'ansible.builtin.systemd_service' not in t and 'timer' not in str(t.get('name')).lower()
            and '/etc/' not in str(t.get('ansible.builtin.template', {}).get('dest', ''))]
    assert len(kept) >= 3, kept
    (role / 'tasks' / 'verifier-on.yml').write_text(yaml.safe_dump(kept))
    (tmp_path / 'verifier.yml').write_text(VERIFIER_PLAY)
    (tmp_path / 'inventory.json').write_text(json.dumps({'all': {'hosts': hosts}}))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', str(tmp_path / 'inventory.json'), str(tmp_path / 'verifier.yml'),
                        '-e', f'ansible_python_interpreter={ansible / "python"}'],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'ANSIBLE_ROLES_PATH': str(role.parent), 'ANSIBLE_NOCOLOR': '1'})
    return r.returncode, r.stdout + r.stderr, verify


@pytest.mark.parametrize('kind', KINDS)
def test_a_verifier_checks_a_host_with_each_key_kind(tmp_path, ansible, kind):
    # The template prefixed identity_key_file alone: a verify config named door.key where the copy was pi1--door.key,
    # and validate: exited 78.
    other = KEY[::-1]
    hosts = {'gw': {**HOST, 'beacond_verify': True, 'beacond_verify_hosts': ['pi1', 'pi2']},
             'pi1': {**HOST, 'beacond_beacons': kind_beacons(kind, 'door.key'), 'beacond_keys': {'door.key': KEY}},
             'pi2': {**HOST, 'beacond_beacons': kind_beacons(kind, 'door.key'), 'beacond_keys': {'door.key': other}}}
    code, out, verify = verifier_run(tmp_path, ansible, hosts)
    assert code == 0, out[-3000:]
    copies = sorted(p.name for p in (verify / 'keys').iterdir())
    for host, key in (('pi1', KEY), ('pi2', other)):
        conf = (verify / f'{host}.conf').read_text()
        if kind == 'bindkey_file':
            # The verifier never checks the self-report (scan --expect leaves it out): it gets no bindkey, and its
            # copy of the config names none (the self-report there is one it could parse, unencrypted).
            assert 'bindkey_file' not in conf and 'format = "bthome"' in conf, conf
        else:
            assert f'{kind} = "{host}--door.key"\n' in conf, conf
            assert (verify / 'keys' / f'{host}--door.key').read_text() == key + '\n'
        checked = run_cli('check-config', '--keys', str(verify / 'keys'), '--config', str(verify / f'{host}.conf'))
        assert checked.returncode == 0, checked.stderr
    assert copies == ([] if kind == 'bindkey_file' else ['pi1--door.key', 'pi2--door.key']), copies


# The check before anything is replaced (tasks/check-staged.yml): the new config and keys in a private directory,
# and `beacond check-config` on them. Here with a build of beacond (__beacond_command), or a stand-in that says a key.
STAGED_PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The role's vars
      ansible.builtin.include_vars: "{{ role_dir }}/vars/main.yml"
    - name: The role's check before anything is replaced
      ansible.builtin.include_role:
        name: beacond
        tasks_from: check-staged.yml
"""
KEY = '0123456789ABCDEF0123456789ABCDEF'


def staged(tmp_path, ansible: Path, command: str, keys: dict, beacons: list | None = None, changed: bool = True,
           probe: list | None = None) -> tuple[int, str]:
    """The check with these keys (in beacond_keys) and beacons (an EID beacon per key unless given); changed: the
    config and every key are to change (else nothing is, and the probe's lines say what the host has)."""
    (tmp_path / 'staged.yml').write_text(STAGED_PLAY)
    v = {'role_dir': str(ROLE), '__beacond_command': command, '__beacond_keys_changed': list(keys) if changed else [],
         '__beacond_config_changed': changed, 'beacond_keys': keys, 'beacond_eid_keys': {},
         '__beacond_probe': {'stdout_lines': probe or []},
         'beacond_beacons': beacons or [{'format': 'eddystone-eid', 'identity_key_file': name} for name in keys]}
    (tmp_path / 'vars.json').write_text(json.dumps(v))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', 'localhost,', str(tmp_path / 'staged.yml'),
                        '-e', f'@{tmp_path / "vars.json"}', '-e', f'ansible_python_interpreter={ansible / "python"}'],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'ANSIBLE_ROLES_PATH': str(ROLE.parent), 'ANSIBLE_NOCOLOR': '1'})
    return r.returncode, r.stdout + r.stderr


def test_the_check_before_anything_is_replaced_fails_with_beaconds_message_and_never_a_key(tmp_path, ansible):
    # beacond's own message (it never prints a key itself) for a key of 31 hex digits.
    code, out = staged(tmp_path, ansible, str(beacond_path()), {'shop.key': KEY[:31]})
    assert code != 0 and 'holds 31 hex digits; an Eddystone-EID identity key is 128 bits: 32 hex digits' in out, out[-3000:]
    assert KEY[:31] not in out and KEY[:31].lower() not in out, out[-3000:]
    # A message that did hold a key (a stand-in for a beacond that printed one): the play shows the message, not the key.
    stand_in = tmp_path / 'beacond'
    stand_in.write_text(f'#!/bin/sh\necho "$3" > {tmp_path}/checked-in\n'
                        'echo "$5:3:1: error: the key $(cat "$3/shop.key") is no good" >&2\nexit 78\n')
    stand_in.chmod(0o755)
    code, out = staged(tmp_path, ansible, str(stand_in), {'shop.key': KEY})
    assert code != 0 and 'beacond.conf:3:1: error: the key' in out and 'is no good' in out, out[-3000:]
    assert KEY not in out and KEY.lower() not in out, out[-3000:]
    # The private directory the check ran in is gone afterwards.
    checked_in = (tmp_path / 'checked-in').read_text().strip()
    assert 'beacond-check.' in checked_in and not os.path.exists(checked_in), checked_in
    # A good key passes.
    code, out = staged(tmp_path, ansible, str(beacond_path()), {'shop.key': KEY})
    assert code == 0, out[-3000:]


# What the role removes from a host (vars/main.yml: __beacond_keys_gone, __beacond_verifier_keys_gone,
# __beacond_verifier_files_gone), for a host whose files are those the role writes there (each path as the role's own
# tasks render it) and some it no longer should have. Nothing the role writes may be removed, whatever the names.
REMOVAL_PLAY = """
- hosts: "{{ target }}"
  connection: local
  gather_facts: false
  tasks:
    - name: The role's vars
      ansible.builtin.include_vars: "{{ role_dir }}/vars/main.yml"
    - name: The host's own keys, where tasks/config.yml writes them
      ansible.builtin.set_fact:
        written: "{{ written | default([]) + [own_key_dest] }}"
      loop: "{{ __beacond_keys | dict2items }}"
    - name: A verifier's copies of the keys the checked hosts' configs name, where tasks/verifier-on.yml writes them
        (and stale ones)
      ansible.builtin.set_fact:
        copies: "{{ copies | default([]) + [copy_dest] }}"
      loop: "{{ (__beacond_verifier_keys if beacond_verify else []) + stale_copies }}"
    - name: The probe finds them all (and the stale files)
      ansible.builtin.set_fact:
        __beacond_probe:
          stdout_lines: "{{ (written | default([]) + copies | default([]) + stale) | map('regex_replace', '$', '=600 root:root 0') | list }}"
    - name: What the role would remove
      ansible.builtin.copy:
        content: >-
          {{ {'written': written | default([]), 'copies': copies | default([]),
              'own': __beacond_keys_gone | map('regex_replace', '^(?!/)', '/etc/beacond/keys/') | list,
              'verifier': __beacond_verifier_keys_gone if beacond_verify else [],
              'off': __beacond_verifier_files_gone if not beacond_verify else []} | to_json }}
        dest: "{{ out }}"
"""


def removed(tmp_path, ansible: Path, target: str, hosts: dict, stale=(), stale_copies=()) -> dict:
    import yaml
    own_dest = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'config.yml').read_text())
                    if t.get('name') == 'The keys')['ansible.builtin.copy']['dest']
    copy_dest = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'verifier-on.yml').read_text())
                     if t.get('name') == "The keys the checked hosts' configs name")['ansible.builtin.copy']['dest']
    (tmp_path / 'removal.yml').write_text(REMOVAL_PLAY)
    (tmp_path / 'inventory.json').write_text(json.dumps({'all': {'hosts': hosts}}))
    out = tmp_path / 'removed.json'
    v = {'role_dir': str(ROLE), 'out': str(out), 'target': target, 'own_key_dest': own_dest, 'copy_dest': copy_dest,
         'stale': list(stale), 'stale_copies': [{'host': h, 'name': k} for h, k in stale_copies]}
    (tmp_path / 'vars.json').write_text(json.dumps(v))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', str(tmp_path / 'inventory.json'), str(tmp_path / 'removal.yml'),
                        '-e', f'@{tmp_path / "vars.json"}', '-e', f'ansible_python_interpreter={ansible / "python"}'],
                       capture_output=True, text=True, timeout=120, env={**os.environ, 'ANSIBLE_NOCOLOR': '1'})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(out.read_text())


HOST = {'beacond_verify': False, 'beacond_verify_hosts': [], 'beacond_keys': {}, 'beacond_eid_keys': {}, 'beacond_beacons': [],
        'beacond_verify_device': 'hci1'}


def eid(name: str) -> dict:
    """A host's variables for an EID beacon with the key `name` (in the map by its old name, beacond_eid_keys)."""
    return {'beacond_beacons': [{'format': 'eddystone-eid', 'identity_key_file': name}], 'beacond_eid_keys': {name: ''}}


def test_a_host_that_is_no_verifier_keeps_its_own_keys_whatever_their_names(tmp_path, ansible):
    # verifier-off.yml removed every key file with '--' in its name: the host's own, at every run.
    got = removed(tmp_path, ansible, 'pi1', {'pi1': {**HOST, 'beacond_eid_keys': {'store--entrance.key': '', 'shop.key': ''}}},
                  stale=['/etc/beacond/keys/rotated.key'])
    assert len(got['written']) == 2
    assert not set(got['written']) & set(got['own'] + got['off']), got
    assert got['own'] == ['/etc/beacond/keys/rotated.key'], got


def test_a_verifier_keeps_its_copies_whatever_the_checked_hosts_are_called(tmp_path, ansible):
    # verifier.yml split its copies' names at the first '--': a host called shop--7 was "no longer checked".
    hosts = {'gw': {**HOST, 'beacond_verify': True, 'beacond_verify_hosts': ['shop--7', 'pi1'], 'beacond_eid_keys': {'gw.key': ''}},
             'shop--7': {**HOST, **eid('door.key')}, 'pi1': {**HOST, **eid('shop.key')}, 'old': {**HOST, **eid('k.key')}}
    got = removed(tmp_path, ansible, 'gw', hosts, stale_copies=[('old', 'k.key'), ('pi1', 'rotated.key')])
    assert len(got['written']) == 1 and len(got['copies']) == 4, got
    wanted, stale = got['written'] + got['copies'][:2], got['copies'][2:]
    assert not set(wanted) & set(got['own'] + got['verifier']), got
    # A host no longer checked, and a key a checked host no longer has: their copies go (and only those).
    assert sorted(got['verifier']) == sorted(stale), got
    assert got['own'] == [], got


def test_a_verifier_turned_off_removes_its_copies_and_not_the_hosts_own_keys(tmp_path, ansible):
    hosts = {'gw': {**HOST, 'beacond_eid_keys': {'gw.key': ''}}, 'shop--7': {**HOST, **eid('door.key')}}
    # The role's file for the timer's service goes too; the admin's own /etc/default/beacond-verify stays.
    role_files = ['/etc/beacond/verify/shop--7.conf', '/etc/systemd/system/beacond-verify@hci1.timer', '/etc/default/beacond-verify-hci1']
    got = removed(tmp_path, ansible, 'gw', hosts, stale=role_files + ['/etc/default/beacond-verify'], stale_copies=[('shop--7', 'door.key')])
    assert not set(got['written']) & set(got['off'] + got['own']), got
    assert sorted(got['off']) == sorted(got['copies'] + role_files), got


def test_the_probe_finds_the_newest_of_the_services_own_keys_whatever_their_names(tmp_path):
    """The lost-restart check (tasks/config.yml) compares the service's start with keys.newest from the probe: a key
    newer than the service is not among its credentials. The probe skipped names with '--'."""
    import yaml
    probe = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'probe.yml').read_text())
                 if t.get('register') == '__beacond_probe')['ansible.builtin.raw']
    root = tmp_path / 'root'
    script = probe.replace('{{ beacond_verify_device }}', 'hci1').replace('/etc/', f'{root}/etc/')
    assert '{{' not in script, script
    keys = root / 'etc' / 'beacond' / 'keys'
    keys.mkdir(parents=True)
    copies = root / 'etc' / 'beacond' / 'verify' / 'keys'
    copies.mkdir(parents=True)
    for name, mtime in (('shop.key', 1_700_000_000.5), ('store--entrance.key', 1_700_000_100.25)):
        (keys / name).write_text('00' * 16 + '\n')
        os.utime(keys / name, (mtime, mtime))
    # A verifier's copy of another host's key, newer still: not the service's key.
    (copies / 'pi1--door.key').write_text('00' * 16 + '\n')
    os.utime(copies / 'pi1--door.key', (1_700_000_200, 1_700_000_200))
    r = subprocess.run(['sh', '-c', script], capture_output=True, text=True, timeout=60)
    lines = dict(l.split('=', 1) for l in r.stdout.splitlines() if '=' in l)
    assert lines.get('keys.newest') == '1700000100250000', r.stdout + r.stderr


def test_a_verifier_turned_off_removes_its_metrics_files_and_follows_no_symlink(tmp_path):
    """Left behind, node_exporter serves the last check for ever, and BeaconVerifierStale fires for ever. The probe
    finds the files; verifier-off.yml removes them (run here with the host's root moved into tmp_path)."""
    import yaml
    root = tmp_path / 'root'
    tasks = yaml.safe_load((ROLE / 'tasks' / 'verifier-off.yml').read_text())
    remove = next((t for t in tasks if 'node-exporter' in str(t.get('ansible.builtin.raw', ''))), None)
    assert remove is not None, 'verifier-off.yml removes no metrics file'
    probe = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'probe.yml').read_text())
                 if t.get('register') == '__beacond_probe')['ansible.builtin.raw']
    def run(script):
        return subprocess.run(['sh', '-c', script.replace('{{ beacond_verify_device }}', 'hci1').replace('/etc/', f'{root}/etc/')
                               .replace('/var/lib/', f'{root}/var/lib/')], capture_output=True, text=True, timeout=60)
    textfiles = root / 'var/lib/prometheus/node-exporter'
    textfiles.mkdir(parents=True)
    for name in ('beacond-verify-hci1.prom', 'beacond-verify-hci1.interval.prom', 'node.prom'):
        (textfiles / name).write_text('x 1\n')
    found = [l.split('=', 1)[0] for l in run(probe).stdout.splitlines() if 'node-exporter' in l]
    assert sorted(found) == [f'{textfiles}/beacond-verify-hci1.interval.prom', f'{textfiles}/beacond-verify-hci1.prom'], found
    r = run(remove['ansible.builtin.raw'])
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in textfiles.iterdir()) == ['node.prom']
    # The directory a symlink (its parent is the prometheus user's): nothing removed where it points.
    elsewhere = root / 'etc' / 'elsewhere'
    elsewhere.mkdir(parents=True)
    (elsewhere / 'beacond-verify-hci1.prom').write_text('x 1\n')
    textfiles.rename(root / 'var/lib/prometheus/real')
    os.symlink(elsewhere, textfiles)
    run(remove['ansible.builtin.raw'])
    assert (elsewhere / 'beacond-verify-hci1.prom').exists()


@pytest.mark.parametrize('interval,seconds', [('15min', 900), ('1h 30min', 5400), ('90s', 90), ('2h\t5min', 7500),
                                              ('1.5h', 5400), ('1w', 604800), ('1min 500ms', 60)])
def test_a_verifier_tells_its_service_the_interval_in_seconds(tmp_path, ansible, interval, seconds):
    """The timer runs the check every beacond_verify_interval; the service says so in its metrics (BeaconVerifierStale
    compares the last check's age with 3 of them), from the file the role writes for it (/etc/default/beacond-verify-DEVICE)."""
    (tmp_path / 'dropin.yml').write_text("""
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.include_vars: "{{ role_dir }}/vars/main.yml"
    - ansible.builtin.template:
        src: "{{ role_dir }}/templates/beacond-verify.default.j2"
        dest: "{{ out }}"
""")
    out = tmp_path / 'beacond-verify-hci1'
    (tmp_path / 'vars.json').write_text(json.dumps({'role_dir': str(ROLE), 'out': str(out), 'beacond_verify_interval': interval,
                                                    'beacond_verify_device': 'hci1'}))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', 'localhost,', str(tmp_path / 'dropin.yml'),
                        '-e', f'@{tmp_path / "vars.json"}', '-e', f'ansible_python_interpreter={ansible / "python"}'],
                       capture_output=True, text=True, timeout=120, env={**os.environ, 'ANSIBLE_NOCOLOR': '1'})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert f'\nBEACOND_VERIFY_INTERVAL_SECONDS={seconds}\n' in out.read_text(), out.read_text()


# The health check (tasks/health.yml): `beacond status --json --config /etc/beacond/beacond.conf --expect-sha256 SHA`
# on the host, until beacond says `ok`, and beacond's `problems` when it does not. Here with a stand-in for beacond
# (__beacond_command) that prints the reports a test writes, one per call, as the raw task brings them back.
# (beacond's side of it, `status --expect-sha256`, is #45's other half: test_the_health_check_reads_beaconds_own_report
# runs the role's check on the real one once it has the option.)
HEALTH_PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The role's vars
      ansible.builtin.include_vars: "{{ role_dir }}/vars/main.yml"
    - name: The role's health check
      ansible.builtin.include_role:
        name: beacond
        tasks_from: health.yml
"""
DEPLOYED = hashlib.sha256(b'# the config the role deployed\n').hexdigest()
STATUS_ARGS = f'status --json --config /etc/beacond/beacond.conf --expect-sha256 {DEPLOYED}'


def report(ok: bool, *problems: str) -> str:
    """What `beacond status --json --expect-sha256` says (the fields the role reads: ok, problems; daemons beside)."""
    return json.dumps({'ok': ok, 'problems': list(problems), 'daemons': []}, indent=2)


def health(tmp_path, ansible: Path, *outputs: tuple[str, int], timeout: int = 10, check: bool = False,
           command: str | None = None) -> tuple[int, str, list[str]]:
    """Runs the role's health check against a stand-in beacond that prints outputs[n] (text, exit status) at its
    n-th call (the last one from then on): the play's exit status, its output, and the stand-in's arguments per call."""
    (tmp_path / 'health.yml').write_text(HEALTH_PLAY)
    calls = tmp_path / 'calls'
    for n, (text, rc) in enumerate(outputs, 1):
        (tmp_path / f'report-{n}').write_text(text)
        (tmp_path / f'report-{n}.rc').write_text(str(rc))
    stand_in = tmp_path / 'beacond'
    stand_in.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nn=$(wc -l < {calls})\n'
                        f'[ "$n" -le {len(outputs)} ] || n={len(outputs)}\n'
                        f'cat {tmp_path}/report-$n\nexit $(cat {tmp_path}/report-$n.rc)\n')
    stand_in.chmod(0o755)
    v = {'role_dir': str(ROLE), '__beacond_command': command or str(stand_in), '__beacond_config_sha256': DEPLOYED,
         'beacond_status_timeout': timeout}
    (tmp_path / 'vars.json').write_text(json.dumps(v))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', 'localhost,', str(tmp_path / 'health.yml'),
                        '-e', f'@{tmp_path / "vars.json"}', '-e', f'ansible_python_interpreter={ansible / "python"}',
                        *(['--check'] if check else [])],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'ANSIBLE_ROLES_PATH': str(ROLE.parent), 'ANSIBLE_NOCOLOR': '1'})
    return r.returncode, r.stdout + r.stderr, calls.read_text().splitlines() if calls.exists() else []


NOT_YET = 'beacond.service: beacon 2 (eddystone-eid) is not on the air yet: applying'


def test_the_health_check_asks_beacond_about_the_rendered_file_and_passes_when_it_says_ok(tmp_path, ansible):
    code, out, calls = health(tmp_path, ansible, (report(True), 0))
    assert code == 0, out[-3000:]
    assert calls == [STATUS_ARGS], calls


def test_the_health_check_waits_until_beacond_says_ok(tmp_path, ansible):
    code, out, calls = health(tmp_path, ansible, (report(False, NOT_YET), 1), (report(False, NOT_YET), 1), (report(True), 0))
    assert code == 0, out[-3000:]
    assert calls == [STATUS_ARGS] * 3, calls


def test_the_health_check_fails_the_host_with_beaconds_problems(tmp_path, ansible):
    other = ('beacond.service runs another config (SHA-256 0123456789ab…) than expected (' + DEPLOYED[:12] + '…)')
    code, out, calls = health(tmp_path, ansible, (report(False, other, NOT_YET), 1), timeout=2)
    assert code != 0, out[-3000:]
    assert (f'beacond on localhost does not have the config the role rendered on the air after 2 s: {other}; {NOT_YET}'
            in ' '.join(out.split())), out[-3000:]
    # Every 2 s for up to beacond_status_timeout: two calls for 2 s.
    assert calls == [STATUS_ARGS] * 2, calls


def test_the_health_check_does_not_take_a_report_without_ok_for_one(tmp_path, ansible):
    # No problems but no ok (or ok as a string): not on the air, and said so.
    for text in (report(False), json.dumps({'ok': 'true', 'problems': []}), json.dumps({'problems': []})):
        code, out, _ = health(tmp_path, ansible, (text, 1), timeout=1)
        assert code != 0 and 'beacond says the config is not on the air as rendered, and names no problem' in out, out[-3000:]


def test_the_health_check_reads_the_report_through_a_terminal(tmp_path, ansible):
    # raw runs under a tty: \r\n line endings, stderr in the same stream, ssh's goodbye after the object.
    text = report(True).replace('\n', '\r\n') + '\r\nShared connection to shop8-pi1 closed.\r\n'
    code, out, _ = health(tmp_path, ansible, (text, 0))
    assert code == 0, out[-3000:]


def test_the_health_check_says_when_there_is_no_report(tmp_path, ansible):
    # A beacond older than the option says so, and prints no report: the host fails with its words.
    code, out, calls = health(tmp_path, ansible, ("Error: Unknown option '--expect-sha256'\nUsage: beacond status …\n", 64),
                              timeout=1)
    assert code != 0 and "`beacond status --json` printed no report (exit 64): Error: Unknown option '--expect-sha256'" in out, out[-3000:]
    code, out, _ = health(tmp_path, ansible, ('', 0), command=str(tmp_path / 'no-such-beacond'), timeout=1)
    assert code != 0 and '`beacond status --json` printed no report (exit 127)' in out, out[-3000:]


def test_the_health_check_looks_once_and_only_reports_in_check_mode(tmp_path, ansible):
    code, out, calls = health(tmp_path, ansible, (report(False, NOT_YET), 1), timeout=60, check=True)
    assert code == 0, out[-3000:]
    assert '(--check: nothing was applied)' in out and NOT_YET in out, out[-3000:]
    assert calls == [STATUS_ARGS], calls


def test_the_health_check_reads_beaconds_own_report(tmp_path, ansible):
    """The role's check against the real beacond (no beacond runs /etc/beacond/beacond.conf here): beacond's report,
    with ok false and its problems, fails the host with them. Needs `beacond status --expect-sha256`, #45's other
    half: until beacond has it, this test is skipped, saying so."""
    if '--expect-sha256' not in run_cli('status', '--help').stdout:
        pytest.skip(f'{beacond_path()} has no `status --expect-sha256` yet (#45, beacond\'s half): the role\'s health '
                    'check needs it')
    said = run_cli(*STATUS_ARGS.split())
    got = json.loads(said.stdout)
    assert got['ok'] is False and got['problems'] and all(isinstance(p, str) for p in got['problems']), said.stdout
    code, out, _ = health(tmp_path, ansible, ('', 0), command=str(beacond_path()), timeout=1)
    assert code != 0 and 'does not have the config the role rendered on the air after 1 s: ' + got['problems'][0] in out, out[-3000:]


def test_the_role_takes_reload_and_health_from_beacond_not_from_its_log():
    text = '\n'.join(p.read_text() for p in sorted(ROLE.rglob('*')) if p.is_file())
    for gone in ('journalctl', 'Reloading configuration', 'StatusText', 'kept previous configuration', 'beacond_healthy'):
        assert gone not in text, gone
    import yaml
    handler = {h['name']: h for h in yaml.safe_load((ROLE / 'handlers' / 'main.yml').read_text())}['Reload beacond']
    assert handler['ansible.builtin.systemd_service'] == {'name': 'beacond.service', 'state': 'reloaded'}
    # A run with nothing to change starts no Python on the host (the fleet test): the check is a raw command.
    check = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'health.yml').read_text())
                 if t.get('register') == '__beacond_status_run')
    assert ' '.join(check['ansible.builtin.raw'].split()) == (
        '{{ __beacond_command | quote }} status --json --config /etc/beacond/beacond.conf '
        '--expect-sha256 {{ __beacond_config_sha256 | quote }}') and check['check_mode'] is False


def test_the_role_re_derives_nothing_beacond_judges():
    """What is on the air as configured is beacond's to say (`status --expect-sha256`): the role holds no copy of its
    validator or its address plan (0x numbers, rotation_exponent's default, the TLM and EID addresses, the address
    kinds), which the schema's test could not keep in step with beacond."""
    text = '\n'.join(p.read_text() for p in sorted(ROLE.rglob('*')) if p.is_file())
    for gone in ("int(base=16)", 'rotation_exponent_default', 'address_kind', 'eddystone-tlm', 'on_air'):
        assert gone not in text, gone


def test_the_role_agrees_with_beacond_schema():
    """The typed keys the template writes as numbers or booleans, and the keys each table option's description lists,
    are the schema's (`beacond check-config --schema`)."""
    import yaml
    schema = json.loads(run_cli('check-config', '--schema', check=True).stdout)
    variables = yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())
    def kind(k):
        return list(dict.fromkeys(r['key'] for r in schema['keys'] if r['kind'] == k))
    assert variables['__beacond_integer_keys'] == kind('integer')
    assert variables['__beacond_boolean_keys'] == kind('boolean')
    # The keys that name a key file (identity_key_file, bindkey_file, resolving_key_file): the role prefixes each for a
    # verifier, refuses a path for each, and keeps every file one names.
    key_files = list(dict.fromkeys(r['key'] for r in schema['keys'] if r['keyFile']))
    assert variables['__beacond_key_file_keys'] == key_files and len(key_files) >= 3, key_files
    # What a verifier leaves out of its copy of a config (and so needs no key for): keys of the self-report alone,
    # which `scan --expect` does not check.
    for name in variables['__beacond_verifier_left_out']:
        assert name in key_files and all(r['formats'] == ['bthome'] for r in schema['keys'] if r['key'] == name), name
    options = yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())['argument_specs']['main']['options']
    described = ' '.join(options['beacond_keys']['description'].split())
    assert all(k in described for k in key_files), described
    for option, table in (('beacond_beacons', 'beacon'), ('beacond_advertising', 'advertising'),
                          ('beacond_controller', 'controller'), ('beacond_daemon', 'daemon')):
        names = list(dict.fromkeys(r['key'] for r in schema['keys'] if r['table'] == table))
        described = ' '.join(options[option]['description'].split())
        assert ': ' + ', '.join(names) + ' (beacond.conf(5))' in described, (option, names, described)


def test_ansible_doc_shows_every_option_of_each_entry_point(ansible):
    """The README sends users to ansible-doc for the role's variables: both entry points (main, verifier) render there,
    each with every one of its options."""
    r = subprocess.run([str(ansible / 'ansible-doc'), '-t', 'role', '-r', str(ROLE.parent), 'beacond'], capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'ANSIBLE_NOCOLOR': '1'})
    assert r.returncode == 0 and 'ERROR' not in r.stderr, r.stderr
    sections = {m.group(1): m.group(2) for m in re.finditer(r'ENTRY POINT: \*?(\w+)\*?(.*?)(?=ENTRY POINT:|\Z)', r.stdout, re.S)}
    options = argument_spec_options()
    assert set(sections) == set(options) == {'main', 'verifier'}, r.stdout[:3000]
    for entry, names in options.items():
        shown = set(re.findall(r'\b(beacond_\w+)', sections[entry]))
        assert names <= shown, (entry, names - shown)
    # The verifier's own: only the verifier's (its options are main's, each described once: YAML anchors).
    assert not {'beacond_beacons', 'beacond_keys', 'beacond_eid_keys', 'beacond_status_timeout'} & set(
        re.findall(r'^\W*(beacond_\w+)', sections['verifier'], re.M)), sections['verifier']


# The role's shape (as prometheus-community's node_exporter role has it): the variables a user sets are named
# beacond_ and described in meta/argument_specs.yml; everything the role defines for itself (vars/, set_fact, register,
# a task's vars, a loop variable) is named __beacond_, so that no inventory can set one by accident and ansible-doc
# describes every variable a user may set.
# Ansible's special variables (magic variables and the facts the role reads), and the names Jinja and Ansible give
# every template (its globals).
MAGIC = {'ansible_check_mode', 'ansible_diff_mode', 'ansible_loop', 'ansible_loop_var', 'ansible_index_var',
         'ansible_play_batch', 'ansible_play_hosts', 'ansible_play_hosts_all', 'ansible_role_name', 'ansible_version',
         'group_names', 'groups', 'hostvars', 'inventory_hostname', 'inventory_hostname_short', 'item', 'omit',
         'play_hosts', 'playbook_dir', 'role_name', 'role_path'}
FACTS = {'ansible_facts', 'ansible_architecture'}
GLOBALS = {'range', 'dict', 'lipsum', 'cycler', 'joiner', 'namespace', 'lookup', 'query', 'q', 'now', 'undef'}
# A task's keys whose string is a bare Jinja expression (no braces), and the actions whose arguments define variables.
CONDITIONALS = {'when', 'until', 'changed_when', 'failed_when', 'that'}
SET_FACT = {'set_fact', 'ansible.builtin.set_fact'}


def role_files(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROLE / d).glob('*') if p.is_file())


def each_task(tasks):
    """Every task of a tasks or handlers file, those inside blocks too."""
    for task in tasks or []:
        yield task
        for key in ('block', 'rescue', 'always'):
            yield from each_task(task.get(key))


def argument_spec_options() -> dict[str, set[str]]:
    import yaml
    specs = yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())['argument_specs']
    return {entry: set(spec.get('options', {})) for entry, spec in specs.items()}


def defined_by_the_role() -> dict[str, str]:
    """Each variable the role defines for itself → where."""
    import yaml
    defined = {name: 'vars/main.yml' for name in yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())}
    for path in role_files('tasks', 'handlers'):
        where = str(path.relative_to(ROLE))
        for task in each_task(yaml.safe_load(path.read_text())):
            names = [task.get('register')] + list((task.get('vars') or {}).keys())
            names.append((task.get('loop_control') or {}).get('loop_var'))
            for action in SET_FACT & set(task):
                names += [k for k in task[action] if k != 'cacheable']
            defined.update({n: f'{where}: {task.get("name")}' for n in names if n})
    return defined


def jinja_reads(text: str, bare: bool = False) -> set[str]:
    """The variables a template (or a bare expression: when, until, that …) reads."""
    import jinja2
    import jinja2.meta

    class Any(dict):  # Ansible's filters and tests: any name (the analysis looks only at variables)
        def __contains__(self, name):
            return True

        def __getitem__(self, name):
            return lambda *a, **k: None

        def get(self, name, default=None):
            return self[name]

    env = jinja2.Environment(extensions=['jinja2.ext.do', 'jinja2.ext.loopcontrols'])
    env.filters, env.tests = Any(), Any()
    with warnings.catch_warnings():  # a regex's '\.' in a Jinja string
        warnings.simplefilter('ignore', DeprecationWarning)
        return jinja2.meta.find_undeclared_variables(env.parse('{{ (' + text + ') }}' if bare else text))


def strings_in(node, key=None):
    """Every string of a parsed YAML file, with the mapping key it is under (a list's items under the list's)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from strings_in(v, k)
    elif isinstance(node, list):
        for v in node:
            yield from strings_in(v, key)
    elif isinstance(node, str):
        yield key, node


def yaml_reads(node) -> set[str]:
    """The variables the Jinja in a parsed tasks or vars file reads."""
    names = set()
    for key, text in strings_in(node):
        bare = key in CONDITIONALS and '{{' not in text
        if bare or '{{' in text or '{%' in text:
            names |= jinja_reads(text, bare)
    return names


def read_by_the_role() -> dict[str, set[str]]:
    """Each variable the role's tasks, handlers, vars, defaults and templates read → the files that read it."""
    import yaml
    reads: dict[str, set[str]] = {}
    for path in role_files('tasks', 'handlers', 'vars', 'defaults'):
        for name in yaml_reads(yaml.safe_load(path.read_text())):
            reads.setdefault(name, set()).add(str(path.relative_to(ROLE)))
    for path in role_files('templates'):
        for name in jinja_reads(path.read_text()):
            reads.setdefault(name, set()).add(str(path.relative_to(ROLE)))
    return reads


def read_from(entry: str) -> set[str]:
    """The variables an entry point reads: its tasks file, the files it imports and includes, the templates they render
    (as a task's src or a template lookup), and the vars/main.yml variables all of these read, transitively."""
    import yaml
    internal = yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())
    files, seen, templates, names = [f'{entry}.yml'], set(), set(), set()
    while files:
        name = files.pop()
        if name in seen:
            continue
        seen.add(name)
        tasks = yaml.safe_load((ROLE / 'tasks' / name).read_text())
        for task in each_task(tasks):
            files += [task[k] for k in ('ansible.builtin.import_tasks', 'ansible.builtin.include_tasks') if k in task]
            templates |= {task['ansible.builtin.template']['src']} if 'ansible.builtin.template' in task else set()
        templates |= {t for _, text in strings_in(tasks)
                      for t in re.findall(r"lookup\('ansible\.builtin\.template', '([^']+)'\)", text)}
        names |= yaml_reads(tasks)
    for template in templates:
        names |= jinja_reads((ROLE / 'templates' / template).read_text())
    pending = names & set(internal)
    while pending:
        more = yaml_reads(internal[pending.pop()]) - names
        names |= more
        pending |= more & set(internal)
    return names


def test_the_role_defines_only_internal_variables_named_so():
    """vars/main.yml, set_fact, register, a task's vars and loop variables: each __beacond_, never a user's name."""
    wrong = {n: w for n, w in defined_by_the_role().items() if not n.startswith('__beacond_')}
    assert not wrong, 'internal variables not named __beacond_:\n' + '\n'.join(f'  {n} ({w})' for n, w in sorted(wrong.items()))


def test_every_variable_the_role_reads_is_described_internal_or_ansibles():
    """What the templates and tasks read is a user's variable described in the argument specs, one of the role's own
    (__beacond_, and defined by the role), or one of Ansible's."""
    options = set().union(*argument_spec_options().values())
    defined = defined_by_the_role()
    wrong = {}
    for name, where in read_by_the_role().items():
        if name in options or name in MAGIC | FACTS | GLOBALS or (name.startswith('__beacond_') and name in defined):
            continue
        wrong[name] = where
    assert not wrong, ('read, but neither described in meta/argument_specs.yml, nor a __beacond_ variable the role '
                       'defines, nor Ansible\'s:\n' + '\n'.join(f'  {n} ({", ".join(sorted(w))})' for n, w in sorted(wrong.items())))


def test_every_default_is_a_described_option():
    """defaults/main.yml holds the user's variables only, each described in the argument specs."""
    import yaml
    defaults = set(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    assert defaults == argument_spec_options()['main'], defaults ^ argument_spec_options()['main']


# The entry points (meta/argument_specs.yml): main, the role, and verifier (include_role with tasks_from: verifier),
# for a host that only checks other hosts' beacons from the air. Each run here fails before it touches the host (and
# runs in --check mode with a package that is not there all the same).
ENTRY_PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The role, at one of its entry points
      ansible.builtin.include_role:
        name: beacond
        tasks_from: "{{ entry }}"
"""


def entry_point(tmp_path, ansible: Path, entry: str, **variables) -> tuple[int, str]:
    (tmp_path / 'entry.yml').write_text(ENTRY_PLAY)
    v = {'entry': entry, 'beacond_package': str(tmp_path / 'no-such' / 'beacond_0.0.0_amd64.deb'), **variables}
    (tmp_path / 'vars.json').write_text(json.dumps(v))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', 'localhost,', str(tmp_path / 'entry.yml'), '--check',
                        '-e', f'@{tmp_path / "vars.json"}', '-e', f'ansible_python_interpreter={ansible / "python"}'],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'ANSIBLE_ROLES_PATH': str(ROLE.parent), 'ANSIBLE_NOCOLOR': '1'})
    return r.returncode, r.stdout + r.stderr


@pytest.mark.parametrize('entry,variables,name', [
    ('main', {'beacond_status_timeout': 'soon'}, 'beacond_status_timeout'),
    ('main', {'beacond_verify_hosts': {'pi1': 1}}, 'beacond_verify_hosts'),
    ('verifier', {'beacond_verify_hosts': {'pi1': 1}}, 'beacond_verify_hosts'),
    ('verifier', {'beacond_apt_repository': 'https://example.invalid/beacond', 'beacond_package': ''}, 'beacond_apt_repository'),
])
def test_each_entry_point_refuses_a_wrong_type_naming_the_variable(tmp_path, ansible, entry, variables, name):
    code, out = entry_point(tmp_path, ansible, entry, **variables)
    assert code != 0 and f"Validating arguments against arg spec '{entry}'" in out and name in out, out[-3000:]
    flat = ' '.join(out.split('TASK [')[-1].split())
    assert 'failed' in flat and name in flat, out[-3000:]


def test_the_verifier_entry_point_checks_the_verifiers_variables_alone(tmp_path, ansible):
    # main's variables, wrong for main, are not the verifier's: its argument specs pass them, and its first task
    # (the verifier's own checks) refuses its device.
    code, out = entry_point(tmp_path, ansible, 'verifier', beacond_status_timeout='soon', beacond_beacons='none',
                            beacond_verify_hosts=['pi1'], beacond_verify_device='hci1; touch /tmp/owned')
    assert code != 0 and "beacond_verify_device must be an adapter's name, hciN" in out, out[-3000:]
    assert "arg spec 'verifier'" in out and 'beacond_status_timeout' not in out, out[-3000:]
    code, out = entry_point(tmp_path, ansible, 'verifier', beacond_verify_hosts=[])
    assert code != 0 and 'a verifier names beacond_verify_hosts' in out, out[-3000:]


def test_the_verifier_entry_point_reads_only_the_verifiers_variables():
    """Everything the verifier entry point runs (its checks, the probe, the install, the verifier's tasks and the
    templates and internal variables they read) reads only variables its argument specs check: no main option is left
    unchecked there. And main runs the same verifier tasks when beacond_verify is true."""
    import yaml
    options = argument_spec_options()
    for entry in options:
        user = {n for n in read_from(entry) if not n.startswith('__') and n not in MAGIC | FACTS | GLOBALS}
        assert user <= options[entry], (entry, sorted(user - options[entry]))
    specs = yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())['argument_specs']
    assert all(specs['verifier']['options'][n] == specs['main']['options'][n] for n in options['verifier'])
    main = {t.get('ansible.builtin.import_tasks'): t.get('when') for t in yaml.safe_load((ROLE / 'tasks' / 'main.yml').read_text())}
    verifier = [t.get('ansible.builtin.import_tasks') for t in yaml.safe_load((ROLE / 'tasks' / 'verifier.yml').read_text())]
    assert main['verifier-on.yml'] == 'beacond_verify' and verifier[-1] == 'verifier-on.yml', (main, verifier)
    assert verifier[0] == 'checks-shared.yml' and list(main)[0] == 'checks.yml', (main, verifier)


# The house style of the role, the playbook and the inventory, kept by the linters as the node_exporter role is.
def test_the_role_playbook_and_inventory_pass_yamllint_and_ansible_lint():
    """yamllint (deploy/ansible/.yamllint) and ansible-lint at the production profile, offline (.ansible-lint), over
    deploy/ansible with the versions requirements-ansible-lint.txt pins: any finding, a warning too, fails the test
    with their output. Both are checked to have read the role, the playbook and the inventory (a pass over nothing is
    no pass)."""
    venv, why = made_venv(LINT)
    if venv is None:
        pytest.fail(f'YAMLLINT AND ANSIBLE-LINT: THEIR VENV COULD NOT BE MADE, so the role is not linted '
                    f'(scripts/test-venv.sh {LINT.name}):\n{why}', pytrace=False)
    bin_dir = venv / 'bin'
    # Only the checkout's configuration (deploy/ansible's ansible.cfg, not one an ANSIBLE_ variable names), and the
    # venv first in PATH (ansible-lint runs ansible-playbook --syntax-check from there).
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(PATH=f'{bin_dir}{os.pathsep}{env.get("PATH", "")}', NO_COLOR='1')
    yml = sorted(str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob('*.yml'))
    assert {'playbook.yml', 'inventory.example.yml', 'roles/beacond/tasks/main.yml'} <= set(yml), yml

    listed = subprocess.run([str(bin_dir / 'yamllint'), '--config-file', '.yamllint', '--list-files', '.'], cwd=DEPLOY,
                            env=env, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert set(yml) <= {str(Path(line)) for line in listed.stdout.split()}, listed.stdout
    r = subprocess.run([str(bin_dir / 'yamllint'), '--strict', '--config-file', '.yamllint', '--format', 'parsable',
                        '.'], cwd=DEPLOY, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and not r.stdout.strip(), f'yamllint:\n{r.stdout}{r.stderr}'

    r = subprocess.run([str(bin_dir / 'ansible-lint'), '--config-file', '.ansible-lint', '--offline', '--strict',
                        '--nocolor', '--format', 'pep8'], cwd=DEPLOY, env=env, capture_output=True, text=True,
                       timeout=600)
    said = r.stdout + r.stderr
    assert r.returncode == 0, f'ansible-lint:\n{said}'
    # "Passed: 0 failure(s), 0 warning(s) in 27 files processed of 28 encountered. Profile 'production' was required,
    # and it passed."
    processed = re.search(r'Passed: 0 failure\(s\), 0 warning\(s\) in (\d+) files processed', said)
    assert processed and int(processed.group(1)) >= len(yml), f'ansible-lint read too little:\n{said}'
    assert "Profile 'production' was required, and it passed" in said, said
