"""beacond side by side with what users would run instead, in one run, on the same Bumble virtual controller.

    python bench/run.py [--runs 20] [--idle-seconds 60] [--beacond build/beacond] [--smoke]

Measures, for beacond, a Python program using Bumble's own host API (bench/peer_bumble.py) and a minimal raw H4
client in C (bench/raw_h4_client.c, the floor): exec → advertising enabled in the controller (read from the
controller's own command log) and peak RSS (VmHWM); for beacond also exec → READY=1, the stripped binary size, its
idle cost over a window with and without a systemd watchdog (context switches, CPU time, syscalls by strace -c), and
SIGHUP → new data in the controller for a data-only change and an interval change, with the advertising gap of each;
then scan at scale (bench/scan_throughput.py): reports per CPU second against beacontools and Bumble.
Prints markdown tables (median, min, max, and beacond/peer ratios). `--smoke` runs everything briefly (CI keeps it
working; it asserts nothing about times).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
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
from harness.notify import NotifyListener  # noqa: E402

UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'


def ibeacon(minor: int = 1) -> bytes:
    return (bytes.fromhex('0201061aff4c000215') + bytes.fromhex(UUID.replace('-', '')) + (1).to_bytes(2, 'big')
            + minor.to_bytes(2, 'big') + (-59).to_bytes(1, 'big', signed=True))


def config(minor: int = 1, interval_ms: int = 100) -> str:
    return (f'[beacon]\nuuid = "{UUID}"\nmajor = 1\nminor = {minor}\n\n'
            f'[advertising]\ninterval_ms = {interval_ms}\n')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def proc_status(pid: int, key: str) -> int:
    for line in open(f'/proc/{pid}/status'):
        if line.startswith(key + ':'):
            return int(line.split()[1])
    raise KeyError(key)


def smaps(pid: int, field: str) -> int:
    """A field of /proc/PID/smaps_rollup in kB: Pss (each shared page divided among its sharers, so libc's and
    libsystemd's pages count for a fraction) or Private_Dirty (what is the process's alone: its real cost on a Pi)."""
    for line in open(f'/proc/{pid}/smaps_rollup'):
        if line.startswith(field + ':'):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_ticks(pid: int) -> int:
    fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def start_times(name: str, argv_for, lab: Lab, runs: int, env=None, notify: NotifyListener | None = None):
    """exec → first enable in the controller, exec → READY=1 (when there is a notify socket), peak RSS, and PSS and
    private dirty memory once advertising."""
    to_adv, to_ready, hwm, pss, dirty = [], [], [], [], []
    for _ in range(runs):
        t0 = time.monotonic()
        p = subprocess.Popen(argv_for(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            t_adv = wait_for(lambda: next((t for t in lab.enabled_at() if t >= t0), None), 30, what=f'{name} to advertise')
            to_adv.append((t_adv - t0) * 1000)
            if notify:
                t_ready = wait_for(lambda: notify.first('READY=1', t0), 10, what='READY=1')
                to_ready.append((t_ready - t0) * 1000)
            time.sleep(0.2)
            hwm.append(proc_status(p.pid, 'VmHWM'))
            pss.append(smaps(p.pid, 'Pss'))
            dirty.append(smaps(p.pid, 'Private_Dirty'))
        finally:
            stop(p)
        time.sleep(0.05)
    return to_adv, to_ready, hwm, pss, dirty


def stats(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt(xs, unit, digits=1):
    med, lo, hi = stats(xs)
    return f'{med:.{digits}f} {unit} | {lo:.{digits}f} {unit} | {hi:.{digits}f} {unit}'


def idle_cost(beacond: str, seconds: float, watchdog_usec: int | None, tmp: str):
    port = free_port()
    conf = os.path.join(tmp, 'idle.conf')
    Path(conf).write_text(config())
    env = dict(os.environ)
    env.pop('WATCHDOG_USEC', None)
    ndir = os.path.join(tmp, f'idle-{watchdog_usec}')
    os.makedirs(ndir)
    n = NotifyListener(ndir)
    env['NOTIFY_SOCKET'] = n.path
    if watchdog_usec:
        env['WATCHDOG_USEC'] = str(watchdog_usec)
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False) as lab:
        p = subprocess.Popen([beacond, 'run', '-c', conf, '-d', f'tcp:127.0.0.1:{port}'], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lab.advertising, 10, what='advertising')
            time.sleep(0.5)
            c0 = proc_status(p.pid, 'voluntary_ctxt_switches') + proc_status(p.pid, 'nonvoluntary_ctxt_switches')
            t0 = cpu_ticks(p.pid)
            pings0 = sum(1 for _, m in n.messages if m == 'WATCHDOG=1')
            time.sleep(seconds)
            c1 = proc_status(p.pid, 'voluntary_ctxt_switches') + proc_status(p.pid, 'nonvoluntary_ctxt_switches')
            t1 = cpu_ticks(p.pid)
            pings = sum(1 for _, m in n.messages if m == 'WATCHDOG=1') - pings0
            syscalls = None
            if shutil.which('strace'):
                out = os.path.join(tmp, 'strace.txt')
                subprocess.run(['timeout', '-s', 'INT', str(seconds), 'strace', '-c', '-f', '-o', out, '-p', str(p.pid)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                syscalls = 0
                for line in Path(out).read_text().splitlines():
                    parts = line.split()
                    if parts and parts[-1] == 'total':
                        syscalls = int(parts[3]) if len(parts) >= 5 else int(parts[2])
        finally:
            stop(p)
            n.close()
    hz = os.sysconf('SC_CLK_TCK')
    return c1 - c0, (t1 - t0) * 1000 / hz, syscalls, pings


def reload_latency(beacond: str, runs: int, tmp: str):
    port = free_port()
    conf = os.path.join(tmp, 'reload.conf')
    Path(conf).write_text(config(minor=1))
    data_ms, data_gaps, interval_ms, interval_gaps = [], [], [], []
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False) as lab:
        p = subprocess.Popen([beacond, 'run', '-c', conf, '-d', f'tcp:127.0.0.1:{port}'],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: (a := lab.advertising()) and a[1]['data'] == ibeacon(1), 10, what='advertising')
            minor, interval = 1, 100
            for i in range(runs):
                # Data only: a new minor.
                minor += 1
                Path(conf).write_text(config(minor=minor, interval_ms=interval))
                t0 = time.monotonic()
                p.send_signal(signal.SIGHUP)
                wait_for(lambda: (a := lab.advertising()) and a[1]['data'] == ibeacon(minor), 10, what='new data')
                cmds = [c for c in lab.state()['commands'] if c[0] >= t0]
                data_ms.append((next(t for t, op, _ in cmds if op == 0x2037) - t0) * 1000)
                data_gaps.append(gap(cmds))
                # Parameters: a new interval.
                interval = 100 if interval == 200 else 200
                Path(conf).write_text(config(minor=minor, interval_ms=interval))
                t0 = time.monotonic()
                p.send_signal(signal.SIGHUP)
                units = interval * 16 // 10
                wait_for(lambda: (a := lab.advertising()) and a[1]['interval_min'] == units, 10, what='new interval')
                cmds = [c for c in lab.state()['commands'] if c[0] >= t0]
                enable = [t for t, op, prm in cmds if op == 0x2039 and prm[:1] == b'\x01']
                interval_ms.append((enable[-1] - t0) * 1000)
                interval_gaps.append(gap(cmds))
        finally:
            stop(p)
    return data_ms, data_gaps, interval_ms, interval_gaps


def gap(cmds) -> float:
    """ms between a disable and the next enable in the controller's command log (0 when nothing was disabled)."""
    off = next((t for t, op, prm in cmds if op == 0x2039 and prm[:1] == b'\x00'), None)
    if off is None:
        return 0.0
    on = next(t for t, op, prm in cmds if op == 0x2039 and prm[:1] == b'\x01' and t >= off)
    return (on - off) * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=20)
    ap.add_argument('--idle-seconds', type=float, default=60)
    ap.add_argument('--beacond', default=str(ROOT / 'build' / 'beacond'))
    ap.add_argument('--smoke', action='store_true', help='3 runs, 2 s windows: keeps the benchmark working in CI')
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.idle_seconds = 3, 2
    beacond = args.beacond
    tmp = tempfile.mkdtemp(prefix='beacond-bench-')
    # Every beacond here keeps its addresses in a state directory of its own, as the unit's StateDirectory= gives it,
    # so that what earlier runs on this machine left in /var/lib/beacond is not in the numbers.
    os.environ['STATE_DIRECTORY'] = os.path.join(tmp, 'state')
    raw = os.path.join(tmp, 'raw_h4_client')
    subprocess.run(['cc', '-O2', '-o', raw, str(ROOT / 'bench' / 'raw_h4_client.c')], check=True)
    data_hex = ibeacon().hex()
    conf = os.path.join(tmp, 'beacond.conf')
    Path(conf).write_text(config())

    print(f'# beacond benchmark: {args.runs} runs each, idle window {args.idle_seconds:g} s')
    print(f'machine: {os.cpu_count()} CPUs, {platform_line()}; beacond {beacond}')
    results = {}
    for name in ('beacond', 'bumble', 'raw'):
        port = free_port()
        with Lab(f'tcp-server:127.0.0.1:{port}', scan=False) as lab:
            if name == 'beacond':
                notify = NotifyListener(tmp)
                env = {**os.environ, 'NOTIFY_SOCKET': notify.path}
                r = start_times(name, lambda: [beacond, 'run', '-c', conf, '-d', f'tcp:127.0.0.1:{port}'], lab, args.runs,
                                env=env, notify=notify)
                notify.close()
            elif name == 'bumble':
                r = start_times(name, lambda: [sys.executable, str(ROOT / 'bench' / 'peer_bumble.py'),
                                               f'tcp-client:127.0.0.1:{port}', data_hex], lab, args.runs)
            else:
                r = start_times(name, lambda: [raw, '127.0.0.1', str(port), data_hex], lab, args.runs)
            results[name] = r

    b_adv, b_ready, b_hwm, _, _ = results['beacond']
    print('\n## Start: exec → advertising enabled in the controller, peak RSS, PSS and private dirty memory\n')
    print('| program | exec → advertising, median | min | max | peak RSS (VmHWM), median | min | max | PSS, median | private dirty, median |')
    print('|---|---|---|---|---|---|---|---|---|')
    labels = {'beacond': 'beacond run', 'bumble': 'Python + Bumble host API', 'raw': 'raw H4 client (C, floor)'}
    for name in ('beacond', 'bumble', 'raw'):
        adv, _, hwm, pss, dirty = results[name]
        print(f'| {labels[name]} | {fmt(adv, "ms")} | {fmt([h / 1024 for h in hwm], "MiB")} | '
              f'{statistics.median(pss) / 1024:.1f} MiB | {statistics.median(dirty) / 1024:.1f} MiB |')
    print(f'| beacond exec → READY=1 | {fmt(b_ready, "ms")} | | | |')
    print('\n| ratio (medians) | exec → advertising | peak RSS |')
    print('|---|---|---|')
    for peer in ('bumble', 'raw'):
        adv, _, hwm, _, _ = results[peer]
        print(f'| beacond / {labels[peer]} | {statistics.median(b_adv) / statistics.median(adv):.3f} | '
              f'{statistics.median(b_hwm) / statistics.median(hwm):.2f} |')
    size = os.path.getsize(beacond)
    print(f'\nbeacond binary: {size / 1e6:.2f} MB ({size} bytes), {"stripped" if b"not stripped" not in subprocess.run(["file", beacond], capture_output=True).stdout else "not stripped"}')

    print(f'\n## Idle while advertising ({args.idle_seconds:g} s window)\n')
    print('| case | context switches | CPU time | syscalls (strace -c) | WATCHDOG=1 sent |')
    print('|---|---|---|---|---|')
    for label, wd in (('no watchdog', None), ('WATCHDOG_USEC=30 s (unit default)', 30_000_000),
                      ('WATCHDOG_USEC=2 s', 2_000_000)):
        ctx, cpu, sc, pings = idle_cost(beacond, args.idle_seconds, wd, tmp)
        print(f'| {label} | {ctx} | {cpu:.0f} ms | {sc if sc is not None else "strace missing"} | {pings} |')

    d_ms, d_gap, i_ms, i_gap = reload_latency(beacond, args.runs, tmp)
    print('\n## Reload: SIGHUP → new state in the controller\n')
    print('| change | SIGHUP → controller has it, median | min | max | advertising gap, median | min | max |')
    print('|---|---|---|---|---|---|---|')
    print(f'| data only (new minor) | {fmt(d_ms, "ms", 2)} | {fmt(d_gap, "ms", 2)} |')
    print(f'| interval 100 ↔ 200 ms | {fmt(i_ms, "ms", 2)} | {fmt(i_gap, "ms", 2)} |')
    shutil.rmtree(tmp, ignore_errors=True)

    import scan_throughput
    sys.argv = [sys.argv[0], '--beacond', beacond, '--reports', '5000' if args.smoke else '200000']
    return scan_throughput.main()


def platform_line() -> str:
    try:
        model = next(l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name'))
    except (OSError, StopIteration):
        model = 'unknown CPU'
    return f'{model}, kernel {os.uname().release}'


if __name__ == '__main__':
    sys.exit(main())
