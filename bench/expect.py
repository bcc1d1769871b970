"""`scan --expect` at fleet scale: a gateway checking 3,000 beacons of 300 shops' configs, against the plain scan of
the same report stream, side by side and interleaved.

    python bench/expect.py [--beacond build/beacond] [--shops 300] [--reports 100000] [--rounds 3]

The stream is bench/scan_throughput.py's (seeded: iBeacons of 20 UUIDs with majors 0–249 and minors 0–19 at five
measured powers, AltBeacon-like and other adverts, malformed iBeacons). The configs: one file per shop, shop k with
major k and minors 0–9 of the stream's first UUID, measured power -59, so that much of the stream matches an expected
beacon, part of that with another power (a mismatch); each file has one beacon more that is never on the air, so the
check never completes and reads the whole stream. Each run injects the stream into Bumble's controller behind
`beacond scan --json --all`, or behind `beacond scan --json --expect DIR --timeout 3600`, and reads the beacond
process's CPU time from /proc: loading the configs is measured apart from the per-report work. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
sys.path.insert(0, str(ROOT / 'bench'))
from scan_throughput import UUIDS, make_stream, scan_cpu  # noqa: E402


def configs(directory: Path, shops: int) -> int:
    uuid = UUIDS[0].hex().upper()
    uuid = f'{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}'
    n = 0
    for k in range(shops):
        text = ''.join(f'[[beacon]]\nuuid = "{uuid}"\nmajor = {k}\nminor = {m}\n\n' for m in range(10))
        text += f'[[beacon]]\nuuid = "{uuid}"\nmajor = {k}\nminor = 999\n\n[controller]\nbackend = "hci"\n'
        (directory / f'shop{k:04d}.conf').write_text(text)
        n += 11
    return n


def run(beacond: str, events: list[bytes], expect: Path | None) -> tuple[float, float, dict, int]:
    """(CPU seconds before the stream: start-up and the configs; CPU seconds for the stream; the summary line; peak RSS
    in KiB)."""
    extra = ['--expect', str(expect), '--timeout', '3600'] if expect else ['--all']
    start, used, out, _, peak = scan_cpu(beacond, events, extra)
    summary = next((json.loads(l) for l in out.splitlines() if '"expect_summary"' in l or '"kind":"summary"' in l), {})
    return start, used, summary, peak


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--beacond', default=str(ROOT / 'build' / 'beacond'))
    ap.add_argument('--shops', type=int, default=300)
    ap.add_argument('--reports', type=int, default=100_000)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    events, _ = make_stream(a.reports)
    with tempfile.TemporaryDirectory() as tmp:
        expected = configs(Path(tmp), a.shops)
        results: dict[bool, list] = {False: [], True: []}
        for _ in range(a.rounds):
            for with_expect in (False, True):
                results[with_expect].append(run(a.beacond, events, Path(tmp) if with_expect else None))
    n = len(events)
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(f'\n## scan --expect: {n} reports, {expected} expected beacons in {a.shops} configs, {a.rounds} interleaved rounds\n')
    print('| scan | CPU at start (median) | CPU for the stream (median) | reports per CPU second | peak RSS (median) | verdicts |')
    print('|---|---|---|---|---|---|')
    rates = {}
    for with_expect, label in ((False, 'scan --json --all'), (True, f'scan --expect ({a.shops} files)')):
        rs = results[with_expect]
        cpu = med([r[1] for r in rs])
        rates[with_expect] = n / cpu if cpu > 0 else float('inf')
        s = rs[-1][2]
        verdicts = (f'{s.get("heard")} heard, {s.get("mismatched")} mismatched, {s.get("missing")} missing, {s.get("unexpected")} other'
                    if with_expect else f'{s.get("entries")} entries')
        print(f'| {label} | {med([r[0] for r in rs]):.2f} s | {cpu:.2f} s | {rates[with_expect]:,.0f} | {med([r[3] for r in rs]) / 1024:.1f} MiB | {verdicts} |')
    print(f'\nWith --expect: {rates[True] / rates[False] * 100:.0f} % of the plain scan\'s throughput.')
    return 0


if __name__ == '__main__':
    sys.exit(main())
