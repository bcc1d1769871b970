"""`scan --eid-keys` under a flood of fresh resolvable addresses, two binaries side by side (issue #53).

    python bench/fresh_addresses.py OLD NEW [--keys 5000] [--reports 3000] [--rounds 2]

One seeded stream of advertising reports, each from an address never heard before: once all static random addresses
(no key is tried), once all resolvable private addresses no key made (every key tried, where nothing caps it). Each
binary scans both streams behind Bumble's controller with `--json --eid-keys` naming KEYS random keys, the rounds
interleaved (OLD static, OLD fresh, NEW static, NEW fresh, again), and the beacond process's CPU time for the stream
is read from /proc. A binary that reports them gives its summary's key trials made and skipped. Prints a markdown
table.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
sys.path.insert(0, str(ROOT / 'bench'))
from scan_throughput import ad_for, scan_cpu  # noqa: E402


def stream(n: int, resolvable: bool) -> list[bytes]:
    """N reports, each from a fresh random address: static (top bits 11) or resolvable (01), the same frames."""
    rng = random.Random(2053)
    events = []
    for _ in range(n):
        ad = ad_for(rng)
        address = bytearray(rng.randbytes(6))
        address[5] = (address[5] & 0x3F) | (0x40 if resolvable else 0xC0)
        report = bytes([1, 3, 1]) + bytes(address) + bytes([len(ad)]) + ad + bytes([(-rng.randrange(40, 95)) & 0xFF])
        params = bytes([0x02]) + report
        events.append(bytes([4, 0x3E, len(params)]) + params)
    return events


def summary(out: str) -> dict:
    for line in reversed(out.splitlines()):
        if '"summary"' in line:
            return json.loads(line)
    return {}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('old')
    ap.add_argument('new')
    ap.add_argument('--keys', type=int, default=5000)
    ap.add_argument('--reports', type=int, default=3000)
    ap.add_argument('--rounds', type=int, default=2)
    a = ap.parse_args()
    rng = random.Random(99)
    streams = {False: stream(a.reports, False), True: stream(a.reports, True)}
    results: dict[tuple[str, bool], list[tuple[float, dict]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        keyring = os.path.join(tmp, 'keys.toml')
        with open(keyring, 'w') as f:
            for i in range(a.keys):
                f.write(f'[[beacon]]\nname = "beacon {i}"\nidentity_key = "{rng.randbytes(16).hex()}"\nrotation_exponent = 10\n\n')
        for _ in range(a.rounds):
            for label, binary in (('before', a.old), ('after', a.new)):
                for fresh in (False, True):
                    _, used, out, _, _ = scan_cpu(binary, streams[fresh], ['--all', '--eid-keys', keyring])
                    results.setdefault((label, fresh), []).append((used, summary(out)))
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(f'\n## {a.reports} reports from fresh addresses, --eid-keys with {a.keys} keys, {a.rounds} interleaved rounds\n')
    print('| binary | static addresses: CPU (median) | resolvable addresses: CPU (median) | per fresh resolvable address | key trials made / skipped |')
    print('|---|---|---|---|---|')
    for label in ('before', 'after'):
        static = med([r[0] for r in results[(label, False)]])
        fresh = med([r[0] for r in results[(label, True)]])
        s = results[(label, True)][-1][1]
        trials = f'{s["key_trials"]:,} / {s["key_trials_skipped"]:,}' if 'key_trials' in s else 'every one (not reported)'
        print(f'| {label} | {static:.2f} s | {fresh:.2f} s | {(fresh - static) / a.reports * 1000:.3f} ms | {trials} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
