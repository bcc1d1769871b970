"""The routes to the packages (README "Getting the package"): what make does on each kind of build machine, read
from make's own plan (make -n: nothing is built), and the shipped example for three beacons."""
from __future__ import annotations

import os
import subprocess

from conftest import ROOT


def plan(*args: str) -> list[str]:
    # -B: the plan from scratch, whether or not this checkout has built the package already (make test builds it
    # beside the integration tests, and a package already made would leave nothing to plan).
    # make's own variables stay out: under `make test` its command line's STAGE_DEPS=deps-all reaches every process
    # below it, in MAKEFLAGS and as a variable of the environment of its own, and the plan would be make test's, not
    # a user's.
    words = os.environ.get('MAKEFLAGS', '').split()
    overrides = {w.split('=', 1)[0] for w in words[words.index('--') + 1:] if '=' in w} if '--' in words else set()
    env = {k: v for k, v in os.environ.items() if k not in {'MAKEFLAGS', 'MFLAGS', 'MAKEOVERRIDES', 'MAKELEVEL'} | overrides}
    r = subprocess.run(['make', '-n', '-B', '--no-print-directory', *args], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_on_a_pi_make_deb_arm64_takes_the_native_path_with_only_the_builds_packages():
    # An arm64 host (a Pi on Debian 13 with swiftlang): the build's own packages, then build-deb with that machine's
    # Swift; no amd64 build root (it cannot be made there), no VM, test or benchmark packages.
    steps = plan('deb-arm64', 'HOST_ARCH=arm64')
    assert steps == ['sh scripts/deps.sh --build', 'sh scripts/stage.sh deb-arm64 sh scripts/build-deb.sh arm64'], steps


def test_on_amd64_make_deb_arm64_cross_builds_in_the_build_root():
    steps = plan('deb-arm64', 'HOST_ARCH=amd64')
    assert any('buildroot.sh amd64' in s for s in steps) and steps[-1].endswith('build-deb.sh arm64'), steps


def test_the_build_packages_are_what_building_needs():
    # deps.sh --build: no prometheus, qemu, debootstrap or python3-venv (those are the tests'), swiftlang only where
    # the machine has no Swift.
    text = (ROOT / 'scripts' / 'deps.sh').read_text()
    build = text.split('build="', 1)[1].split('"', 1)[0].split()
    assert not {'prometheus', 'qemu-system-x86', 'qemu-system-arm', 'debootstrap', 'python3-venv'} & set(build), build
    assert {'libbluetooth-dev', 'libsystemd-dev', 'libgcrypt20-dev', 'dpkg-dev', 'binutils'} <= set(build), build


def test_the_stage_table_says_what_each_stage_cost_the_cpus(tmp_path):
    # make test's table (scripts/stage.sh, stage-report.sh): wall time and CPU time side by side, so that on a 2-core
    # machine the stage that makes the others wait shows. A busy second counts; a sleeping one does not.
    env = {'BEACOND_STAGES': str(tmp_path / 'stages.tsv'), 'PATH': '/usr/bin:/bin'}
    busy = 'import time\nt = time.process_time()\nwhile time.process_time() - t < 1.6: pass'
    for name, cmd in [('busy', ['python3', '-c', busy]), ('idle', ['sleep', '1'])]:
        subprocess.run(['sh', str(ROOT / 'scripts' / 'stage.sh'), name, *cmd], env=env, check=True, capture_output=True, timeout=60)
    rows = {r.split('\t')[0]: r.split('\t') for r in (tmp_path / 'stages.tsv').read_text().splitlines()}
    assert int(rows['busy'][4]) >= 2 and int(rows['idle'][4]) == 0, rows
    report = subprocess.run(['sh', str(ROOT / 'scripts' / 'stage-report.sh'), str(tmp_path / 'stages.tsv')], capture_output=True,
                            text=True, check=True).stdout
    assert 'CPU     2 s' in report and 'CPU 2 s' in report.splitlines()[-1], report


def test_on_amd64_the_packages_install_only_what_the_cross_build_needs():
    # A borrowed amd64 laptop: `make deb-arm64` (and `make deb`) install the build's packages and the build root's
    # (deps.sh --cross), not deps-all's QEMU, VM, benchmark or Prometheus packages.
    for target in ('deb-arm64', 'deb'):
        steps = plan(target, 'HOST_ARCH=amd64')
        assert 'sh scripts/deps.sh --cross' in steps and not any('deps.sh --all' in s or s == 'sh scripts/deps.sh' for s in steps), steps
        assert steps.index('sh scripts/deps.sh --cross') < next(i for i, s in enumerate(steps) if 'buildroot.sh amd64' in s), steps
    listed = subprocess.run(['sh', 'scripts/deps.sh', '--cross', '--list'], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    cross = set(listed.stdout.split())
    build = set(subprocess.run(['sh', 'scripts/deps.sh', '--build', '--list'], cwd=ROOT, capture_output=True, text=True,
                               timeout=30).stdout.split()) - {'swiftlang'}
    # The build's own, and what the build root and the bookworm sysroot are made with: debootstrap, checking the
    # Debian archive's signatures with its keyring.
    assert build and build <= cross and {'debootstrap', 'debian-archive-keyring'} <= cross, cross
    assert not {'prometheus', 'qemu-system-x86', 'qemu-system-arm', 'e2fsprogs', 'python3-venv', 'strace', 'man-db'} & cross, cross
    # make test keeps its path: every stage waits for deps-all, the cross-build too.
    steps = plan('deb-arm64', 'HOST_ARCH=amd64', 'STAGE_DEPS=deps-all')
    assert 'sh scripts/deps.sh --all' in steps and 'sh scripts/deps.sh --cross' not in steps, steps


def test_publishing_needs_only_the_repository_tools():
    listed = subprocess.run(['sh', 'scripts/deps.sh', '--repo', '--list'], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0 and sorted(listed.stdout.split()) == ['apt-utils', 'dpkg-dev', 'gnupg', 'gpgv'], listed
    assert plan('deps-repo') == ['sh scripts/deps.sh --repo']
