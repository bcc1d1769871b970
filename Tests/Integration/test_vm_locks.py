"""The VM harness (Tests/VM/run.sh, run as root by make test) takes its locks where no other user can put a file: the
root-owned cache directory (BEACOND_VM_CACHE, /var/cache/beacond-vm), never a world-writable one such as /tmp or
/run/lock. Its guest-slot locks were ${TMPDIR:-/tmp}/beacond-vm-slot-NAME.lock: on a machine with
fs.protected_symlinks=0, another user's symlink of that name made root truncate the file it pointed to.

Here the script's own lines run: its cache-directory check and its slot-lock part (run.sh itself needs qemu and an
image)."""
from __future__ import annotations

import os
import re
import subprocess

from conftest import ROOT
from test_repo import locked

RUN = ROOT / 'Tests' / 'VM' / 'run.sh'


def part(start: str, end: str, inclusive: bool) -> str:
    """The script's lines from the one starting with `start` to the one starting with `end` (that one too when
    inclusive)."""
    lines = RUN.read_text().splitlines()
    first = next(i for i, l in enumerate(lines) if l.startswith(start))
    last = next(i for i in range(first + 1, len(lines)) if lines[i].startswith(end))
    return '\n'.join(lines[first:last + (1 if inclusive else 0)]) + '\n'


def lock_part() -> str:
    """The cache directory made and checked, then the slot lock taken (what run.sh runs before its guest)."""
    return (part('mkdir -p "$cache_root"', 'exec 8>', inclusive=False)
            + part('if [ -n "${BEACOND_VM_SLOT:-}" ]', 'fi', inclusive=True))


def test_the_slot_lock_is_in_the_cache_directory_and_a_symlink_in_tmp_truncates_nothing(tmp_path):
    world = tmp_path / 'tmp'  # a world-writable directory, as /tmp is
    world.mkdir()
    world.chmod(0o1777)
    victim = tmp_path / 'root-owned-file'
    victim.write_text('precious\n')
    for name in ('beacond-vm-slot-a.lock', 'beacond-vm-slot-b.lock'):
        (world / name).symlink_to(victim)
    cache = tmp_path / 'cache'
    script = 'set -eu\ncache_root="$1"\n' + lock_part() + 'echo locked\nsleep 5\n'
    p = subprocess.Popen(['sh', '-c', script, 'run.sh', str(cache)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, 'TMPDIR': str(world), 'BEACOND_VM_SLOT': 'a'})
    try:
        assert p.stdout.readline() == 'locked\n', p.communicate()
        assert victim.read_text() == 'precious\n', 'the slot lock truncated the file a symlink in TMPDIR pointed to'
        held = [f for f in cache.iterdir() if f.is_file() and locked(f)]
        assert [f.name for f in held] == ['slot-a.lock'], list(cache.iterdir())
    finally:
        p.kill()
        p.communicate()
    assert sorted(f.name for f in world.iterdir()) == ['beacond-vm-slot-a.lock', 'beacond-vm-slot-b.lock']


def test_a_cache_directory_others_may_write_and_a_slot_name_with_a_path_are_refused(tmp_path):
    script = 'set -eu\ncache_root="$1"\n' + lock_part() + 'echo locked\n'
    shared = tmp_path / 'shared'
    shared.mkdir()
    shared.chmod(0o1777)
    r = subprocess.run(['sh', '-c', script, 'run.sh', str(shared)], capture_output=True, text=True, timeout=30,
                       env={**os.environ, 'BEACOND_VM_SLOT': 'a'})
    assert r.returncode == 2 and 'locked' not in r.stdout and str(shared) in r.stderr, r.stdout + r.stderr
    assert 'others can write' in r.stderr, r.stderr
    assert not list(shared.iterdir())
    r = subprocess.run(['sh', '-c', script, 'run.sh', str(tmp_path / 'cache')], capture_output=True, text=True,
                       timeout=30, env={**os.environ, 'BEACOND_VM_SLOT': '../x'})
    assert r.returncode == 2 and 'BEACOND_VM_SLOT' in r.stderr, r.stdout + r.stderr
    assert not (tmp_path / 'x.lock').exists() and not (tmp_path / 'slot-..').exists()


def test_run_sh_opens_nothing_in_tmp_or_run_lock():
    text = RUN.read_text()
    assert not re.search(r'(TMPDIR|/tmp|/run/lock)[^\n]*\.lock', text), [l for l in text.splitlines() if '.lock' in l]
