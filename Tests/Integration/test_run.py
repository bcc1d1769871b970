"""`beacond run` against Google Bumble's virtual controller, judged from the controller's side and a second radio."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from beacontools import parse_packet
from bumble import hci

from conftest import APPLE_UUID, config_text, free_port, ibeacon_bytes, kept_address
from harness.lab import Lab, wait_for

EXT_ENABLE = hci.HCI_LE_SET_EXTENDED_ADVERTISING_ENABLE_COMMAND
EXT_PARAMS = hci.HCI_LE_SET_EXTENDED_ADVERTISING_PARAMETERS_COMMAND
EXT_DATA = hci.HCI_LE_SET_EXTENDED_ADVERTISING_DATA_COMMAND
LEG_ENABLE = hci.HCI_LE_SET_ADVERTISING_ENABLE_COMMAND
LEG_PARAMS = hci.HCI_LE_SET_ADVERTISING_PARAMETERS_COMMAND
LEG_DATA = hci.HCI_LE_SET_ADVERTISING_DATA_COMMAND


def write_config(tmp_path: Path, **kw) -> Path:
    p = tmp_path / 'beacond.conf'
    p.write_text(config_text(**kw))
    return p


def on_air(lab: Lab, expected: bytes, timeout: float = 10.0):
    """Waits until the controller advertises exactly `expected`; returns (family, state)."""
    return wait_for(lambda: (a := lab.advertising()) and a[1]['data'] == expected and a, timeout,
                    what=f'controller advertising {expected.hex()} (now {lab.advertising()})')


def heard(lab: Lab, expected: bytes, timeout: float = 5.0) -> bytes:
    """Waits until the second radio received `expected`; decodes it with beacontools."""
    return wait_for(lambda: next((d for d in lab.received_data() if d == expected), None), timeout,
                    what=f'the scanner to receive {expected.hex()}')


def test_extended_controller_over_tcp_puts_the_exact_ibeacon_on_air(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    conf = write_config(tmp_path, major=513, minor=1027, measured_power=-63)
    b = processes('run', '-c', str(conf), '-d', device)
    expected = ibeacon_bytes(major=513, minor=1027, power=-63)
    family, st = on_air(lab, expected)
    assert family == 'extended'
    assert st['properties'] == 0x0010  # legacy PDU, non-connectable: ADV_NONCONN_IND
    assert st['interval_min'] == 160  # 100 ms in 0.625 ms units
    data = heard(lab, expected)
    beacon = parse_packet(data)
    assert (str(beacon.uuid).upper(), beacon.major, beacon.minor, beacon.tx_power) == (APPLE_UUID, 513, 1027, -63)
    assert b.proc.poll() is None


def test_legacy_only_controller_over_unix_socket(tmp_path, processes, state_directory):
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', extended=False) as lab:
        conf = write_config(tmp_path, minor=2)
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        family, st = on_air(lab, ibeacon_bytes(minor=2))
        assert family == 'legacy'
        assert st['type'] == 3 and st['interval_min'] == 160 and st['interval_max'] == 160
        # From the random static address beacond made and keeps (the default address policy).
        static = kept_address(state_directory)
        assert st['own_address_type'] == 1 and st['random_address'] == static and st['channel_map'] == 7
        assert int(static[:2], 16) >> 6 == 0b11
        assert not any(s['enabled'] for s in lab.state()['sets'].values())
        heard(lab, ibeacon_bytes(minor=2))
        assert {r.address for r in lab.received if r.data == ibeacon_bytes(minor=2)} == {static}


@pytest.mark.parametrize('extended', [True, False], ids=['extended', 'legacy'])
def test_connectable_uses_adv_ind(tmp_path, processes, extended):
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', extended=extended) as lab:
        processes('run', '-c', str(write_config(tmp_path, connectable=True, interval_ms=250)), '-d', f'tcp:127.0.0.1:{port}')
        family, st = on_air(lab, ibeacon_bytes())
        if extended:
            assert st['properties'] == 0x0013 and st['interval_min'] == 400
        else:
            assert st['type'] == 0 and st['interval_min'] == 400


def test_command_disallowed_on_the_first_family_switches_to_the_other(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    # The controller refuses the extended family as a controller does when legacy commands were used before: on the
    # first extended command beacond sends after the Reset (the parameters; nothing is advertising, so no disable).
    lab.add_fault(EXT_PARAMS, hci.HCI_COMMAND_DISALLOWED_ERROR, times=1)
    b = processes('run', '-c', str(write_config(tmp_path)), '-d', device)
    family, st = on_air(lab, ibeacon_bytes())
    assert family == 'legacy' and st['type'] == 3
    assert not lab.state()['sets']  # no extended set was created
    assert 'Command Disallowed' in b.log() and 'switching to legacy commands' in b.log()


def test_invalid_parameters_are_explained_and_retried(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    lab.add_fault(EXT_PARAMS, hci.HCI_INVALID_HCI_COMMAND_PARAMETERS_ERROR, times=2)
    b = processes('run', '-c', str(write_config(tmp_path)), '-d', device)
    on_air(lab, ibeacon_bytes())
    assert lab.opcodes().count(EXT_PARAMS) == 3  # refused twice, then accepted
    log = b.log()
    assert 'refused the advertising parameters (interval_ms 100 ms, ADV_NONCONN_IND)' in log
    assert 'LE Set Extended Advertising Parameters (0x2036) → Invalid HCI Command Parameters (0x12)' in log
    assert 'retrying in' in log and b.proc.poll() is None


def test_reload_with_new_measured_power_updates_data_without_disabling(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    conf = write_config(tmp_path, minor=1)
    b = processes('run', '-c', str(conf), '-d', device)
    on_air(lab, ibeacon_bytes(minor=1))
    before = len(lab.opcodes())
    conf.write_text(config_text(minor=1, measured_power=-65))
    b.signal(signal.SIGHUP)
    on_air(lab, ibeacon_bytes(minor=1, power=-65))
    heard(lab, ibeacon_bytes(minor=1, power=-65))
    assert lab.opcodes()[before:] == [EXT_DATA]  # data only: no disable, no new parameters


def test_reload_with_new_minor_is_a_new_identity_from_its_own_address(tmp_path, processes, tcp_lab):
    """The kept address follows the beacon's identity: another minor is another beacon to a gateway, so it gets its
    own address (a gateway keying on the MAC never sees two identities from one address)."""
    lab, device = tcp_lab
    conf = write_config(tmp_path, minor=1)
    b = processes('run', '-c', str(conf), '-d', device)
    on_air(lab, ibeacon_bytes(minor=1))
    first = lab.advertising()[1]['random_address']
    conf.write_text(config_text(minor=2))
    b.signal(signal.SIGHUP)
    on_air(lab, ibeacon_bytes(minor=2))
    assert lab.advertising()[1]['random_address'] != first
    # Back to minor 1: its address comes back.
    conf.write_text(config_text(minor=1))
    b.signal(signal.SIGHUP)
    on_air(lab, ibeacon_bytes(minor=1))
    assert lab.advertising()[1]['random_address'] == first


def test_reload_with_new_interval_reconfigures(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    conf = write_config(tmp_path, interval_ms=100)
    b = processes('run', '-c', str(conf), '-d', device)
    on_air(lab, ibeacon_bytes())
    conf.write_text(config_text(interval_ms=500))
    b.signal(signal.SIGHUP)
    wait_for(lambda: (a := lab.advertising()) and a[1]['interval_min'] == 800, what='interval 500 ms')


def test_reload_with_broken_config_keeps_the_beacon_on_air(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    conf = write_config(tmp_path, minor=1)
    b = processes('run', '-c', str(conf), '-d', device)
    on_air(lab, ibeacon_bytes(minor=1))
    before = len(lab.opcodes())
    conf.write_text(config_text(minor=1).replace('minor = 1', 'minor = 99999'))
    b.signal(signal.SIGHUP)
    wait_for(lambda: 'Keeping the previous configuration' in b.log(), what='the reload to be refused')
    assert f'{conf}:4:9: error: ' in b.log()
    time.sleep(0.3)
    assert lab.opcodes()[before:] == []  # nothing sent to the controller
    family, st = lab.advertising()
    assert st['data'] == ibeacon_bytes(minor=1)
    assert b.proc.poll() is None


def test_sigterm_disables_advertising_before_exit(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    b = processes('run', '-c', str(write_config(tmp_path)), '-d', device)
    on_air(lab, ibeacon_bytes())
    b.signal(signal.SIGTERM)
    assert b.wait(10) == 0
    assert lab.advertising() is None
    commands = lab.state()['commands']
    disable_at = next(t for t, op, params in reversed(commands) if op == EXT_ENABLE and params[0] == 0)
    assert disable_at < b.exited_at
    assert commands[-1][1] == hci.HCI_LE_CLEAR_ADVERTISING_SETS_COMMAND  # every set removed, in one command


def test_sigint_also_stops_cleanly_on_a_legacy_controller(tmp_path, processes):
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', extended=False) as lab:
        b = processes('run', '-c', str(write_config(tmp_path)), '-d', f'tcp:127.0.0.1:{port}')
        on_air(lab, ibeacon_bytes())
        b.signal(signal.SIGINT)
        assert b.wait(10) == 0
        assert lab.advertising() is None


def test_pre_5_0_controller_raises_a_too_short_interval_with_a_warning(tmp_path, processes):
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', extended=False, hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_2) as lab:
        b = processes('run', '-c', str(write_config(tmp_path, interval_ms=50)), '-d', f'tcp:127.0.0.1:{port}')
        family, st = on_air(lab, ibeacon_bytes())
        assert st['interval_min'] == 160  # raised from 80 (50 ms) to the 100 ms floor
        assert 'raising the interval from 50 ms to 100 ms' in b.log()


def test_tx_power_is_passed_to_an_extended_controller(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    processes('run', '-c', str(write_config(tmp_path, tx_power=-4)), '-d', device)
    family, st = on_air(lab, ibeacon_bytes())
    assert st['tx_power'] == -4


def test_config_error_at_start_exits_78_without_touching_the_controller(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    conf = tmp_path / 'bad.conf'
    conf.write_text('[beacon]\nuuid = "nope"\nmajor = 1\nminor = 1\n')
    b = processes('run', '-c', str(conf), '-d', device)
    assert b.wait(10) == 78
    assert f"{conf}:2:9: error: 'uuid' in [beacon] is not a valid UUID" in b.log()
    assert lab.opcodes() == []


def test_controller_absent_at_start_then_present(tmp_path, processes, notify):
    port = free_port()
    b = processes('run', '-c', str(write_config(tmp_path)), '-d', f'tcp:127.0.0.1:{port}', env={'NOTIFY_SOCKET': notify.path})
    # Boot is not blocked: READY=1 once the daemon settled into retrying, with a STATUS that says so.
    notify.wait_for('READY=1')
    ready = next(m for _, m in notify.messages if m.startswith('READY=1'))
    assert 'retrying in' in ready
    with Lab(f'tcp-server:127.0.0.1:{port}') as lab:
        on_air(lab, ibeacon_bytes(), timeout=40)
        notify.wait_for(f'STATUS=Advertising {APPLE_UUID} major 1 minor 1 every 100 ms', timeout=5)
    assert b.proc.poll() is None


def test_serial_line_through_a_pty(tmp_path, processes):
    """serial:PATH: raw mode, 8N1, flow control requested; Bumble's pty transport stands in for a UART."""
    link = tmp_path / 'ttyBEACON'
    with Lab(f'pty:{link}', extended=False) as lab:
        b = processes('run', '-c', str(write_config(tmp_path, minor=9)), '-d', f'serial:{link}:921600')
        family, st = on_air(lab, ibeacon_bytes(minor=9))
        assert family == 'legacy' and st['type'] == 3
        heard(lab, ibeacon_bytes(minor=9))
        b.signal(signal.SIGTERM)
        assert b.wait(10) == 0
        assert lab.advertising() is None
