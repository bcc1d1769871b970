"""Counts the system calls `beacond run` makes while idle and advertising, with and without a systemd watchdog.

Runs the real binary against Bumble's virtual controller, waits until the controller advertises, then attaches
`strace -c -f` for a fixed window. Prints one line per case; used for the README's idle-cost number.
    python bench/idle_syscalls.py [--seconds 10] [--beacond PATH]
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'tests'))
from harness.lab import Lab, wait_for  # noqa: E402


def count(beacond: str, seconds: float, watchdog_usec: int | None) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, 'hci.sock')
        notify = os.path.join(tmp, 'notify.sock')
        import socket
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(notify)
        env = {**os.environ, 'NOTIFY_SOCKET': notify}
        if watchdog_usec:
            env['WATCHDOG_USEC'] = str(watchdog_usec)
        with Lab(f'unix-server:{sock}', scan=False) as lab:
            p = subprocess.Popen([beacond, 'run', '-c', str(ROOT / 'config' / 'beacond.conf'), '-d', f'unix:{sock}'],
                                 env=env, stderr=subprocess.DEVNULL)
            try:
                wait_for(lab.advertising, 10, what='advertising')
                out = os.path.join(tmp, 'strace.txt')
                subprocess.run(['timeout', '-s', 'INT', str(seconds), 'strace', '-c', '-f', '-o', out, '-p', str(p.pid)],
                               stderr=subprocess.DEVNULL)
                text = Path(out).read_text()
            finally:
                p.send_signal(signal.SIGTERM)
                p.wait(10)
        listener.close()
    total = 0
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[-1] == 'total':
            total = int(parts[3]) if len(parts) >= 5 else int(parts[2])
    return total, text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=float, default=10)
    ap.add_argument('--beacond', default=str(ROOT / '.build' / 'debug' / 'beacond'))
    args = ap.parse_args()
    for label, wd in (('no watchdog', None), ('WATCHDOG_USEC=30s (pings every 15 s)', 30_000_000),
                      ('WATCHDOG_USEC=2s (pings every 1 s)', 2_000_000)):
        total, text = count(args.beacond, args.seconds, wd)
        print(f'{label}: {total} syscalls in {args.seconds:g} s while advertising')
        if os.environ.get('VERBOSE'):
            print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
