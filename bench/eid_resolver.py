"""The Eddystone-EID resolver at fleet scale: `beacond scan` with 10,000 keys against the same scan without keys,
side by side and interleaved, on the same report stream.

    python bench/eid_resolver.py [--beacond build/beacond] [--keys 10000] [--reports 100000] [--rounds 3]

The stream is made once, seeded: bench/scan_throughput.py's mix of beacons and other adverts, with a third of the
reports Eddystone-EID frames, half of those from 200 of the keys for the current period (computed here with OpenSSL's
AES through pyca/cryptography) and half with random EIDs nobody holds. Each run injects the whole stream into
Bumble's controller behind `beacond scan --json --all`, with and without `--eid-keys` (a keyring of all the keys,
K = 10), and reads the beacond process's CPU time from /proc: the table's precomputation at start (10,000 keys × 5
periods) is measured apart from the per-report work. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
sys.path.insert(0, str(ROOT / 'bench'))
from scan_throughput import ad_for, scan_cpu  # noqa: E402
from test_eid import eid  # noqa: E402


EID_PREFIX = bytes.fromhex('0201060303aafe0d16aafe30ec')


def make_stream(n: int, keys: list[str], now: int) -> list[bytes]:
    rng = random.Random(4321)
    known = [eid(k, 10, now) for k in keys[:200]]
    events = []
    for _ in range(n):
        r = rng.random()
        if r < 1 / 6:
            ad = EID_PREFIX + rng.choice(known)
        elif r < 1 / 3:
            ad = EID_PREFIX + rng.randbytes(8)
        else:
            ad = ad_for(rng)
        report = bytes([1, 3, 1]) + rng.randbytes(6) + bytes([len(ad)]) + ad + bytes([(-rng.randrange(40, 95)) & 0xFF])
        params = bytes([0x02]) + report
        events.append(bytes([4, 0x3E, len(params)]) + params)
    return events


def run(beacond: str, events: list[bytes], keyring: str | None) -> tuple[float, float, int]:
    """(CPU seconds before the stream: start-up and the table; CPU seconds for the stream; resolved EIDs seen)."""
    start, used, out, _, _ = scan_cpu(beacond, events, ['--all'] + (['--eid-keys', keyring] if keyring else []))
    resolved = sum('"resolved":true' in line and '"final":true' in line for line in out.splitlines())
    return start, used, resolved


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--beacond', default=str(ROOT / 'build' / 'beacond'))
    ap.add_argument('--keys', type=int, default=10_000)
    ap.add_argument('--reports', type=int, default=100_000)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    rng = random.Random(99)
    keys = [rng.randbytes(16).hex() for _ in range(a.keys)]
    now = int(time.time())
    events = make_stream(a.reports, keys, now)
    with tempfile.TemporaryDirectory() as tmp:
        keyring = os.path.join(tmp, 'keys.toml')
        with open(keyring, 'w') as f:
            for i, k in enumerate(keys):
                f.write(f'[[beacon]]\nname = "beacon {i}"\nidentity_key = "{k}"\nrotation_exponent = 10\n\n')
        results: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
        for _ in range(a.rounds):
            for with_keys in (False, True):
                results[with_keys].append(run(a.beacond, events, keyring if with_keys else None))
    n = len(events)
    print(f'\n## EID resolver: {n} reports (a third EID frames), {a.keys} keys, {a.rounds} interleaved rounds\n')
    print('| scan | CPU at start (median) | CPU for the stream (median) | reports per CPU second | resolved beacons |')
    print('|---|---|---|---|---|')
    med = lambda xs: sorted(xs)[len(xs) // 2]
    rates = {}
    for with_keys, label in ((False, 'without keys'), (True, f'--eid-keys, {a.keys} keys')):
        rs = results[with_keys]
        cpu = med([r[1] for r in rs])
        rates[with_keys] = n / cpu if cpu > 0 else float('inf')
        print(f'| {label} | {med([r[0] for r in rs]):.2f} s | {cpu:.2f} s | {rates[with_keys]:,.0f} | {max(r[2] for r in rs)} |')
    print(f'\nWith {a.keys} keys: {rates[True] / rates[False] * 100:.0f} % of the throughput without keys.')
    return 0


if __name__ == '__main__':
    sys.exit(main())
