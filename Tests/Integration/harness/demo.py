"""`make demo`: beacond advertising on a virtual controller, watched by a second virtual radio.

Starts Google Bumble's virtual controller behind a unix socket, runs the real `beacond run` against it for a few
seconds, and prints what a second radio on the same virtual air hears, decoded by the independent beacontools
package. Then stops beacond with SIGTERM and shows that the controller stopped advertising.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from beacontools import parse_packet

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.lab import Lab, wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]  # Tests/Integration/harness/demo.py


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--beacond', default=str(ROOT / '.build' / 'debug' / 'beacond'))
    ap.add_argument('--config', help='default: a copy of the shipped config/beacond.conf given a fresh UUID with '
                    'gen-uuid --set, as a user provisions it')
    ap.add_argument('--seconds', type=float, default=3.0)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.config is None:
            args.config = os.path.join(tmp, 'beacond.conf')
            shutil.copyfile(ROOT / 'config' / 'beacond.conf', args.config)
            print(f'$ beacond gen-uuid --set {args.config}')
            uuid = subprocess.run([args.beacond, 'gen-uuid', '--set', args.config], check=True, capture_output=True, text=True)
            print(uuid.stdout, end='')
        sock = os.path.join(tmp, 'hci.sock')
        with Lab(f'unix-server:{sock}') as lab:
            print(f'virtual controller (Bumble) listening on unix:{sock}; a second virtual radio is scanning')
            print(f'$ beacond run --config {args.config} --device unix:{sock}')
            # The static address the beacon advertises from is kept where systemd's StateDirectory= would put it.
            env = {**os.environ, 'STATE_DIRECTORY': os.environ.get('STATE_DIRECTORY', tmp)}
            proc = subprocess.Popen([args.beacond, 'run', '--config', args.config, '--device', f'unix:{sock}'], env=env)
            try:
                family, state = wait_for(lab.advertising, 10, what='beacond to start advertising')
                print(f'controller: advertising enabled ({family} commands), data {state["data"].hex()}')
                time.sleep(args.seconds)
                frames = list(lab.received)
                for address, data in sorted({(r.address, r.data) for r in frames}):
                    b = parse_packet(data)
                    what = (f'iBeacon uuid={str(b.uuid).upper()} major={b.major} minor={b.minor} '
                            f'measured_power={b.tx_power} dBm') if b is not None else f'not an iBeacon: {data.hex()}'
                    count = sum(1 for r in frames if (r.address, r.data) == (address, data))
                    print(f'second radio heard {count} advertisements from {address} in {args.seconds:g} s '
                          f'(decoded by beacontools): {what}')
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
