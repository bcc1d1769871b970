"""`scan --expect` took a recorded resolvable address and frame as HEARD for ever (issue #53): a beacon with
address = "resolvable" takes a new address every address_rotation_s, so one still heard past that and a slack is a
recording replayed. A verifier with `--metrics FILE` keeps when it first heard each such address in FILE.addresses
(mode 0600), so that the next check, a quarter of an hour later, flags the same address replayed."""
from __future__ import annotations

import stat
import time

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from test_eid import write_key
from test_expect import expect_injected
from test_resolvable import IB_BYTES, IRK, RESOLVABLE, ibeacon_report


def address_of(irk: str, prand: bytes) -> str:
    """A resolvable private address made with the IRK (Core Vol 3 Part H §2.2.2: hash = ah(IRK, prand))."""
    e = Cipher(algorithms.AES(bytes.fromhex(irk)), modes.ECB()).encryptor()
    h = (e.update(bytes(13) + prand) + e.finalize())[-3:]
    return ':'.join(f'{b:02X}' for b in prand + h)


def test_a_recorded_resolvable_address_heard_past_its_rotation_is_a_recording(tmp_path):
    write_key(tmp_path / 'keys' / 'shop.irk', IRK + '\n')
    conf = tmp_path / 'shop7.conf'
    conf.write_text(RESOLVABLE + '[advertising]\naddress_rotation_s = 900\n')
    address = address_of(IRK, bytes([0x52, 0x34, 0x56]))
    prom = tmp_path / 'verify.prom'
    seen = tmp_path / 'verify.prom.addresses'
    # The first check hears the beacon's address, and keeps when.
    code, lines, err = expect_injected(tmp_path, [ibeacon_report(IB_BYTES, address)], conf, '--metrics', str(prom))
    assert code == 0, err
    assert [l['status'] for l in lines if l['kind'] == 'expect'] == ['heard']
    [line] = seen.read_text().splitlines()
    heard, at = line.split()
    assert heard == address and abs(int(at) / 1e6 - time.time()) < 60
    assert stat.S_IMODE(seen.stat().st_mode) == 0o600
    # 961 s later the same address and frame again: a recording (the beacon would have taken a new address).
    seen.write_text(f'{address} {int(at) - 961_000_000}\n')
    code, lines, err = expect_injected(tmp_path, [ibeacon_report(IB_BYTES, address)], conf, '--metrics', str(prom))
    assert code == 3, err
    [entry] = [l for l in lines if l['kind'] == 'expect']
    assert entry['status'] == 'mismatch', entry
    assert (f'from {address}, a resolvable address heard for more than 960 s: the beacon takes a new one every 900 s '
            '(address_rotation_s), so this is a recording replayed') in entry['mismatches'][0]['differences'][0], entry
    # A new address of the key, as the beacon makes one every rotation, is heard.
    code, lines, err = expect_injected(tmp_path, [ibeacon_report(IB_BYTES, address_of(IRK, bytes([0x61, 0x23, 0x45])))], conf,
                                       '--metrics', str(prom))
    assert code == 0, err
