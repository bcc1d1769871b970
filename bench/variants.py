"""Builds of beacond side by side, in one run: exec → advertising, peak RSS and size of each, against the raw H4
client in C (the floor), each start interleaved with the others' so a busy moment of this shared machine falls on
all of them alike.

    python bench/variants.py [--runs 20] LABEL=BINARY [LABEL=BINARY ...]

Each program advertises the same iBeacon on its own Bumble virtual controller over TCP; "exec → advertising" is read
from the controller's command log (the advertising enable), as in bench/run.py, whose measurement this reuses.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'bench'))
sys.path.insert(0, str(ROOT / 'Tests' / 'Integration'))
from harness.lab import Lab  # noqa: E402
from run import config, free_port, ibeacon, start_times  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=20)
    ap.add_argument('variants', nargs='+', help='LABEL=BINARY')
    args = ap.parse_args()
    variants = [tuple(v.split('=', 1)) for v in args.variants]
    tmp = tempfile.mkdtemp(prefix='beacond-variants-')
    # A state directory of its own, as bench/run.py gives (and the unit's StateDirectory=): not /var/lib/beacond.
    os.environ['STATE_DIRECTORY'] = os.path.join(tmp, 'state')
    raw = os.path.join(tmp, 'raw_h4_client')
    subprocess.run(['cc', '-O2', '-o', raw, str(ROOT / 'bench' / 'raw_h4_client.c')], check=True)
    conf = os.path.join(tmp, 'beacond.conf')
    Path(conf).write_text(config())
    data_hex = ibeacon().hex()
    results: dict[str, tuple[list[float], list[int]]] = {label: ([], []) for label, _ in variants}
    results['floor'] = ([], [])
    for _ in range(args.runs):
        for label, binary in variants + [('floor', raw)]:
            port = free_port()
            if label == 'floor':
                argv = [raw, '127.0.0.1', str(port), data_hex]
            else:
                argv = [binary, 'run', '-c', conf, '-d', f'tcp:127.0.0.1:{port}']
            with Lab(f'tcp-server:127.0.0.1:{port}', scan=False) as lab:
                adv, _, hwm, _, _ = start_times(label, lambda: argv, lab, 1)
            results[label][0].extend(adv)
            results[label][1].extend(hwm)
    floor = statistics.median(results['floor'][0])
    print(f'# {args.runs} interleaved starts each, {os.cpu_count()} CPUs\n')
    print('| build | exec → advertising, median | min | max | × floor | peak RSS, median | size |')
    print('|---|---|---|---|---|---|---|')
    for label, binary in variants + [('floor', raw)]:
        adv, hwm = results[label]
        med = statistics.median(adv)
        print(f'| {label} | {med:.1f} ms | {min(adv):.1f} ms | {max(adv):.1f} ms | {med / floor:.2f} | '
              f'{statistics.median(hwm) / 1024:.2f} MiB | {os.path.getsize(binary) / 1e6:.2f} MB |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
