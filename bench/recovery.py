"""Recovery times of `beacond run` after faults, measured on Bumble's virtual controller.

For each fault, N times: make the fault, then time from the moment the controller is usable again to the
advertising enable command that puts the beacon back (read from the controller's own command log). `restart` is what
a package upgrade does (systemd stops beacond, which takes its beacon off the air, and starts the new binary): the
time from the disable the old process sends to the enable the new one sends.
    python bench/recovery.py [--runs 10] [--beacond PATH]
"""
from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
from harness.lab import Lab, wait_for  # noqa: E402


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


DISABLES = (0x200A, 0x2039)  # LE Set (Extended) Advertising Enable


def measure(beacond: str, runs: int, fault: str, config: Path) -> list[float]:
    out = []
    port = free_port()
    argv = [beacond, 'run', '-c', str(config), '-d', f'tcp:127.0.0.1:{port}']
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False) as lab:
        p = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
        try:
            wait_for(lab.advertising, 10, what='advertising')
            for _ in range(runs):
                n = len(lab.enabled_at())
                if fault == 'reconnect':
                    lab.disconnect(reopen_after=None)
                    t0 = time.monotonic()
                elif fault == 'outage-5s':
                    lab.disconnect(reopen_after=5.0)
                    wait_for(lambda: lab.reachable_at and lab.reachable_at[-1] > lab.dropped_at[-1], 15, what='return')
                    t0 = lab.reachable_at[-1]
                elif fault == 'hardware-error':
                    t0 = time.monotonic()
                    lab.hardware_error()
                elif fault == 'restart':
                    start = time.monotonic()
                    p.send_signal(signal.SIGTERM)
                    p.wait(10)
                    p = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
                    # Off the air from the old process's disable on.
                    t0 = min(t for t, op, params in lab.state()['commands']
                             if t >= start and op in DISABLES and params[:1] == b'\x00')
                wait_for(lambda: len(lab.enabled_at()) > n and lab.enabled_at()[-1] >= t0, 40, what='recovery')
                out.append(lab.enabled_at()[-1] - t0)
                time.sleep(0.2)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(10)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=10)
    ap.add_argument('--beacond', default=str(ROOT / '.build' / 'debug' / 'beacond'))
    args = ap.parse_args()
    import tempfile
    config = Path(tempfile.mkdtemp()) / 'beacond.conf'
    config.write_text('[beacon]\nuuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"\nmajor = 1\nminor = 1\n')
    print(f'| fault | runs | median | min | max | from … to … |')
    print(f'|---|---|---|---|---|---|')
    for fault, what in (('reconnect', 'connection dropped, server still listening → enable'),
                        ('hardware-error', 'Hardware Error event → enable'),
                        ('outage-5s', 'controller unreachable 5 s, listening again → enable'),
                        ('restart', 'SIGTERM (the old process disables) → the new process enables: a package upgrade')):
        runs = args.runs if fault != 'outage-5s' else max(3, args.runs // 3)
        xs = [x * 1000 for x in measure(args.beacond, runs, fault, config)]
        print(f'| {fault} | {len(xs)} | {statistics.median(xs):.0f} ms | {min(xs):.0f} ms | {max(xs):.0f} ms | {what} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
