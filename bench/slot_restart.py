"""What an address per beacon costs on a legacy-only controller: three time-sliced beacons sharing one address (each
slot changes only the data, in place) against three with their own addresses (each slot disables the advertiser,
sets the beacon's random address, its data, and enables it again), side by side and interleaved, on Bumble's
virtual controller.

    python bench/slot_restart.py [--beacond build/beacond] [--seconds 6] [--rounds 3]

From the controller's side: the commands per slot, and the time from each slot's disable reaching the controller to
its enable reaching it (off the air). From the second radio's side: the median time between two hearings of the same
beacon (3 beacons × 100 ms slots: 300 ms when nothing is lost). Prints a markdown table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
sys.path.insert(0, str(ROOT / 'bench'))
from harness.lab import Lab, wait_for  # noqa: E402
from run import free_port  # noqa: E402

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
ENABLE = 0x200A


def config(shared: bool) -> str:
    beacons = ''.join(f'[[beacon]]\nuuid = "{UUID}"\nmajor = 7\nminor = {k}\n' for k in range(3))
    return beacons + ('[advertising]\naddress = "public"\n' if shared else '')


def measure(beacond: str, shared: bool, seconds: float, tmp: str) -> dict:
    port = free_port()
    conf = Path(tmp) / f'slots-{shared}.conf'
    conf.write_text(config(shared))
    env = {**os.environ, 'STATE_DIRECTORY': tmp}
    with Lab(f'tcp-server:127.0.0.1:{port}', extended=False) as lab:
        p = subprocess.Popen([beacond, 'run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}'], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lab.advertising, 20, what='advertising')
            time.sleep(1)
            lab.clear_received()
            start = time.monotonic()
            time.sleep(seconds)
            commands = [c for c in lab.state()['commands'] if c[0] >= start]
            received = [r for r in list(lab.received) if r.at >= start]
        finally:
            p.terminate()
            p.wait(10)
    # Off the air: each disable to the next enable; commands per slot: all commands over the slots (enables or data).
    off, last_disable = [], None
    for t, op, params in commands:
        if op == ENABLE and params[:1] == b'\x00':
            last_disable = t
        elif op == ENABLE and params[:1] == b'\x01' and last_disable is not None:
            off.append((t - last_disable) * 1000)
            last_disable = None
    slots = max(1, sum(1 for _, op, params in commands if op == 0x2008))  # one data command per slot
    gaps = []
    last_heard: dict[bytes, float] = {}
    for r in received:
        if r.data in last_heard:
            gaps.append((r.at - last_heard[r.data]) * 1000)
        last_heard[r.data] = r.at
    return {'commands': len(commands) / slots, 'off': statistics.median(off) if off else 0.0,
            'off_max': max(off) if off else 0.0, 'gap': statistics.median(gaps) if gaps else float('nan'),
            'heard': len(received) / seconds, 'addresses': len({r.address for r in received})}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--beacond', default=str(ROOT / 'build' / 'beacond'))
    ap.add_argument('--seconds', type=float, default=6)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    results: dict[bool, list[dict]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            for shared in (True, False):  # interleaved, so both see the same machine
                results[shared].append(measure(a.beacond, shared, a.seconds, tmp))
    print('| 3 beacons, legacy controller, 100 ms slots | addresses heard | commands per slot | off the air per slot (median, max) | same beacon heard again after (median) | reports/s |')
    print('|---|---|---|---|---|---|')
    for shared, label in ((True, 'one shared address (data changed in place)'), (False, 'an address per beacon (advertiser restarted)')):
        rs = results[shared]
        med = lambda k: statistics.median(r[k] for r in rs)
        print(f"| {label} | {max(r['addresses'] for r in rs)} | {med('commands'):.1f} | {med('off'):.2f} ms, {max(r['off_max'] for r in rs):.2f} ms | "
              f"{med('gap'):.0f} ms | {med('heard'):.1f} |")
    return 0


if __name__ == '__main__':
    sys.exit(main())
