"""How the TOML reader scales: the CPU time of reading a keyring of N lines and of 4N lines, side by side in one run.

    python bench/parse_scaling.py [--beacond build/beacond] [--lines 40000] [--rounds 3]

`beacond scan --eid-keys FILE` reads and checks the whole keyring before it opens its device; the device here is a
socket that does not exist, so the process's CPU time (from wait4) is the reading alone. Three shapes of file, each
at N and 4N lines: a fleet's keyring ([[beacon]] tables of four lines), one table with every key in it (each an
unknown key: the duplicate-key check), and a table per line (the duplicate-table check). A reader that is linear
takes about 4 times as long at 4N; a quadratic one about 16 times. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile


def fleet(lines: int) -> str:
    return ''.join(f'[[beacon]]\nname = "b{i}"\nidentity_key = "{i:032x}"\nrotation_exponent = 10\n'
                   for i in range(lines // 4))


def one_table(lines: int) -> str:
    return '[[beacon]]\nname = "a"\n' + ''.join(f'k{i} = 1\n' for i in range(lines))


def many_tables(lines: int) -> str:
    return ''.join(f'[t{i}]\n' for i in range(lines))


def keyring_run(beacond: str, path: str, *extra: str, codes=(69, 78)):
    """`beacond scan --eid-keys PATH EXTRA…` on a device that does not exist: the process's resource usage (wait4).
    Exit 69: the device was not there, so the whole keyring was read (and the resolver's table made) first; 78: the
    file's mistakes, also after reading it all."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: thousands of diagnostics would fill a pipe
        p = subprocess.Popen([beacond, 'scan', '--eid-keys', path, *extra, '--device', 'unix:/nonexistent/beacond-bench',
                              '--duration', '1'], stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        if os.waitstatus_to_exitcode(status) not in codes:
            err.seek(0)
            raise SystemExit(f'{beacond} exited {os.waitstatus_to_exitcode(status)}: {err.read(300).decode(errors="replace")}')
    return usage


def cpu(beacond: str, path: str) -> float:
    usage = keyring_run(beacond, path)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--beacond', default='build/beacond')
    ap.add_argument('--lines', type=int, default=40000)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (('a fleet keyring', fleet), ('one table, every key in it', one_table), ('one table per line', many_tables)):
            paths = {}
            for n in (a.lines, 4 * a.lines):
                paths[n] = os.path.join(tmp, f'{make.__name__}-{n}.toml')
                with open(paths[n], 'w') as f:
                    f.write(make(n))
            times: dict[int, list[float]] = {a.lines: [], 4 * a.lines: []}
            for _ in range(a.rounds):  # interleaved: the machine's noise falls on both sizes alike
                for n in times:
                    times[n].append(cpu(a.beacond, paths[n]))
            small, large = statistics.median(times[a.lines]), statistics.median(times[4 * a.lines])
            rows.append((name, small, large, large / small if small > 0 else float('inf')))
    print(f'| file | CPU s at {a.lines} lines | CPU s at {4 * a.lines} lines | ratio (linear ≈ 4, quadratic ≈ 16) |')
    print('|---|---|---|---|')
    for name, small, large, ratio in rows:
        print(f'| {name} | {small:.3f} | {large:.3f} | {ratio:.1f} |')


if __name__ == '__main__':
    main()
