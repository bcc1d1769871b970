"""The shipped Prometheus alerting rules (deploy/prometheus/beacond-alerts.yml) with Debian's promtool, through
deploy/prometheus/check.sh as CI runs it: `promtool check rules` and the unit tests of beacond-alerts.test.yml, which
make each alert fire and not fire. Without promtool these fail, never skip (scripts/deps.sh installs it). Also: a
copy with a rule that fires too early fails the script, the rules name only labels beacond writes, and the install
script puts the rules where the docs say."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

HERE = ROOT / 'deploy' / 'prometheus'
RULES = HERE / 'beacond-alerts.yml'
# The labels of scan --expect's metrics (AirCheck.prometheusText; test_expect.py checks them in a real file) and the
# two node_exporter's scrape adds.
LABELS = {'config', 'beacon', 'format', 'device', 'uuid', 'major', 'minor', 'eddystone_namespace', 'eddystone_instance',
          'key_file', 'instance', 'job'}


def promtool() -> str:
    found = shutil.which(os.environ.get('PROMTOOL', 'promtool'))
    if found is None:
        pytest.fail('promtool not installed: apt-get install prometheus (scripts/deps.sh installs it): '
                    'the alerting rules cannot be checked')
    return found


def check(top: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(['sh', str(top / 'deploy' / 'prometheus' / 'check.sh')], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_the_rules_pass_promtool_check_and_their_unit_tests():
    promtool()
    r = check(ROOT)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'SUCCESS: 4 rules found' in r.stdout, r.stdout
    assert 'Unit Testing:  deploy/prometheus/beacond-alerts.test.yml\n  SUCCESS' in r.stdout, r.stdout


def test_a_rule_that_fires_too_early_fails_the_check(tmp_path):
    """The unit tests can fail, and check.sh says so: BeaconMissing after two checks instead of three."""
    promtool()
    copy = tmp_path / 'deploy' / 'prometheus'
    shutil.copytree(HERE, copy)
    rules = (copy / 'beacond-alerts.yml').read_text()
    assert rules.count('for: 35m') == 1
    (copy / 'beacond-alerts.yml').write_text(rules.replace('for: 35m', 'for: 30m'))
    r = check(tmp_path)
    assert r.returncode != 0, r.stdout + r.stderr
    assert 'alertname: BeaconMissing, time: 34m' in r.stdout + r.stderr, r.stdout + r.stderr


def test_without_promtool_the_check_fails_loudly():
    r = check(ROOT, {'PROMTOOL': '/nonexistent/promtool'})
    assert r.returncode == 1 and 'promtool not installed: apt-get install prometheus' in r.stderr, r.stdout + r.stderr


def test_the_rules_name_only_labels_beacond_and_the_scrape_write():
    used = set(re.findall(r'\$labels\.([A-Za-z_][A-Za-z0-9_]*)', RULES.read_text()))
    assert used and used <= LABELS, used - LABELS
    # Not Prometheus' own instance for an Eddystone instance, nor the prose id of before.
    assert 'eddystone_instance' in used and 'id' not in used


def test_install_script_puts_the_rules_under_share(tmp_path):
    stand_in = tmp_path / 'beacond'
    stand_in.write_text('#!/bin/sh\n')
    stand_in.chmod(0o755)
    stage = tmp_path / 'stage'
    r = subprocess.run(['sh', str(ROOT / 'scripts' / 'install.sh'), str(stand_in)], capture_output=True, text=True,
                       env={**os.environ, 'DESTDIR': str(stage), 'PREFIX': '/usr'})
    assert r.returncode == 0, r.stderr
    installed = stage / 'usr/share/beacond/prometheus/beacond-alerts.yml'
    assert installed.read_text() == RULES.read_text()
    assert oct(installed.stat().st_mode & 0o777) == '0o644'
    # The package is staged by this same script (scripts/build-deb.sh; the VM tests install that package).
    assert 'DESTDIR=$stage PREFIX=/usr' in (ROOT / 'scripts' / 'build-deb.sh').read_text()


# BeaconVerifierStale compares a verifier's last check with 3 of its intervals: beacond-verify@DEVICE.service writes
# its interval beside its metrics (scripts/verify-prepare.sh, run by ExecStartPre= as root, through systemd-tmpfiles).
PREPARE = ROOT / 'scripts' / 'verify-prepare.sh'
TEXTFILES = 'var/lib/prometheus/node-exporter'


def prepare(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(['sh', str(PREPARE), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, 'BEACOND_TMPFILES_ROOT': str(root)})


def test_the_verifier_writes_its_interval_beside_its_metrics(tmp_path):
    from prometheus_client.parser import text_string_to_metric_families
    r = prepare(tmp_path, 'hci1', '5400')
    assert r.returncode == 0, r.stderr
    written = tmp_path / TEXTFILES / 'beacond-verify-hci1.interval.prom'
    samples = [(s.name, s.labels, s.value) for f in text_string_to_metric_families(written.read_text()) for s in f.samples]
    assert samples == [('beacond_verify_interval_seconds', {'device': 'hci1'}, 5400.0)], written.read_text()
    assert oct(written.stat().st_mode & 0o777) == '0o644'
    # Again with another interval: replaced.
    assert prepare(tmp_path, 'hci1', '900').returncode == 0
    assert written.read_text().endswith('beacond_verify_interval_seconds{device="hci1"} 900\n')


@pytest.mark.parametrize('args,message', [
    (('hci1', '15min'), "BEACOND_VERIFY_INTERVAL_SECONDS must be a whole number of seconds, 60 or more: '15min'"),
    (('hci1', '0'), "BEACOND_VERIFY_INTERVAL_SECONDS must be a whole number of seconds, 60 or more: '0'"),
    (('hci1', ''), "BEACOND_VERIFY_INTERVAL_SECONDS must be a whole number of seconds, 60 or more: ''"),
    (('hci1"} 1\nx{a="', '900'), 'not a device name'),
])
def test_the_verifiers_interval_is_refused_unless_whole_seconds(tmp_path, args, message):
    r = prepare(tmp_path, *args)
    assert r.returncode != 0 and message in r.stderr, r.stderr
    assert not (tmp_path / TEXTFILES).exists() or not list((tmp_path / TEXTFILES).iterdir())


def test_the_verifier_writes_nothing_through_a_symlink(tmp_path):
    """Whoever owns /var/lib/prometheus (the prometheus user's home) can put a symlink there: nothing goes through."""
    prometheus = tmp_path / 'var/lib/prometheus'
    prometheus.mkdir(parents=True)
    (tmp_path / 'etc/cron.d').mkdir(parents=True)
    os.symlink('/etc/cron.d', prometheus / 'node-exporter')
    os.lchown(prometheus / 'node-exporter', 65534, 65534)
    os.chown(prometheus, 65534, 65534)
    r = prepare(tmp_path, 'hci1', '900')
    assert r.returncode != 0, r.stderr
    assert list((tmp_path / 'etc/cron.d').iterdir()) == [] and not list(Path('/etc/cron.d').glob('beacond-verify*'))


def test_the_package_unit_passes_its_timers_interval():
    """The package's service says the interval its timer runs it at (15 min, 900 s), and passes it to the script."""
    service = (ROOT / 'systemd' / 'beacond-verify@.service').read_text()
    timer = (ROOT / 'systemd' / 'beacond-verify@.timer').read_text()
    assert 'OnUnitActiveSec=15min\n' in timer
    assert 'Environment=BEACOND_VERIFY_INTERVAL_SECONDS=900\n' in service
    assert 'ExecStartPre=+/usr/libexec/beacond/verify-prepare %i ${BEACOND_VERIFY_INTERVAL_SECONDS}\n' in service


def test_install_script_installs_the_verifiers_script(tmp_path):
    stand_in = tmp_path / 'beacond'
    stand_in.write_text('#!/bin/sh\n')
    stand_in.chmod(0o755)
    stage = tmp_path / 'stage'
    r = subprocess.run(['sh', str(ROOT / 'scripts' / 'install.sh'), str(stand_in)], capture_output=True, text=True,
                       env={**os.environ, 'DESTDIR': str(stage), 'PREFIX': '/usr'})
    assert r.returncode == 0, r.stderr
    script = stage / 'usr/libexec/beacond/verify-prepare'
    assert script.read_text() == PREPARE.read_text() and os.access(script, os.X_OK)
    assert oct((stage / 'etc/beacond/verify/keys').stat().st_mode & 0o777) == '0o700'
    unit = (stage / 'usr/lib/systemd/system/beacond-verify@.service').read_text()
    assert 'ExecStartPre=+/usr/libexec/beacond/verify-prepare %i' in unit and 'LoadCredential=eid:/etc/beacond/verify/keys\n' in unit


def test_removing_the_package_removes_the_verifiers_metrics(tmp_path):
    """Left behind, node_exporter would serve the last check's metrics for ever: BeaconVerifierStale for ever.
    (postrm under DPKG_ROOT, as dpkg runs it for another root; `remove` is also the first step of a purge.)"""
    textfiles = tmp_path / TEXTFILES
    textfiles.mkdir(parents=True)
    for name in ('beacond-verify-hci1.prom', 'beacond-verify-hci1.interval.prom', 'node.prom'):
        (textfiles / name).write_text('x 1\n')
    stubs = tmp_path / 'stubs'
    stubs.mkdir()
    for tool in ('systemctl', 'deb-systemd-helper', 'deb-systemd-invoke'):
        (stubs / tool).write_text('#!/bin/sh\nexit 0\n')
        (stubs / tool).chmod(0o755)
    r = subprocess.run(['sh', str(ROOT / 'scripts' / 'deb' / 'postrm'), 'remove'], capture_output=True, text=True, timeout=60,
                       env={**os.environ, 'DPKG_ROOT': str(tmp_path), 'PATH': f'{stubs}:{os.environ["PATH"]}'})
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in textfiles.iterdir()) == ['node.prom']
