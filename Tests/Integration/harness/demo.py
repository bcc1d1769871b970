"""`make demo`: three iBeacons on a model of a Raspberry Pi's radio, heard by a second virtual radio.

Provisions config/three-beacons.conf as a shop owner would (`beacond gen-uuid --set` gives the three tables one UUID),
shows what `beacond check-config` says each beacon gets, and runs the real `beacond run` against Google Bumble's
virtual controller playing a CYW43455 (the radio of the Raspberry Pi 3B+, 3A+, 4, 5 and 500: Bluetooth 5.0, no
advertising sets; the Pi 400's BCM43456 is a personality of its own) for a few seconds. It prints what a second radio on the same virtual air hears, decoded by the independent beacontools
package: each beacon from its own address, in turn (time slices of one advertiser), and how often. Then it stops
beacond with SIGTERM and shows that the controller stopped advertising.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from beacontools import parse_packet

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.lab import Lab, wait_for  # noqa: E402
from harness.personalities import CYW43455  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]  # Tests/Integration/harness/demo.py


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--beacond', default=str(ROOT / '.build' / 'debug' / 'beacond'))
    ap.add_argument('--config', help='default: a copy of config/three-beacons.conf given a fresh UUID with gen-uuid --set')
    ap.add_argument('--seconds', type=float, default=4.0)
    args = ap.parse_args()

    def beacond(*a: str, **kw) -> subprocess.CompletedProcess:
        print(f'$ beacond {" ".join(a)}')
        r = subprocess.run([args.beacond, *a], capture_output=True, text=True, **kw)
        print(r.stdout + r.stderr, end='')
        return r

    with tempfile.TemporaryDirectory() as tmp:
        # Where systemd's StateDirectory= would be: the static addresses are kept there.
        env = {**os.environ, 'STATE_DIRECTORY': os.environ.get('STATE_DIRECTORY', tmp)}
        if args.config is None:
            args.config = os.path.join(tmp, 'beacond.conf')
            shutil.copyfile(ROOT / 'config' / 'three-beacons.conf', args.config)
            if beacond('gen-uuid', '--set', args.config).returncode != 0:
                return 1
        if beacond('check-config', '--config', args.config, env=env).returncode != 0:
            return 1
        sock = os.path.join(tmp, 'hci.sock')
        with Lab(f'unix-server:{sock}', personality=CYW43455) as lab:
            print(f'\nvirtual controller: Bumble playing a {CYW43455.devices} on unix:{sock}; a second radio scans')
            print(f'$ beacond run --config {args.config} --device unix:{sock}')
            proc = subprocess.Popen([args.beacond, 'run', '--config', args.config, '--device', f'unix:{sock}'], env=env)
            try:
                family, state = wait_for(lab.advertising, 10, what='beacond to start advertising')
                print(f"controller: {family} advertising enabled, {state['interval_min']} × 0.625 ms interval")
                lab.clear_received()
                time.sleep(args.seconds)
                frames = list(lab.received)
                heard = {}
                for r in frames:
                    heard.setdefault((r.address, r.data), []).append(r.at)
                for (address, data), times in sorted(heard.items(), key=lambda kv: kv[0][1]):
                    b = parse_packet(data)
                    what = (f'iBeacon uuid={str(b.uuid).upper()} major={b.major} minor={b.minor} '
                            f'measured_power={b.tx_power} dBm') if b is not None else f'not an iBeacon: {data.hex()}'
                    gaps = [b - a for a, b in zip(times, times[1:])]
                    every = f', about every {1000 * statistics.median(gaps):.0f} ms' if gaps else ''
                    print(f'second radio heard {what} from {address}: {len(times)} times in {args.seconds:g} s{every}')
                if not frames:
                    print('the second radio heard nothing', file=sys.stderr)
                    return 1
            finally:
                proc.send_signal(signal.SIGTERM)
                rc = proc.wait(timeout=10)
            print(f'beacond exited with {rc}; controller advertising now: {"on" if lab.advertising() else "off"}')
            return 0 if rc == 0 and lab.advertising() is None else 1


if __name__ == '__main__':
    sys.exit(main())
