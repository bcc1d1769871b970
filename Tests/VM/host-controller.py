#!/usr/bin/env python3
"""The arm64 guest's Bluetooth controller: Debian's arm64 kernel is built without hci_vhci (CONFIG_BT_HCIVHCI is not
set), so btvirt cannot run there. Instead the guest attaches a UART controller the way a Raspberry Pi's own radio is
attached (hci_uart, H4, `btattach`), on a virtio console whose other end is this process: Google Bumble's virtual
controller (the integration tests' radio lab), with a second Bumble radio on the same link that scans.

    python3 host-controller.py SOCKET OUTFILE

Connects to qemu's chardev socket SOCKET (retrying until qemu is up), serves until SIGTERM, then writes what the
second radio heard (distinct advertising data, hex, with counts) to OUTFILE as independent evidence. Meanwhile each
newly heard distinct advertising data goes on a line of heard-live.txt beside OUTFILE as it is heard (the fleet test
reads it while the guest runs).
"""
import collections
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'Integration'))
from harness.lab import Lab  # noqa: E402


def main():
    sock, out = sys.argv[1], sys.argv[2]
    deadline = time.monotonic() + 60
    while not os.path.exists(sock):
        if time.monotonic() > deadline:
            print(f'host-controller: no socket at {sock} after 60 s', file=sys.stderr)
            return 1
        time.sleep(0.2)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    seen, read = set(), 0
    with Lab(f'unix:{sock}') as lab, open(os.path.join(os.path.dirname(out), 'heard-live.txt'), 'w', buffering=1) as live:
        print(f'host-controller: Bumble controller attached to {sock}', flush=True)
        while not stop:
            time.sleep(0.2)
            fresh = lab.received[read:]  # only what arrived since the last look
            read += len(fresh)
            for r in fresh:
                if r.data not in seen:
                    seen.add(r.data)
                    live.write(r.data.hex() + '\n')
        heard = collections.Counter(r.data.hex() for r in list(lab.received))
    with open(out, 'w') as f:
        for data, n in heard.most_common():
            f.write(f'{n} {data}\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
