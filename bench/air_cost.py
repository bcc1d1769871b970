"""The Pi's air cost (issue #54): three beacons from their own addresses (the default config) time-sliced on a
legacy-only controller, before and after slots that hold two events, side by side and interleaved in one run.

    python bench/air_cost.py --before OLD_BEACOND [--beacond build/beacond] [--seconds 6] [--rounds 3]

Two controllers: Bumble's playing the Pi's CYW43455 (Tests/Integration/harness/personalities.py; its first event comes
at once, each command in about a millisecond) and Google's RootCanal's legacy-only one (its first event one interval
after the enable, each command some 45 ms late; Tests/Integration/harness/rootcanal.py), when its build root is here.
From the second radio's side: advertising events heard per second (Bumble's and RootCanal's radios carry each event
once; a real radio sends it on three channels, so packets on the air are three times as many), how many of the three
beacons were heard, and the longest time a beacon went unheard. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
sys.path.insert(0, str(ROOT / 'bench'))
from harness.lab import Lab, wait_for  # noqa: E402
from harness.personalities import CYW43455  # noqa: E402
from run import free_port  # noqa: E402

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
PREFIX = bytes.fromhex('0201061aff4c000215')


def config() -> str:
    return ''.join(f'[[beacon]]\nuuid = "{UUID}"\nmajor = 7\nminor = {k}\n' for k in range(1, 4))


def summary(received, seconds: float) -> dict:
    ours = [r for r in received if r.data.startswith(PREFIX)]
    heard: dict[bytes, list[float]] = {}
    for r in ours:
        heard.setdefault(r.data, []).append(r.at)
    gaps = [max((b - a for a, b in zip(ts, ts[1:])), default=seconds) for ts in heard.values()]
    return {'events': len(ours) / seconds, 'beacons': len(heard), 'gap': max(gaps, default=seconds) * 1000}


def on_bumble(beacond: str, seconds: float, tmp: str) -> dict:
    port = free_port()
    conf = Path(tmp) / 'air.conf'
    conf.write_text(config())
    with Lab(f'tcp-server:127.0.0.1:{port}', personality=CYW43455) as lab:
        p = subprocess.Popen([beacond, 'run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}'],
                             env={**os.environ, 'STATE_DIRECTORY': tmp}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lab.advertising, 20, what='advertising')
            time.sleep(2)  # past the first slots, whose cost is measured
            start = time.monotonic()
            lab.clear_received()
            time.sleep(seconds)
            return summary([r for r in list(lab.received) if r.at >= start], seconds)
        finally:
            p.terminate()
            p.wait(10)


def on_rootcanal(beacond: str, seconds: float, tmp: str) -> dict | None:
    try:
        from harness.rootcanal import RootCanal, RootCanalUnavailable
    except ImportError:
        return None
    conf = Path(tmp) / 'air.conf'
    conf.write_text(config())
    try:
        rc = RootCanal(legacy=True, workdir=Path(tmp) / 'rootcanal')
    except RootCanalUnavailable as e:
        print(f'RootCanal NOT measured: {e}', file=sys.stderr)
        return None
    with rc:
        p = subprocess.Popen([beacond, 'run', '-c', str(conf), '-d', rc.device],
                             env={**os.environ, 'STATE_DIRECTORY': tmp}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(4)  # the start, and the nine slots whose cost is measured, at ~45 ms a command
            start = time.monotonic()
            time.sleep(seconds)
            return summary([r for r in rc.heard(start)], seconds)
        finally:
            p.terminate()
            p.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--beacond', default=str(ROOT / 'build' / 'beacond'))
    ap.add_argument('--before', required=True, help='the beacond to compare with (an earlier build)')
    ap.add_argument('--seconds', type=float, default=6)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(a.rounds):
        for label, binary in (('before', a.before), ('after', a.beacond)):  # interleaved: both see the same machine
            for lab, measure in (('Bumble, CYW43455 model', on_bumble), ('RootCanal, legacy-only', on_rootcanal)):
                with tempfile.TemporaryDirectory() as tmp:
                    r = measure(binary, a.seconds, tmp)
                if r is not None:
                    runs.setdefault((lab, label), []).append(r)
    print('| controller | beacond | beacons heard (of 3) | events heard per second (median) | packets on the air per second (×3 channels) | longest a beacon went unheard (worst) |')
    print('|---|---|---|---|---|---|')
    for (lab, label), rs in runs.items():
        ev = sorted(r['events'] for r in rs)[len(rs) // 2]
        print(f"| {lab} | {label} | {min(r['beacons'] for r in rs)} | {ev:.1f} | {ev * 3:.0f} | {max(r['gap'] for r in rs):.0f} ms |")
    return 0


if __name__ == '__main__':
    sys.exit(main())
