"""The Ansible role's checks and its config template, with ansible-core itself on this machine: the role's argument
specs and its first tasks (tasks/checks.yml) refuse what would reach a unit file, a path or a shell, and the template
renders what beacond reads as the inventory meant it. The whole role against real hosts is the fleet test's
(Tests/VM/fleet.py).

Every test that runs Ansible runs with each ansible-core the role claims to work with (meta/main.yml, the README):
the newest, the test venv's (Tests/Integration/requirements.txt, the fleet test's control node), and the oldest, in
a venv of its own that scripts/test-venv.sh makes once and keeps outside the checkout
(requirements-ansible-oldest.txt). A version whose venv cannot be made fails its tests, saying so."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, beacond_path, run_cli

ROLE = ROOT / 'deploy' / 'ansible' / 'roles' / 'beacond'
NEWEST = ROOT / 'Tests' / 'Integration' / 'requirements.txt'
OLDEST = ROOT / 'Tests' / 'Integration' / 'requirements-ansible-oldest.txt'


def pinned(requirements: Path) -> str:
    """The ansible-core version a requirements file pins."""
    return re.search(r'^ansible-core==(\S+)$', requirements.read_text(), re.M).group(1)


@functools.cache
def oldest_venv() -> tuple[Path | None, str]:
    """The oldest ansible-core's venv (made once, then cached by scripts/test-venv.sh), or None and why not."""
    r = subprocess.run(['sh', str(ROOT / 'scripts' / 'test-venv.sh'), str(OLDEST)], capture_output=True, text=True,
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
        venv, why = oldest_venv()
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


def staged(tmp_path, ansible: Path, command: str, keys: dict) -> tuple[int, str]:
    (tmp_path / 'staged.yml').write_text(STAGED_PLAY)
    v = {'role_dir': str(ROLE), '__beacond_command': command, '__beacond_keys_changed': list(keys),
         '__beacond_config_changed': True, 'beacond_eid_keys': keys,
         'beacond_beacons': [{'format': 'eddystone-eid', 'identity_key_file': name} for name in keys]}
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
      loop: "{{ beacond_eid_keys | dict2items }}"
    - name: A verifier's copies of the checked hosts' keys, where tasks/verifier-keys.yml writes them (and stale ones)
      ansible.builtin.set_fact:
        copies: "{{ copies | default([]) + [copy_dest] }}"
      vars:
        __beacond_checked: "{{ item.host }}"
      loop: >-
        {%- set ps = [] -%}
        {%- for h in (beacond_verify_hosts if beacond_verify else []) -%}
        {%- for k in (hostvars[h].beacond_eid_keys | default({})).keys() -%}
        {%- set _ = ps.append({'host': h, 'key': k, 'value': ''}) -%}
        {%- endfor -%}
        {%- endfor -%}
        {{ ps + stale_copies }}
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
                    if t.get('name') == 'Eddystone-EID identity keys')['ansible.builtin.copy']['dest']
    copy_dest = yaml.safe_load((ROLE / 'tasks' / 'verifier-keys.yml').read_text())[0]['ansible.builtin.copy']['dest']
    (tmp_path / 'removal.yml').write_text(REMOVAL_PLAY)
    (tmp_path / 'inventory.json').write_text(json.dumps({'all': {'hosts': hosts}}))
    out = tmp_path / 'removed.json'
    v = {'role_dir': str(ROLE), 'out': str(out), 'target': target, 'own_key_dest': own_dest, 'copy_dest': copy_dest,
         'stale': list(stale), 'stale_copies': [{'host': h, 'key': k, 'value': ''} for h, k in stale_copies]}
    (tmp_path / 'vars.json').write_text(json.dumps(v))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', str(tmp_path / 'inventory.json'), str(tmp_path / 'removal.yml'),
                        '-e', f'@{tmp_path / "vars.json"}', '-e', f'ansible_python_interpreter={ansible / "python"}'],
                       capture_output=True, text=True, timeout=120, env={**os.environ, 'ANSIBLE_NOCOLOR': '1'})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(out.read_text())


HOST = {'beacond_verify': False, 'beacond_verify_hosts': [], 'beacond_eid_keys': {}, 'beacond_verify_device': 'hci1'}


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
             'shop--7': {**HOST, 'beacond_eid_keys': {'door.key': ''}}, 'pi1': {**HOST, 'beacond_eid_keys': {'shop.key': ''}},
             'old': {**HOST, 'beacond_eid_keys': {'k.key': ''}}}
    got = removed(tmp_path, ansible, 'gw', hosts, stale_copies=[('old', 'k.key'), ('pi1', 'rotated.key')])
    assert len(got['written']) == 1 and len(got['copies']) == 4, got
    wanted, stale = got['written'] + got['copies'][:2], got['copies'][2:]
    assert not set(wanted) & set(got['own'] + got['verifier']), got
    # A host no longer checked, and a key a checked host no longer has: their copies go (and only those).
    assert sorted(got['verifier']) == sorted(stale), got
    assert got['own'] == [], got


def test_a_verifier_turned_off_removes_its_copies_and_not_the_hosts_own_keys(tmp_path, ansible):
    hosts = {'gw': {**HOST, 'beacond_eid_keys': {'gw.key': ''}}, 'shop--7': {**HOST, 'beacond_eid_keys': {'door.key': ''}}}
    # The role's file for the timer's service goes too; the admin's own /etc/default/beacond-verify stays.
    role_files = ['/etc/beacond/verify/shop--7.conf', '/etc/systemd/system/beacond-verify@hci1.timer', '/etc/default/beacond-verify-hci1']
    got = removed(tmp_path, ansible, 'gw', hosts, stale=role_files + ['/etc/default/beacond-verify'], stale_copies=[('shop--7', 'door.key')])
    assert not set(got['written']) & set(got['off'] + got['own']), got
    assert sorted(got['off']) == sorted(got['copies'] + role_files), got


def test_the_probe_finds_the_newest_of_the_services_own_keys_whatever_their_names(tmp_path):
    """The lost-restart check (tasks/config.yml) compares the service's start with keys.newest from the probe: a key
    newer than the service is not among its credentials. The probe skipped names with '--'."""
    import yaml
    probe = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'main.yml').read_text())
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
    probe = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'main.yml').read_text())
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


# The health check (tasks/config.yml): `beacond status --json` on the host, and __beacond_health_problems
# (vars/main.yml) what in its report differs from the host's config. Here the role's own vars file judges canned
# reports, as the raw task would bring them back (stdout and stderr together, \r\n under a tty).
HEALTH_PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: The role's vars
      ansible.builtin.include_vars: "{{ role_dir }}/vars/main.yml"
    - name: What the health check makes of the report
      ansible.builtin.copy:
        content: "{{ __beacond_health_problems | to_json }}"
        dest: "{{ out }}"
"""
DEPLOYED = hashlib.sha256(b'# the config the role deployed\n').hexdigest()
PREVIOUS = hashlib.sha256(b'# the config before\n').hexdigest()
# A host's beacons as an inventory gives them: case, hex and string numbers as the template passes them on.
INVENTORY = [
    {'uuid': UUID.lower(), 'major': '0x8', 'minor': 1, 'address': 'c6:12:34:56:78:9a'},
    {'format': 'eddystone-uid', 'namespace': '00112233445566778899', 'instance': 'AABBCCDDEEFF', 'address': 'public'},
    {'format': 'eddystone-eid', 'identity_key_file': 'shop8.key'},
    {'format': 'eddystone-tlm'},
]
PUBLIC = '00:1A:7D:DA:71:13'


def healthy_report() -> dict:
    """What `beacond status --json` says of INVENTORY's config on the air."""
    def beacon(index, fmt, identity, address, kind):
        return {'index': index, 'format': fmt, 'identity': identity, 'address': address, 'address_kind': kind,
                'interval_ms': 100.0, 'on_air': True, 'on_air_since': 1764826200, 'warnings': []}
    return {'ok': True, 'problems': [], 'daemons': [{
        'unit': 'beacond.service', 'state_file': '/run/beacond/state.json', 'version': '0.3.0', 'pid': 1234,
        'config': {'path': '/etc/beacond/beacond.conf', 'sha256': DEPLOYED},
        'phase': 'advertising', 'status': 'Advertising 4 beacons on hci0: …',
        'controller': {'device': 'hci0', 'backend': 'hci', 'family': 'extended', 'bluetooth_version': '5.0',
                       'manufacturer': 305, 'sets': 4, 'instances': None, 'time_sliced': False},
        'beacons': [
            beacon(1, 'ibeacon', {'uuid': UUID, 'major': 8, 'minor': 1}, 'C6:12:34:56:78:9A', 'chosen'),
            beacon(2, 'eddystone-uid', {'namespace': '00112233445566778899', 'instance': 'aabbccddeeff'}, PUBLIC, 'public'),
            beacon(3, 'eddystone-eid', {'key': 'shop8.key', 'rotation_exponent': 10}, 'D6:01:02:03:04:05', 'eid'),
            beacon(4, 'eddystone-tlm', {}, PUBLIC, 'public'),
        ],
        'reload': {'count': 2, 'result': 'applied'}, 'last_refused': None, 'clock': {'synchronized': True},
    }]}


def health(tmp_path, ansible: Path, stdout: str, rc: int = 0, beacons=None, **variables) -> list[str]:
    """__beacond_health_problems for this output of the raw `beacond status --json`."""
    (tmp_path / 'health.yml').write_text(HEALTH_PLAY)
    out = tmp_path / 'problems.json'
    v = {'role_dir': str(ROLE), 'out': str(out), '__beacond_config_sha256': DEPLOYED, 'beacond_advertising': {},
         'beacond_beacons': INVENTORY if beacons is None else beacons,
         '__beacond_status_run': {'rc': rc, 'stdout': stdout, 'stderr': ''}, **variables}
    (tmp_path / 'vars.json').write_text(json.dumps(v))
    r = subprocess.run([str(ansible / 'ansible-playbook'), '-i', 'localhost,', str(tmp_path / 'health.yml'),
                        '-e', f'@{tmp_path / "vars.json"}', '-e', f'ansible_python_interpreter={ansible / "python"}'],
                       capture_output=True, text=True, timeout=120, env={**os.environ, 'ANSIBLE_NOCOLOR': '1'})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(out.read_text())


def changed(fn):
    def make():
        report = healthy_report()
        fn(report, report['daemons'][0])
        return report
    return make


def beacon_field(n, **fields):
    return changed(lambda r, d: d['beacons'][n - 1].update(fields))


def identity(n, **fields):
    return changed(lambda r, d: d['beacons'][n - 1]['identity'].update(fields))


ERROR = '/etc/beacond/beacond.conf:3:9: error: the key file shop9.key is not among the keys the unit was started with'


@pytest.mark.parametrize('report,rc,problems', [
    pytest.param(healthy_report, 0, [], id='healthy'),
    pytest.param(identity(1, minor=2), 1, ['beacon 1 (ibeacon): minor 2 on the air, 1 in the config'], id='minor'),
    pytest.param(identity(1, uuid='E2C56DB5-DFFB-48D2-B060-D0F5A71096E1'), 1,
                 [f'beacon 1 (ibeacon): uuid E2C56DB5-DFFB-48D2-B060-D0F5A71096E1 on the air, {UUID} in the config'], id='uuid'),
    pytest.param(identity(2, instance='aabbccddee00'), 1,
                 ['beacon 2 (eddystone-uid): instance aabbccddee00 on the air, aabbccddeeff in the config'], id='instance'),
    pytest.param(identity(3, key='shop7.key', rotation_exponent=12), 1,
                 ['beacon 3 (eddystone-eid): key shop7.key on the air, shop8.key in the config',
                  'beacon 3 (eddystone-eid): rotation_exponent 12 on the air, 10 in the config'], id='eid key'),
    pytest.param(beacon_field(2, format='ibeacon'), 1, ['beacon 2 (eddystone-uid): ibeacon on the air'], id='format'),
    pytest.param(beacon_field(3, on_air=False, warnings=['the system clock is not synchronized']), 1,
                 ['beacon 3 (eddystone-eid): not on the air (the system clock is not synchronized)'], id='off the air'),
    pytest.param(beacon_field(1, address=PUBLIC, address_kind='public'), 1,
                 [f'beacon 1 (ibeacon): from {PUBLIC} (public), the config chooses C6:12:34:56:78:9A'], id='chosen address'),
    pytest.param(beacon_field(2, address='C6:00:00:00:00:01', address_kind='static'), 1,
                 ['beacon 2 (eddystone-uid): from C6:00:00:00:00:01 (static), the config says public'], id='public address'),
    pytest.param(changed(lambda r, d: d['config'].update(sha256=PREVIOUS)), 1,
                 [f'beacond runs another config (SHA-256 {PREVIOUS[:12]}…) than the role deployed to '
                  f'/etc/beacond/beacond.conf ({DEPLOYED[:12]}…)'], id='old config'),
    pytest.param(changed(lambda r, d: d.update(
        config={'path': '/etc/beacond/beacond.conf', 'sha256': PREVIOUS},
        reload={'count': 3, 'result': 'refused', 'errors': [ERROR]}, last_refused={'at': 1764826300, 'errors': [ERROR]})),
        1, [f'beacond refused the new config and kept the previous one: {ERROR}'], id='refused reload'),
    # An old refusal (a hand edit refused, then the file put back without a reload) while the deployed config runs:
    # healthy, not failed on every run.
    pytest.param(changed(lambda r, d: d.update(reload={'count': 3, 'result': 'refused', 'errors': [ERROR]},
                                               last_refused={'at': 1764826300, 'errors': [ERROR]})),
                 1, [], id='old refusal, deployed config on the air'),
    pytest.param(changed(lambda r, d: d.update(config={'path': '/etc/beacond/beacond.conf', 'sha256': PREVIOUS},
                                               reload={'count': 3, 'result': 'in-progress'})), 1,
                 ['beacond is still taking the new config'], id='reload in progress'),
    # Not advertising: said once, not again for each beacon off the air (nor for their addresses, unknown then).
    pytest.param(changed(lambda r, d: [d.update(phase='waiting', status='Waiting for hci0 to appear, retrying in 4 s')]
                         + [b.update(on_air=False, address=None, on_air_since=None) for b in d['beacons']]), 1,
                 ['beacond is waiting, not advertising: Waiting for hci0 to appear, retrying in 4 s'], id='waiting'),
    pytest.param(changed(lambda r, d: d.update(phase='opening', status='Opening hci0', beacons=[])), 1,
                 ['beacond is opening, not advertising: Opening hci0', 'beacond has 0 beacon(s), the config 4'],
                 id='no beacons yet'),
    pytest.param(changed(lambda r, d: d['beacons'].pop()), 1, ['beacond has 3 beacon(s), the config 4'], id='a beacon fewer'),
    pytest.param(lambda: {'ok': False, 'problems': ['no beacond runs (no state file in /run/beacond)'], 'daemons': []}, 3,
                 ['beacond.service is not running: no beacond runs (no state file in /run/beacond)'], id='none runs'),
    # Another instance on the air is not the role's service.
    pytest.param(changed(lambda r, d: d.update(unit='beacond@hci1.service')), 0, ['beacond.service is not running'],
                 id='only an instance'),
])
def test_the_health_check_names_what_differs_from_the_config(tmp_path, ansible, report, rc, problems):
    assert health(tmp_path, ansible, json.dumps(report()), rc) == problems


def test_the_health_check_reads_the_report_through_a_terminal(tmp_path, ansible):
    # raw runs under a tty: \r\n line endings, stderr in the same stream, ssh's goodbye after the object.
    text = json.dumps(healthy_report(), indent=2).replace('\n', '\r\n')
    assert health(tmp_path, ansible, text + '\r\nShared connection to shop8-pi1 closed.\r\n') == []


def test_the_health_check_says_when_there_is_no_report(tmp_path, ansible):
    assert health(tmp_path, ansible, 'sh: 1: /usr/bin/beacond: not found\r\n', 127) == [
        '`beacond status --json` printed no report (exit 127): sh: 1: /usr/bin/beacond: not found']


def test_the_health_check_takes_the_advertising_address_for_beacons_without_their_own(tmp_path, ansible):
    beacons = [{'uuid': UUID, 'major': 8, 'minor': 1}]
    report = healthy_report()
    report['daemons'][0]['beacons'][1:] = []
    report['daemons'][0]['beacons'][0].update(address='C6:12:34:56:78:9A', address_kind='static')
    assert health(tmp_path, ansible, json.dumps(report), beacons=beacons, beacond_advertising={'address': 'static'}) == []
    assert health(tmp_path, ansible, json.dumps(report), beacons=beacons, beacond_advertising={'address': 'public'}) == [
        'beacon 1 (ibeacon): from C6:12:34:56:78:9A (static), the config says public']


def test_the_role_takes_reload_and_health_from_beacond_not_from_its_log():
    text = '\n'.join(p.read_text() for p in sorted(ROLE.rglob('*')) if p.is_file())
    for gone in ('journalctl', 'Reloading configuration', 'StatusText', 'kept previous configuration', 'beacond_healthy'):
        assert gone not in text, gone
    import yaml
    handler = {h['name']: h for h in yaml.safe_load((ROLE / 'handlers' / 'main.yml').read_text())}['Reload beacond']
    assert handler['ansible.builtin.systemd_service'] == {'name': 'beacond.service', 'state': 'reloaded'}
    # A run with nothing to change starts no Python on the host (the fleet test): the check is a raw command.
    check = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'config.yml').read_text())
                 if t.get('register') == '__beacond_status_run')
    assert check['ansible.builtin.raw'] == '/usr/bin/beacond status --json' and check['check_mode'] is False


def test_the_role_agrees_with_beacond_schema():
    """The typed keys the template writes as numbers or booleans, rotation_exponent's default, and the keys each
    table option's description lists are the schema's (`beacond check-config --schema`)."""
    import yaml
    schema = json.loads(run_cli('check-config', '--schema', check=True).stdout)
    variables = yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())
    def kind(k):
        return list(dict.fromkeys(r['key'] for r in schema['keys'] if r['kind'] == k))
    assert variables['__beacond_integer_keys'] == kind('integer')
    assert variables['__beacond_boolean_keys'] == kind('boolean')
    exponent = next(r for r in schema['keys'] if r['key'] == 'rotation_exponent')
    assert str(variables['__beacond_rotation_exponent_default']) == exponent['value']
    options = yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())['argument_specs']['main']['options']
    for option, table in (('beacond_beacons', 'beacon'), ('beacond_advertising', 'advertising'),
                          ('beacond_controller', 'controller'), ('beacond_daemon', 'daemon')):
        names = list(dict.fromkeys(r['key'] for r in schema['keys'] if r['table'] == table))
        described = ' '.join(options[option]['description'].split())
        assert ': ' + ', '.join(names) + ' (beacond.conf(5))' in described, (option, names, described)


def test_ansible_doc_shows_every_option_of_the_role(ansible):
    """The README sends users to ansible-doc for the role's variables: every option must render there."""
    r = subprocess.run([str(ansible / 'ansible-doc'), '-t', 'role', '-r', str(ROLE.parent), 'beacond'], capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'ANSIBLE_NOCOLOR': '1'})
    assert r.returncode == 0 and 'ERROR' not in r.stderr, r.stderr
    import yaml
    options = yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())['argument_specs']['main']['options']
    for name in options:
        assert name in r.stdout, name


# The role's shape (as prometheus-community's node_exporter role has it): the variables a user sets are named
# beacond_ and described in meta/argument_specs.yml; everything the role defines for itself (vars/, set_fact, register,
# a task's vars, a loop variable) is named __beacond_, so that no inventory can set one by accident and ansible-doc
# describes every variable a user may set.
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


def test_the_role_defines_only_internal_variables_named_so():
    """vars/main.yml, set_fact, register, a task's vars and loop variables: each __beacond_, never a user's name."""
    wrong = {n: w for n, w in defined_by_the_role().items() if not n.startswith('__beacond_')}
    assert not wrong, 'internal variables not named __beacond_:\n' + '\n'.join(f'  {n} ({w})' for n, w in sorted(wrong.items()))


def test_every_default_is_a_described_option():
    """defaults/main.yml holds the user's variables only, each described in the argument specs."""
    import yaml
    defaults = set(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    assert defaults == argument_spec_options()['main'], defaults ^ argument_spec_options()['main']
