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
