"""The EID resolver's table at its largest: peak RSS of `beacond scan --eid-keys` with 1,000 keys and --eid-window 1000
(2,001,000 EIDs), for each binary given, side by side in one run.

    python bench/eid_window_memory.py BINARY [BINARY…] [--keys 1000] [--window 1000]

The device does not exist, so each process reads the keyring, computes the table for now (before it would scan),
and exits 69; its peak RSS and CPU time come from wait4. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parse_scaling import keyring_run  # noqa: E402


def run(beacond: str, keyring: str, window: int) -> tuple[float, float]:
    usage = keyring_run(beacond, keyring, '--eid-window', str(window), codes=(69,))
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('binaries', nargs='+')
    ap.add_argument('--keys', type=int, default=1000)
    ap.add_argument('--window', type=int, default=1000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        keyring = os.path.join(tmp, 'keys.toml')
        with open(keyring, 'w') as f:
            for i in range(a.keys):
                f.write(f'[[beacon]]\nname = "beacon {i}"\nidentity_key = "{os.urandom(16).hex()}"\nrotation_exponent = 10\n\n')
        print(f'| binary | peak RSS, {a.keys} keys × {2 * a.window + 1} periods | CPU s |')
        print('|---|---|---|')
        for b in a.binaries:
            rss, cpu = run(b, keyring, a.window)
            print(f'| {b} | {rss:.0f} MiB | {cpu:.2f} |')


if __name__ == '__main__':
    main()
