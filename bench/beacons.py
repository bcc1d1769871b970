"""The cost of several beacons: 1, 4 and 16 beacons side by side, in one run, on Bumble's virtual controller.

    python bench/beacons.py [--beacond build/beacond] [--idle-seconds 10] [--reloads 10]

For each count, on an extended controller (one set per beacon) and on a legacy-only one (time slices): peak RSS
(VmHWM) once advertising, the idle cost over a window (context switches, CPU time), and for the extended controller
SIGHUP → the edited beacon's new data in the controller when one beacon's measured power changes, with the number
of commands that reload sent (it should be one: the others are not touched; a new minor would be a new identity,
with its own address, so a restart of that set). Prints a markdown table.
"""
from __future__ import annotations

import argparse
import os
import signal
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
from run import cpu_ticks, free_port, proc_status, stop  # noqa: E402

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'


def config(n: int, edit: int = 0) -> str:
    return ''.join(f'[[beacon]]\nuuid = "{UUID}"\nmajor = {k + 1}\nminor = 0\nmeasured_power = {-59 - (edit if k == n - 1 else 0)}\n'
                   for k in range(n))


def frame(major: int, minor: int, power: int = -59) -> bytes:
    return (bytes.fromhex('0201061aff4c000215') + bytes.fromhex(UUID.replace('-', '')) + major.to_bytes(2, 'big')
            + minor.to_bytes(2, 'big') + power.to_bytes(1, 'big', signed=True))


def measure(beacond: str, n: int, extended: bool, idle: float, reloads: int, tmp: str) -> dict:
    port = free_port()
    conf = Path(tmp) / f'b{n}{extended}.conf'
    conf.write_text(config(n))
    env = {**os.environ, 'STATE_DIRECTORY': tmp}
    out: dict = {}
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, extended=extended) as lab:
        p = subprocess.Popen([beacond, 'run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}'], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if extended:
                wait_for(lambda: sum(s['enabled'] for s in lab.state()['sets'].values()) == n, 20, what=f'{n} sets')
            else:
                wait_for(lab.advertising, 20, what='advertising')
            time.sleep(0.5)
            c0 = proc_status(p.pid, 'voluntary_ctxt_switches') + proc_status(p.pid, 'nonvoluntary_ctxt_switches')
            t0 = cpu_ticks(p.pid)
            time.sleep(idle)
            c1 = proc_status(p.pid, 'voluntary_ctxt_switches') + proc_status(p.pid, 'nonvoluntary_ctxt_switches')
            t1 = cpu_ticks(p.pid)
            out['rss'] = proc_status(p.pid, 'VmHWM')
            out['wakeups'] = (c1 - c0) / idle
            out['cpu'] = (t1 - t0) * 1000 / os.sysconf('SC_CLK_TCK') / idle
            if extended:
                latencies, counts = [], []
                for r in range(1, reloads + 1):
                    conf.write_text(config(n, edit=r))
                    seen = len(lab.state()['commands'])
                    t = time.monotonic()
                    p.send_signal(signal.SIGHUP)
                    want = frame(n, 0, -59 - r)
                    wait_for(lambda: want in [s['data'] for s in lab.state()['sets'].values() if s['enabled']], 10,
                             what='the edited beacon')
                    cmds = lab.state()['commands'][seen:]
                    latencies.append((next(c[0] for c in cmds if c[1] == 0x2037) - t) * 1000)
                    time.sleep(0.2)
                    counts.append(len(lab.state()['commands'][seen:]))
                out['reload'] = statistics.median(latencies)
                out['commands'] = max(counts)
        finally:
            stop(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--beacond', default=str(ROOT / 'build' / 'beacond'))
    ap.add_argument('--idle-seconds', type=float, default=10)
    ap.add_argument('--reloads', type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for n in (1, 4, 16):
            ext = measure(a.beacond, n, True, a.idle_seconds, a.reloads, tmp)
            leg = measure(a.beacond, n, False, a.idle_seconds, 0, tmp)
            rows.append((n, ext, leg))
    print('| beacons | peak RSS, extended | wakeups/s idle, extended | CPU ms/s idle, extended | reload one beacon → its new data | commands that reload sent | peak RSS, legacy (time slices) | wakeups/s idle, legacy | CPU ms/s idle, legacy |')
    print('|---|---|---|---|---|---|---|---|---|')
    for n, e, l in rows:
        print(f"| {n} | {e['rss']} KiB | {e['wakeups']:.1f} | {e['cpu']:.2f} | {e['reload']:.2f} ms | {e['commands']} | "
              f"{l['rss']} KiB | {l['wakeups']:.1f} | {l['cpu']:.2f} |")
    return 0


if __name__ == '__main__':
    sys.exit(main())
