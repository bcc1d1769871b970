"""beacond on the controllers people own: every test here runs once per personality (harness/personalities.py), a
model of a real chip's version, features, supported commands, sets and quirks, each from a public trace.

Advertising (one beacon, three beacons), a reload (good and broken), a fault (the controller gone and back, a
Hardware Error) and a scan, judged from the controller's own state and from the second radio on the link, as the rest
of the Bumble suite does.
"""
from __future__ import annotations

import pytest
from bumble import hci

from conftest import APPLE_UUID, config_text, free_port, ibeacon_bytes, kept_address, kept_addresses
from harness.lab import Lab, wait_for
from harness.personalities import ALL, EXTENDED_ONLY_OPCODES
# How often beacond turns the advertiser off and on again (HCIAdvertiser.refreshPeriod).
REFRESH = 2.0
SHARED = '[advertising]\naddress = "public"\n\n'

from test_beacons import ALT, ALT_BYTES, EDDY, EDDY_BYTES, IB, IB_BYTES, check_decoded, heard_all
from test_run import heard, on_air
from test_scan import advertisers, scan


@pytest.fixture(params=ALL, ids=str)
def personality(request):
    return request.param


@pytest.fixture
def chip(personality, tmp_path):
    """A lab whose beacond controller is the personality: (lab, device, personality)."""
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', personality=personality) as lab:
        yield lab, f'tcp:127.0.0.1:{port}', personality


def start(chip, tmp_path, processes, text: str):
    """beacond run on the chip's controller with this config."""
    lab, device, _ = chip
    conf = tmp_path / 'beacond.conf'
    conf.write_text(text)
    return processes('run', '-c', str(conf), '-d', device), conf


def sent_only_what_it_knows(lab: Lab, p) -> None:
    """beacond sent none of the commands this chip does not know, nor the one a clone locks up on."""
    ops = lab.opcodes()
    if not p.extended:
        assert not EXTENDED_ONLY_OPCODES & set(ops), [hex(o) for o in sorted(EXTENDED_ONLY_OPCODES & set(ops))]
    assert hci.HCI_SET_EVENT_FILTER_COMMAND not in ops
    assert not lab.controller.locked_up


def test_one_beacon_with_the_exact_bytes_at_its_interval_from_its_address(chip, tmp_path, processes, state_directory):
    lab, device, p = chip
    b, _ = start(chip, tmp_path, processes, config_text(major=513, minor=1027, measured_power=-63))
    expected = ibeacon_bytes(major=513, minor=1027, power=-63)
    family, st = on_air(lab, expected)
    assert family == ('extended' if p.extended else 'legacy')
    address = kept_address(state_directory)
    if p.extended:
        assert st['properties'] == 0x0010 and st['interval_min'] == 160 and st['random_address'] == address
    else:
        assert st['type'] == 3 and (st['interval_min'], st['interval_max']) == (160, 160)
        assert st['own_address_type'] == 1 and st['random_address'] == address
    heard(lab, expected)
    assert {r.address for r in lab.received if r.data == expected} == {address}
    # What beacond read of the controller is the personality's.
    assert f'manufacturer 0x{p.manufacturer:04X}, using {family} advertising commands' in b.log(), b.log()
    sent_only_what_it_knows(lab, p)
    assert b.proc.poll() is None


def test_three_beacons_each_heard_from_its_own_address(chip, tmp_path, processes, state_directory):
    lab, device, p = chip
    start(chip, tmp_path, processes, IB + ALT + EDDY)
    frames = heard_all(lab, [IB_BYTES, ALT_BYTES, EDDY_BYTES], timeout=10)
    check_decoded(frames)
    kept = kept_addresses(state_directory)
    assert len(set(kept.values())) == 3
    assert {a for f in (IB_BYTES, ALT_BYTES, EDDY_BYTES) for a in frames[f]} == set(kept.values())
    assert all(len(frames[f]) == 1 for f in (IB_BYTES, ALT_BYTES, EDDY_BYTES)), frames
    # Every beacon keeps coming round (its own set, or its time slice): each heard again within 2 s.
    lab.clear_received()
    heard_all(lab, [IB_BYTES, ALT_BYTES, EDDY_BYTES], timeout=2)
    sets = [s for s in lab.state()['sets'].values() if s['enabled']]
    assert len(sets) == (3 if p.extended else 0)
    sent_only_what_it_knows(lab, p)


def test_a_reload_puts_the_new_beacon_on_and_a_broken_one_keeps_it(chip, tmp_path, processes):
    lab, device, p = chip
    b, conf = start(chip, tmp_path, processes, config_text(minor=1))
    on_air(lab, ibeacon_bytes(minor=1))
    conf.write_text(config_text(minor=2))
    b.signal(1)
    on_air(lab, ibeacon_bytes(minor=2))
    conf.write_text(config_text(minor=2).replace('major = 1', 'major = 70000'))
    b.signal(1)
    wait_for(lambda: 'Keeping the previous configuration' in b.log(), 10, what='the broken reload refused')
    assert lab.advertising()[1]['data'] == ibeacon_bytes(minor=2)
    heard(lab, ibeacon_bytes(minor=2))
    sent_only_what_it_knows(lab, p)


def test_back_on_the_air_after_the_controller_went_away_and_after_a_hardware_error(chip, tmp_path, processes):
    lab, device, p = chip
    b, _ = start(chip, tmp_path, processes, config_text(minor=5))
    on_air(lab, ibeacon_bytes(minor=5))
    enables = len(lab.enabled_at())
    lab.disconnect(reopen_after=1.0)
    wait_for(lambda: len(lab.enabled_at()) > enables, timeout=15, what='advertising enabled again after the controller came back')
    on_air(lab, ibeacon_bytes(minor=5))
    lab.hardware_error(0x42)
    on_air(lab, ibeacon_bytes(minor=5), timeout=15)
    assert 'reported Hardware Error 0x42' in b.log()
    sent_only_what_it_knows(lab, p)
    assert b.proc.poll() is None


@pytest.mark.parametrize('text, frames', [(IB, [IB_BYTES]), (SHARED + IB + ALT + EDDY, [IB_BYTES, ALT_BYTES, EDDY_BYTES])],
                         ids=['one beacon', 'three from one address'])
def test_a_controller_that_stops_advertising_without_saying_so_is_put_back(chip, tmp_path, processes, text, frames):
    """bug: a controller that stops advertising and says nothing (noble/bleno#387 on a Pi, bluez/bluez#1015) left
    every beacon off the air for good: nothing in HCI reports it. Each must be back soon after the refresh (2 s; the
    bound leaves room for a loaded machine): one beacon, and three time-sliced from one address (whose slots write
    only the data and never restart)."""
    lab, device, p = chip
    start(chip, tmp_path, processes, text)
    heard_all(lab, frames, timeout=10)
    for _ in range(2):
        lab.stop_advertising_silently()
        assert lab.advertising() is None
        lab.clear_received()
        heard_all(lab, frames, timeout=REFRESH + 4)
        assert lab.advertising() is not None
    sent_only_what_it_knows(lab, p)


def test_scan_hears_the_beacons_around_it(personality):
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False, personality=personality, advertisers=advertisers()) as lab:
        final, _ = scan(f'tcp:127.0.0.1:{port}')
        assert sorted((x['uuid'], x['major'], x['minor']) for x in final) == \
            sorted([(APPLE_UUID, 1, 1), (APPLE_UUID, 1, 2), ('74278BDA-B644-4520-8F0C-720EAF059935', 7, 65535)])
        sent_only_what_it_knows(lab, personality)


LEGACY = [p for p in ALL if not p.extended]


@pytest.mark.parametrize('personality', LEGACY, ids=str)
def test_while_another_program_scans_every_beacon_stays_on_the_air(personality, tmp_path, processes, state_directory):
    """bug: while the kernel scans on the same adapter (Home Assistant on a Pi), a legacy controller refuses LE Set
    Random Address with Command Disallowed; each time slice then left the advertiser off, and no beacon was on the air
    until the scan stopped. Every beacon must stay on the air (from the public address then), and go back to its own
    address when the scan stops."""
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', personality=personality) as lab:
        conf = tmp_path / 'beacond.conf'
        conf.write_text(IB + ALT + EDDY)
        b = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}')
        frames = [IB_BYTES, ALT_BYTES, EDDY_BYTES]
        heard_all(lab, frames, timeout=10)
        own = set(kept_addresses(state_directory).values())
        lab.kernel_scan(True)
        refused = lambda: any(op == hci.HCI_LE_SET_RANDOM_ADDRESS_COMMAND for _, op, _ in lab.state()['commands'][-40:]) \
            and 'another program scans' in b.log()
        wait_for(refused, 10, what='beacond to meet the refused address')
        lab.clear_received()
        during = heard_all(lab, frames, timeout=3)
        lab.clear_received()
        during = heard_all(lab, frames, timeout=3)
        assert all(during[f] == {'F0:F1:F2:F3:F4:F5/P'} for f in frames), during  # the lab radio's public address
        lab.kernel_scan(False)
        wait_for(lambda: 'each beacon from its own address again' in b.log(), 20, what='the own addresses taken again')
        lab.clear_received()
        after = heard_all(lab, frames, timeout=3)
        assert {a for f in frames for a in after[f]} == own, after
        assert b.proc.poll() is None
