"""Scan at scale: decoded advertising reports per CPU second, side by side on the same report stream.

    python bench/scan_throughput.py [--beacond build/beacond] [--reports 200000]

The stream is made once, seeded, as HCI LE Advertising Report events (H4 bytes): iBeacons of 5000 identities (some
with a positive measured power), AltBeacon-like and other manufacturer data, flags-only adverts, and malformed
iBeacons. Then, on exactly those bytes:
- `beacond scan --json` on a Bumble virtual controller; the stream is injected as the controller's events after the
  scan was enabled. CPU = the beacond process's utime + stime from /proc (everything: framing, HCI decoding, AD
  parsing, frame recognition, ranging, the scan table, the JSON lines).
- beacontools (`parse_packet` on each report's AD bytes, the reports cut out of the events with plain slicing), in
  this process, CPU by time.process_time().
- Bumble: `HCI_Packet.from_bytes` for each event, then `AdvertisingData.from_bytes` for each report.
Prints one markdown table. Honest limits: the Python peers run in-process (no I/O); beacond's number includes reading
the stream from a TCP socket.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
from harness.lab import Lab, wait_for  # noqa: E402

from bumble import hci  # noqa: E402
from bumble.core import AdvertisingData  # noqa: E402
from beacontools import parse_packet  # noqa: E402

UUIDS = [bytes(random.Random(i).randbytes(16)) for i in range(20)]


def ad_for(rng: random.Random) -> bytes:
    k = rng.random()
    if k < 0.6:  # an iBeacon, 20 UUIDs x 250 majors/minors
        power = rng.choice([-59, -65, -70, -77, 1])
        return (bytes.fromhex('0201061aff4c000215') + rng.choice(UUIDS) + rng.randrange(250).to_bytes(2, 'big')
                + rng.randrange(20).to_bytes(2, 'big') + power.to_bytes(1, 'big', signed=True))
    if k < 0.75:  # AltBeacon layout under company 0x0118
        return bytes.fromhex('0201061bff1801beac') + rng.randbytes(20) + bytes([0xC5, 0])
    if k < 0.9:  # flags and a name
        return bytes.fromhex('020106') + bytes([9, 0x09]) + b'Thermo42'
    return bytes.fromhex('02010618ff4c000215') + rng.randbytes(19)  # Apple prefix, body 2 bytes short


def make_stream(n: int) -> tuple[list[bytes], list[bytes]]:
    """(events as H4 bytes, each report's AD bytes): one report per event, legacy ADV_NONCONN_IND."""
    rng = random.Random(1234)
    events, ads = [], []
    for i in range(n):
        ad = ad_for(rng)
        addr = rng.randbytes(6)
        rssi = (-rng.randrange(40, 95)) & 0xFF
        report = bytes([1, 3, 1]) + addr + bytes([len(ad)]) + ad + bytes([rssi])
        params = bytes([0x02]) + report
        events.append(bytes([4, 0x3E, len(params)]) + params)
        ads.append(ad)
    return events, ads


def cpu_seconds(pid: int) -> float:
    fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def inject_until_idle(lab: Lab, pid: int, events: list[bytes]) -> float:
    """Injects the events as the controller's and returns the CPU seconds the process used for them: done when it
    stops using CPU for a second (it has read and handled everything that was sent)."""
    start = cpu_seconds(pid)
    for k in range(0, len(events), 2000):
        lab.inject(*events[k:k + 2000])
    last, still = cpu_seconds(pid), 0
    while still < 5:
        time.sleep(0.2)
        now = cpu_seconds(pid)
        still = still + 1 if now == last else 0
        last = now
    return last - start


def peak_rss_kib(pid: int) -> int:
    return next(int(line.split()[1]) for line in open(f'/proc/{pid}/status') if line.startswith('VmHWM:'))


def scan_cpu(beacond: str, events: list[bytes], extra: list[str]) -> tuple[float, float, str, int, int]:
    """Runs `beacond scan --json EXTRA…` behind Bumble's controller and injects the events, then stops it with SIGINT:
    (CPU seconds before the stream: start-up and whatever it loaded; CPU seconds for the stream; what it printed; its
    exit status; its peak RSS in KiB)."""
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, extended=False) as lab:
        p = subprocess.Popen([beacond, 'scan', '--device', f'tcp:127.0.0.1:{port}', '--json'] + extra,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: hci.HCI_LE_SET_SCAN_ENABLE_COMMAND in lab.opcodes(), timeout=60, what='scanning enabled')
        time.sleep(0.3)
        start = cpu_seconds(p.pid)
        used = inject_until_idle(lab, p.pid, events)
        peak = peak_rss_kib(p.pid)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    return start, used, out, p.returncode, peak


def run_beacontools(events: list[bytes]) -> tuple[float, int]:
    t0 = time.process_time()
    found = 0
    for e in events:
        ad = e[14:-1]  # H4 type, code, length, subevent, count, event type, address type, address, data length
        if parse_packet(ad) is not None:
            found += 1
    return time.process_time() - t0, found


def run_bumble(events: list[bytes]) -> tuple[float, int]:
    t0 = time.process_time()
    found = 0
    for e in events:
        packet = hci.HCI_Packet.from_bytes(e)
        for r in getattr(packet, 'reports', []):
            ad = AdvertisingData.from_bytes(bytes(r.data))
            if ad.get(AdvertisingData.MANUFACTURER_SPECIFIC_DATA) is not None:
                found += 1
    return time.process_time() - t0, found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--beacond', default=str(ROOT / 'build' / 'beacond'))
    ap.add_argument('--reports', type=int, default=200_000)
    args = ap.parse_args()
    events, _ = make_stream(args.reports)
    _, b_cpu, _, rc, _ = scan_cpu(args.beacond, events, ['--all'])
    assert rc == 0, f'beacond scan exited {rc}'
    t_cpu, t_found = run_beacontools(events)
    u_cpu, u_found = run_bumble(events)
    n = len(events)
    print(f'\n## Scan at scale: {n} advertising reports, the same H4 stream for all\n')
    print('| decoder | CPU seconds | reports per CPU second | what it does per report |')
    print('|---|---|---|---|')
    rate = lambda cpu: f'{n / cpu:,.0f}' if cpu > 0 else 'n/a (under the clock tick)'
    print(f'| beacond scan --json --all | {b_cpu:.2f} | {rate(b_cpu)} | read from TCP, H4 framing, HCI decode, AD parse, '
          'frame recognition, ranging, table, JSON |')
    print(f'| beacontools parse_packet | {t_cpu:.2f} | {rate(t_cpu)} | AD parse and beacon recognition ({t_found} beacons) |')
    print(f'| Bumble HCI_Packet + AdvertisingData | {u_cpu:.2f} | {rate(u_cpu)} | HCI decode and AD parse ({u_found} with manufacturer data) |')
    if b_cpu > 0:
        print(f'\nbeacond / beacontools: {t_cpu / b_cpu:.1f}x the reports per CPU second; beacond / Bumble: {u_cpu / b_cpu:.1f}x')
    return 0


if __name__ == '__main__':
    sys.exit(main())
