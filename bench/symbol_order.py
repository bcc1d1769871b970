"""The order in which the release link lays out beacond's code: every function a run executes first, so that the pages
a running daemon touches are few and together (scripts/symbol-order, read by scripts/release-build.sh and the arm64
cross-build through lld's --symbol-ordering-file).

    python bench/symbol_order.py --beacond .build/release/beacond [--out scripts/symbol-order]
    python bench/symbol_order.py --beacond .build/release/beacond --check [--least 0.8]

BEACOND is the unstripped release binary (`sh scripts/release-build.sh .`). Each run goes under valgrind's callgrind,
which records every function executed, whoever's (ours, the static Swift runtime's, libstdc++'s), on a Bumble
controller:
- one iBeacon on a controller with advertising sets: the start, 3 s on the air, a reload with a new minor, SIGTERM;
- three beacons on the Pi's CYW43455 model (legacy: time slices), 4 s on the air, SIGTERM.
The names kept are those of the binary's own code (its symbol table), sorted, so the file is the same for the same
binary. Why (docs/benchmarks.md): a start touched 73 of the 83 64-KiB windows of the 5.3 MB .text, and the kernel maps a
whole window (fault-around) on each first touch, so the peak RSS held most of the binary's code.

A name the linker no longer finds is ignored (a stale file costs pages, not correctness); release-build.sh says how
many of the names the binary still has. `--check` (CI's benchmark smoke) profiles the same runs and fails when the
file holds less than LEAST of the functions they executed: then `make symbol-order`.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'bench'))
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
from harness.lab import Lab, wait_for  # noqa: E402
from harness.personalities import CYW43455  # noqa: E402
from air_cost import config as three_beacons  # noqa: E402
from run import config, free_port  # noqa: E402


def under_callgrind(beacond: str, conf: Path, port: int, out: Path) -> subprocess.Popen:
    return subprocess.Popen(['valgrind', '--tool=callgrind', '--demangle=no', f'--callgrind-out-file={out}',
                             beacond, 'run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}'],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGTERM)
    if p.wait(120) != 0:
        raise SystemExit(f'beacond under callgrind exited {p.returncode}')


def one_ibeacon(beacond: str, tmp: Path) -> Path:
    conf, out, port = tmp / 'one.conf', tmp / 'one.callgrind', free_port()
    conf.write_text(config())
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False) as lab:
        t0 = time.monotonic()
        p = under_callgrind(beacond, conf, port, out)
        wait_for(lambda: next((t for t in lab.enabled_at() if t >= t0), None), 120, what='advertising under callgrind')
        time.sleep(3)
        conf.write_text(config(minor=2))
        p.send_signal(signal.SIGHUP)
        time.sleep(3)
        finish(p)
    return out


def three_on_the_pi_model(beacond: str, tmp: Path) -> Path:
    conf, out, port = tmp / 'three.conf', tmp / 'three.callgrind', free_port()
    conf.write_text(three_beacons())
    with Lab(f'tcp-server:127.0.0.1:{port}', personality=CYW43455, scan=False) as lab:
        p = under_callgrind(beacond, conf, port, out)
        wait_for(lab.advertising, 120, what='advertising under callgrind')
        time.sleep(4)
        finish(p)
    return out


def executed(profile: Path) -> set[str]:
    """Every function name callgrind recorded (as caller or callee), mangled."""
    names = set()
    for line in profile.read_text(errors='replace').splitlines():
        m = re.match(r'c?fn=\(\d+\) (.+)', line)
        if m:
            names.add(m.group(1).strip())
    return names


def code_symbols(binary: str) -> set[str]:
    out = subprocess.run(['nm', '--defined-only', binary], capture_output=True, text=True, check=True).stdout
    return {f[2] for f in (l.split() for l in out.splitlines()) if len(f) == 3 and f[1] in 'tTwW'}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--beacond', default=str(ROOT / '.build' / 'release' / 'beacond'))
    ap.add_argument('--out', default=str(ROOT / 'scripts' / 'symbol-order'))
    ap.add_argument('--check', action='store_true', help='compare the runs with the file (--out) instead of writing it')
    ap.add_argument('--least', type=float, default=0.8)
    a = ap.parse_args()
    ours = code_symbols(a.beacond)
    if not ours:
        raise SystemExit(f'{a.beacond} has no symbol table: give the unstripped release binary')
    tmp = Path(tempfile.mkdtemp(prefix='beacond-order-'))
    os.environ['STATE_DIRECTORY'] = str(tmp / 'state')
    hot = set()
    for run in (one_ibeacon, three_on_the_pi_model):
        names = executed(run(a.beacond, tmp)) & ours
        print(f'{run.__name__}: {len(names)} functions of the binary executed')
        hot |= names
    if a.check:
        listed = set(Path(a.out).read_text().split())
        share = len(hot & listed) / len(hot)
        print(f'{a.out} holds {len(hot & listed)} of the {len(hot)} functions these runs executed ({share:.0%}; '
              f'at least {a.least:.0%} wanted)')
        if share < a.least:
            print(f'the code order is stale: run make symbol-order and commit {a.out}', file=sys.stderr)
            return 1
        return 0
    Path(a.out).write_text(''.join(n + '\n' for n in sorted(hot)))
    print(f'{a.out}: {len(hot)} of the binary\'s {len(ours)} functions')
    return 0


if __name__ == '__main__':
    sys.exit(main())
