"""beacond on Google's RootCanal, the second lab (issue #54): its legacy-only controller (a Pi-like part, no LE
extended advertising) and its default one (Core 5.3, advertising sets), each beacon checked by a second RootCanal
client that scans (harness/rootcanal.py). RootCanal starts a legacy advertiser's first event one interval after the
enable and answers each command some 45 ms late, so beacons that time-slice one legacy advertiser must still each
get on the air. Time bounds stay loose: RootCanal emulates no baseband scheduler."""
from __future__ import annotations

import statistics
import time

from conftest import APPLE_UUID, ROOT, config_text, run_cli
from harness.rootcanal import RootCanal, opcode_name

IBEACON_PREFIX = bytes.fromhex('0201061aff4c000215')
HEARD_WITHIN_S = 10.0


def three_beacons(tmp_path):
    """config/three-beacons.conf (the default three-beacon config) with a UUID filled in."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text((ROOT / 'config' / 'three-beacons.conf').read_text()
                    .replace('[[beacon]]\n', f'[[beacon]]\nuuid = "{APPLE_UUID}"\n'))
    return conf


def one_beacon(tmp_path):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(config_text(major=7, minor=1))
    return conf


def frames_of(path):
    """minor → its frame, as `beacond payload` prints it."""
    lines = run_cli('payload', '-c', str(path), check=True).stdout.split()
    return {int.from_bytes(bytes.fromhex(h)[27:29], 'big'): bytes.fromhex(h) for h in lines}


def heard_by_minor(rc: RootCanal, frames, since: float) -> dict[int, dict[str, int]]:
    """minor → {address: reports} of the configured frames the scanner heard since `since`."""
    out: dict[int, dict[str, int]] = {}
    wanted = set(frames.values())
    for r in rc.heard(since, match=lambda r: r.data in wanted):
        minor = int.from_bytes(r.data[27:29], 'big')
        address = r.address.split('/')[0]
        out.setdefault(minor, {}).setdefault(address, 0)
        out[minor][address] += 1
    return out


def what_happened(rc: RootCanal, beacond, since: float) -> str:
    """What a failure message carries: what was heard, what RootCanal refused, its latency, and the logs' tails."""
    lat = [s for _, s in rc.latencies()]
    latency = (f'{len(lat)} answered, median {statistics.median(lat) * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms'
               if lat else 'no answers')
    by_opcode: dict[int, list[float]] = {}
    for op, seconds in rc.latencies():
        by_opcode.setdefault(op, []).append(seconds)
    per_command = '; '.join(f'{opcode_name(op)} x{len(v)} median {statistics.median(v) * 1000:.1f} ms'
                            for op, v in by_opcode.items())
    other: dict[str, list[str]] = {}
    for r in rc.heard(since, match=lambda r: r.data[:9] == IBEACON_PREFIX):
        other.setdefault(f'{r.address} minor {int.from_bytes(r.data[27:29], "big")}', []).append(f'{r.at - since:.2f}')
    refused = [f'{opcode_name(op)}: 0x{status:02x}' for op, status in rc.refused()]
    return (f'\nRootCanal: startup {rc.startup_s * 1000:.0f} ms, scanner ready in {rc.scanner_ready_s:.2f} s, '
            f'alive {rc.alive()}, beacond connections {rc.connections}, controller public address {rc.public_address}'
            f'\niBeacon reports heard (s after beacond started), by address: {other}'
            f'\ncommands {len(rc.commands)}; answers: {latency}\nper command: {per_command}'
            f'\nrefused by RootCanal: {refused or "none"}'
            f'\nproxy errors: {rc.proxy_errors or "none"}'
            f'\n--- beacond log (tail) ---\n{beacond.log()[-3000:]}'
            f'\n--- RootCanal log (tail) ---\n{rc.log()[-2000:]}')


def each_heard_from_its_own_address(tmp_path, processes, conf, legacy: bool) -> None:
    frames = frames_of(conf)
    with RootCanal(legacy=legacy, workdir=tmp_path / 'rootcanal') as rc:
        print(f'RootCanal startup {rc.startup_s * 1000:.1f} ms; scanner powered on and scanning in '
              f'{rc.scanner_ready_s:.2f} s')
        start = time.monotonic()
        b = processes('run', '-c', str(conf), '-d', rc.device)
        deadline = start + HEARD_WITHIN_S
        while time.monotonic() < deadline and set(heard_by_minor(rc, frames, start)) != set(frames):
            time.sleep(0.05)
        heard = heard_by_minor(rc, frames, start)
        report = what_happened(rc, b, start)
        print(report)
        b.stop()
    missing = sorted(set(frames) - set(heard))
    assert not missing, (f'minor(s) {missing} of {sorted(frames)} never heard within {HEARD_WITHIN_S:.0f} s on RootCanal\'s '
                         f'{"legacy-only" if legacy else "default (extended)"} controller; heard: {heard}{report}')
    # Its own address: one each, none shared with another beacon, not the controller's public one.
    owners: dict[str, set[int]] = {}
    for minor, addresses in heard.items():
        for a in addresses:
            owners.setdefault(a, set()).add(minor)
    shared = {a: sorted(m) for a, m in owners.items() if len(m) > 1}
    assert not shared, f'beacons heard from one address: {shared}{report}'
    assert rc.public_address not in owners, f'a beacon went out from the public address {rc.public_address}{report}'


def test_three_beacons_each_heard_on_the_legacy_only_controller(tmp_path, processes):
    """The Pi's case, the issue's headline: three iBeacons time-sliced on one legacy advertiser."""
    each_heard_from_its_own_address(tmp_path, processes, three_beacons(tmp_path), legacy=True)


def test_one_beacon_heard_on_the_legacy_only_controller(tmp_path, processes):
    each_heard_from_its_own_address(tmp_path, processes, one_beacon(tmp_path), legacy=True)


def test_three_beacons_each_heard_on_the_default_controller(tmp_path, processes):
    """The extended path: one advertising set per beacon."""
    each_heard_from_its_own_address(tmp_path, processes, three_beacons(tmp_path), legacy=False)
