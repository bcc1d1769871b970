"""The Ansible role's checks and its config template, with ansible-core itself (the venv's, the fleet test's control
node) on this machine: the role's argument specs and its first tasks (tasks/checks.yml) refuse what would reach a
unit file, a path or a shell, and the template renders what beacond reads as the inventory meant it. The whole role
against real hosts is the fleet test's (Tests/VM/fleet.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

ROLE = ROOT / 'deploy' / 'ansible' / 'roles' / 'beacond'
UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
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
      vars:
        beacond_config_header: Ansible managed (the beacond role)
        beacond_render:
          beacons: "{{ beacond_beacons }}"
          advertising: "{{ beacond_advertising | default({}) }}"
          controller: "{{ beacond_controller | default({}) }}"
          daemon: "{{ beacond_daemon | default({}) }}"
          key_prefix: "{{ prefix | default('') }}"
"""


def play(tmp_path, **variables) -> tuple[int, str, str]:
    """Runs the play with these variables (a beacon of its own unless given): exit status, output, rendered file."""
    ansible = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    if not os.path.exists(ansible):
        pytest.fail(f'ansible-playbook is not in the venv ({ansible}): make venv')
    (tmp_path / 'play.yml').write_text(PLAY)
    out = tmp_path / 'beacond.conf'
    if out.exists():
        out.unlink()
    v = {'role_dir': str(ROLE), 'out': str(out), 'beacond_package': 'beacond.deb',
         'beacond_beacons': [{'uuid': UUID, 'major': 7, 'minor': 1}], **variables}
    (tmp_path / 'vars.json').write_text(json.dumps(v))
    r = subprocess.run([ansible, '-i', 'localhost,', str(tmp_path / 'play.yml'), '-e', f'@{tmp_path / "vars.json"}',
                        '-e', f'ansible_python_interpreter={sys.executable}'], capture_output=True, text=True, timeout=120,
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
])
def test_what_reaches_unit_files_paths_and_the_shell_is_refused_before_any_task(tmp_path, variables, message):
    code, out, rendered = play(tmp_path, **variables)
    assert code != 0 and message in out, out[-3000:]
    assert rendered == '', 'the template ran after a refused variable'


def test_a_wrong_type_is_refused_by_the_argument_specs(tmp_path):
    code, out, _ = play(tmp_path, beacond_status_timeout='soon')
    assert code != 0 and 'beacond_status_timeout' in out and 'int' in out, out[-3000:]


def test_the_template_renders_what_beacond_reads_as_the_inventory_meant(tmp_path):
    # A name beyond the Basic Multilingual Plane: to_json wrote surrogate escapes (\\ud83c\\udf70), which TOML forbids.
    code, out, rendered = play(tmp_path, beacond_beacons=[{'uuid': UUID, 'major': '7', 'minor': 1, 'name': 'Café 🍰 "7"'}],
                               beacond_advertising={'interval_ms': '200', 'connectable': 'yes'})
    assert code == 0, out[-3000:]
    assert 'name = "Café 🍰 \\"7\\""\n' in rendered and 'major = 7\n' in rendered and 'connectable = true\n' in rendered, rendered
    conf = tmp_path / 'beacond.conf'
    checked = run_cli('check-config', '-c', str(conf))
    assert checked.returncode == 0, checked.stderr
    assert 'Café 🍰 "7"' in run_cli('check-config', '-c', str(conf)).stdout


@pytest.mark.parametrize('key_file,rendered', [
    ('shop.key', 'pi1--shop.key'),
    # An absolute name in the keys directory: the verifier's copy, not "pi1--/etc/…".
    ('/etc/beacond/keys/shop.key', 'pi1--shop.key'),
    # Elsewhere: as it is (the verifier must have that file itself).
    ('/srv/keys/shop.key', '/srv/keys/shop.key'),
])
def test_a_verifier_renders_each_checked_hosts_key_as_its_own_copy(tmp_path, key_file, rendered):
    code, out, text = play(tmp_path, prefix='pi1--',
                           beacond_beacons=[{'format': 'eddystone-eid', 'identity_key_file': key_file}])
    assert code == 0, out[-3000:]
    assert f'identity_key_file = "{rendered}"\n' in text, text
