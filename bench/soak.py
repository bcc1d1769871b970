"""A soak of legacy time slicing: three beacons, each from its own address, on a model of the Pi 4's CYW43455
(Tests/Integration/harness/personalities.py) that now and then answers late, drops an answer or wedges, for an hour.

    python bench/soak.py [--beacond build/beacond] [--minutes 60] [--arm64 BINARY [--no-x86]]

What it measures, every second, from outside beacond: its resident memory and CPU time (/proc), and which beacons the
second radio heard. A fault comes every 20–40 s (seeded, so a run can be repeated): one command answered 0.3–1.5 s
late, one command never answered, or the controller answering nothing at all for 3–8 s (a wedge, as a Pi's radio in
the "command tx timeout" state). After each, the time until every beacon was heard again (recovery). A beacon is lost
when it is not heard for 3 s outside a fault and its recovery.

`--arm64 BINARY` runs the arm64 package's binary under qemu-user as a Cortex-A53 (the Pi 3's and Zero 2 W's core;
the static qemu-aarch64 and the trixie build root of scripts/arm64-emulator.sh and scripts/buildroot.sh): its CPU
per second is then the emulated core's, with qemu's own cost in it — an upper bound, not a Pi's figure.

Prints a markdown table and exits 1 when memory grew by more than 1 MiB after the first minute, a beacon was lost, or
a recovery did not happen. `--minutes 0.7` keeps it working in CI (make bench-smoke: one fault).
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
sys.path.insert(0, str(ROOT / 'bench'))
from bumble import hci  # noqa: E402

from harness.lab import Lab, wait_for  # noqa: E402
from harness.personalities import CYW43455  # noqa: E402
from run import free_port  # noqa: E402

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'
SLOT_OPCODES = [hci.HCI_LE_SET_ADVERTISING_ENABLE_COMMAND, hci.HCI_LE_SET_RANDOM_ADDRESS_COMMAND,
                hci.HCI_LE_SET_ADVERTISING_DATA_COMMAND]


def frames() -> list[bytes]:
    return [bytes.fromhex('0201061aff4c000215') + bytes.fromhex(UUID.replace('-', '')) + (7).to_bytes(2, 'big')
            + k.to_bytes(2, 'big') + (-59).to_bytes(1, 'big', signed=True) for k in range(3)]


def proc_sample(pid: int) -> tuple[int, float]:
    """(RSS in KiB, CPU seconds) of a process."""
    rss = 0
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                rss = int(line.split()[1])
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    ticks = os.sysconf('SC_CLK_TCK')
    return rss, (int(fields[11]) + int(fields[12])) / ticks


def soak(command: list[str], minutes: float, seed: int) -> dict:
    rng = random.Random(seed)
    port = free_port()
    wanted = frames()
    with tempfile.TemporaryDirectory() as tmp, Lab(f'tcp-server:127.0.0.1:{port}', personality=CYW43455) as lab:
        conf = Path(tmp) / 'soak.conf'
        conf.write_text(''.join(f'[[beacon]]\nuuid = "{UUID}"\nmajor = 7\nminor = {k}\n' for k in range(3)))
        log = open(Path(tmp) / 'beacond.log', 'w')
        p = subprocess.Popen(command + ['run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}'],
                             env={**os.environ, 'STATE_DIRECTORY': tmp}, stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_for(lambda: all(f in lab.received_data() for f in wanted), 30, what='the three beacons on the air')
            start = time.monotonic()
            end = start + minutes * 60
            last_heard = {f: start for f in wanted}
            samples: list[tuple[float, int, float]] = []
            faults: list[tuple[str, float, float | None]] = []  # (kind, when it ended, recovered after (s))
            lost: list[tuple[bytes, float]] = []
            quiet_until = start
            next_fault = start + rng.uniform(20, 40) * min(1.0, minutes)
            pending: tuple[str, float] | None = None
            seen = 0
            while time.monotonic() < end:
                time.sleep(1)
                now = time.monotonic()
                received = lab.received
                for r in received[seen:]:
                    if r.data in last_heard:
                        last_heard[r.data] = max(last_heard[r.data], now)
                seen = len(received)
                samples.append((now - start, *proc_sample(p.pid)))
                if pending:
                    kind, ended = pending
                    if now >= ended and all(t >= ended for t in last_heard.values()):
                        faults.append((kind, ended - start, max(last_heard.values()) - ended))
                        pending = None
                        quiet_until = now + 1
                    elif now - ended > 60:
                        faults.append((kind, ended - start, None))
                        pending = None
                elif now >= quiet_until:
                    for f, t in last_heard.items():
                        if now - t > 3:
                            lost.append((f, now - start))
                            last_heard[f] = now
                if pending is None and now >= next_fault:
                    kind = rng.choice(['late answer', 'dropped answer', 'wedge'])
                    opcode = rng.choice(SLOT_OPCODES)
                    if kind == 'late answer':
                        lab.add_fault(opcode, None, delay=rng.uniform(0.3, 1.5))
                        ended = now + 2
                    elif kind == 'dropped answer':
                        lab.add_fault(opcode, None)
                        ended = now + 2
                    else:
                        length = rng.uniform(3, 8)
                        for op in SLOT_OPCODES + [hci.HCI_RESET_COMMAND, hci.HCI_READ_LOCAL_VERSION_INFORMATION_COMMAND]:
                            lab.add_fault(op, None, times=-1)
                        time.sleep(length)
                        lab.clear_faults()
                        ended = time.monotonic()
                    pending = (kind, ended)
                    next_fault = ended + rng.uniform(20, 40) * min(1.0, minutes)
            alive = p.poll() is None
        finally:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
            log.close()
        commands = len(lab.state()['commands'])
    after_first_minute = [s for s in samples if s[0] >= min(60, samples[-1][0] / 2)] or samples
    recoveries = [r for _, _, r in faults if r is not None]
    return {
        'seconds': samples[-1][0] if samples else 0,
        'rss_first_kib': after_first_minute[0][1], 'rss_last_kib': samples[-1][1], 'rss_max_kib': max(s[1] for s in samples),
        'cpu_per_second_ms': 1000 * (samples[-1][2] - samples[0][2]) / max(1e-9, samples[-1][0] - samples[0][0]),
        'commands_per_second': commands / max(1e-9, samples[-1][0]),
        'faults': faults, 'lost': lost, 'alive': alive,
        'recovery_median_s': statistics.median(recoveries) if recoveries else None,
        'recovery_max_s': max(recoveries) if recoveries else None,
        'unrecovered': sum(1 for _, _, r in faults if r is None),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--beacond', default=str(ROOT / 'build' / 'beacond'))
    ap.add_argument('--minutes', type=float, default=60)
    ap.add_argument('--seed', type=int, default=31)
    ap.add_argument('--arm64', help='the arm64 binary, run under qemu-user as a Cortex-A53')
    ap.add_argument('--no-x86', action='store_true', help='with --arm64: only that one (two soaks side by side)')
    a = ap.parse_args()
    runs = [] if a.no_x86 and a.arm64 else [('x86-64', [a.beacond])]
    if a.arm64:
        qemu = sorted(glob.glob('/var/cache/beacond-buildroot/qemu-aarch64-*/qemu-aarch64'))
        root = sorted(glob.glob('/var/cache/beacond-buildroot/trixie-amd64-*/'))
        if not qemu or not root:
            print('soak: NOT RUN on arm64: no qemu-aarch64 or trixie build root (sh scripts/arm64-emulator.sh; sh scripts/buildroot.sh amd64)')
            return 1
        runs.append(('arm64 under qemu-user, -cpu cortex-a53', [qemu[-1], '-cpu', 'cortex-a53', '-L', root[-1], a.arm64]))
    ok = True
    print('| binary | minutes | faults (late / dropped / wedge) | recovered, median / max | beacons lost | RSS after the first minute → end (max) | CPU per second | HCI commands per second |')
    print('|---|---|---|---|---|---|---|---|')
    for name, command in runs:
        r = soak(command, a.minutes, a.seed)
        kinds = [k for k, _, _ in r['faults']]
        grew = r['rss_last_kib'] - r['rss_first_kib']
        rec = (f"{len(r['faults']) - r['unrecovered']}/{len(r['faults'])}, {r['recovery_median_s']:.1f} s / {r['recovery_max_s']:.1f} s"
               if r['recovery_median_s'] is not None else f"0/{len(r['faults'])}")
        print(f"| {name} | {r['seconds'] / 60:.1f} | {kinds.count('late answer')} / {kinds.count('dropped answer')} / {kinds.count('wedge')} "
              f"| {rec} | {len(r['lost'])} | {r['rss_first_kib'] / 1024:.2f} → {r['rss_last_kib'] / 1024:.2f} MiB ({r['rss_max_kib'] / 1024:.2f}) "
              f"| {r['cpu_per_second_ms']:.1f} ms | {r['commands_per_second']:.0f} |")
        if r['lost']:
            print(f"soak: {name}: beacons lost at {[(f.hex()[-10:], round(t)) for f, t in r['lost']]}")
        if r['unrecovered'] or r['lost'] or grew > 1024 or not r['alive']:
            print(f"soak: {name}: FAILED (unrecovered {r['unrecovered']}, lost {len(r['lost'])}, RSS grew {grew} KiB, alive {r['alive']})")
            ok = False
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
