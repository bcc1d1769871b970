"""Faults injected into a real virtual controller: beacond must notice, say so, and be back on the air by itself.

Each test asserts from the controller's side (its state and the commands it received), and times recovery from the
moment the harness made the controller usable again to the enable command that put the beacon back.
"""
from __future__ import annotations

import os
import signal
import time

import pytest
from bumble import hci

from conftest import config_text, free_port, ibeacon_bytes
from harness.lab import Lab, wait_for
from test_run import EXT_DATA, EXT_ENABLE, EXT_PARAMS, on_air, write_config

RESET = hci.HCI_RESET_COMMAND


def start(tmp_path, processes, device, notify=None, **kw):
    env = {'NOTIFY_SOCKET': notify.path} if notify else None
    return processes('run', '-c', str(write_config(tmp_path, **kw)), '-d', device, env=env)


@pytest.mark.parametrize('times', [1, 3], ids=['once', 'three-times'])
def test_error_status_on_enable_is_retried_until_it_succeeds(tmp_path, processes, tcp_lab, notify, times):
    lab, device = tcp_lab
    lab.add_fault(EXT_ENABLE, hci.HCI_CONTROLLER_BUSY_ERROR, times=times, when=b'\x01')  # enable, not the disable
    b = start(tmp_path, processes, device, notify)
    on_air(lab, ibeacon_bytes(), timeout=20)
    assert lab.opcodes().count(RESET) == times + 1  # each retry reopens and resets the controller beacond owns
    status = notify.wait_for('STATUS=Failed to enable advertising')
    assert 'LE Set Extended Advertising Enable (0x2039) → Controller Busy (0x3A), retrying in' in status
    assert b.proc.poll() is None


def test_a_refused_read_of_the_set_count_is_named_as_that_not_as_the_probe(tmp_path, processes, tcp_lab, notify):
    """Bug (review): when LE Read Number of Supported Advertising Sets was refused, STATUS blamed the probe."""
    lab, device = tcp_lab
    lab.add_fault(hci.HCI_LE_READ_NUMBER_OF_SUPPORTED_ADVERTISING_SETS_COMMAND, hci.HCI_CONTROLLER_BUSY_ERROR, times=1)
    start(tmp_path, processes, device, notify)
    status = notify.wait_for('STATUS=Failed to read the number of advertising sets on')
    assert 'Controller Busy (0x3A), retrying in' in status
    assert not any(a.startswith('STATUS=Failed to probe') for a in notify.assignments())
    on_air(lab, ibeacon_bytes(), timeout=20)


def test_an_always_failing_command_keeps_retrying_and_recovers_once_fixed(tmp_path, processes, tcp_lab, notify):
    lab, device = tcp_lab
    lab.add_fault(EXT_DATA, hci.HCI_UNSPECIFIED_ERROR_ERROR, times=-1)
    b = start(tmp_path, processes, device, notify)
    wait_for(lambda: lab.opcodes().count(EXT_DATA) >= 4, timeout=20, what='four attempts')
    assert lab.advertising() is None and b.proc.poll() is None
    assert any('Unspecified Error (0x1F), retrying in' in a for a in notify.assignments())
    lab.clear_faults()
    on_air(lab, ibeacon_bytes(), timeout=20)


def test_a_command_that_is_never_answered_times_out_and_is_retried(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    lab.add_fault(EXT_PARAMS, None, times=1)  # no reply at all
    b = start(tmp_path, processes, device)
    on_air(lab, ibeacon_bytes(), timeout=20)
    assert 'LE Set Extended Advertising Parameters (0x2036) → no answer from the controller (timeout)' in b.log()
    params = [t for t, op, _ in lab.state()['commands'] if op == EXT_PARAMS]
    assert len(params) == 2 and params[1] - params[0] >= 2.0  # the 2 s command timeout, then a retry


@pytest.mark.parametrize('after', [2, 7], ids=['mid-probe', 'mid-configure'])
def test_connection_dropped_after_n_commands_then_accepted_again(tmp_path, processes, tcp_lab, after):
    lab, device = tcp_lab
    lab.close_after(after)
    b = start(tmp_path, processes, device)
    on_air(lab, ibeacon_bytes(), timeout=20)
    assert len(lab.dropped_at) == 1
    assert '→ connection to the controller lost, retrying in' in b.log() and b.proc.poll() is None


def test_controller_gone_for_5_s_then_back(tmp_path, processes, tcp_lab, notify):
    lab, device = tcp_lab
    b = start(tmp_path, processes, device, notify)
    on_air(lab, ibeacon_bytes())
    n = len(notify.assignments())
    lab.disconnect(reopen_after=5.0)
    wait_for(lambda: lab.reachable_at, timeout=10, what='the controller to return')
    # A controller keeps advertising when its host goes away; what counts is beacond enabling it again.
    wait_for(lambda: lab.enabled_at()[-1] > lab.reachable_at[-1], timeout=40, what='advertising enabled again')
    on_air(lab, ibeacon_bytes())
    back = lab.enabled_at()[-1] - lab.reachable_at[-1]
    print(f'recovery after a 5 s outage: {back * 1000:.0f} ms from the controller listening again to advertising enabled')
    statuses = [a for a in notify.assignments()[n:] if a.startswith('STATUS=')]
    assert any(a.startswith('STATUS=Lost the controller (tcp:127.0.0.1:') for a in statuses), statuses
    assert any('connection refused' in a or 'Cannot open' in a for a in statuses), statuses
    # Stream transports come back at the next retry: the backoff after 5 s of failures is at most ~4.8 s.
    assert back < 6.0
    assert b.proc.poll() is None


def test_controller_dropped_and_back_at_once(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    b = start(tmp_path, processes, device)
    on_air(lab, ibeacon_bytes())
    enables = len(lab.enabled_at())
    lab.disconnect(reopen_after=None)
    t0 = time.monotonic()
    wait_for(lambda: len(lab.enabled_at()) > enables, timeout=10, what='advertising enabled again')
    back = lab.enabled_at()[-1] - t0
    print(f'recovery after an immediate reconnect: {back * 1000:.0f} ms')
    assert back < 1.0  # first retry after 250 ms ± 20 %, then probe and configure


def test_hardware_error_resets_the_controller_and_restores_advertising(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    b = start(tmp_path, processes, device)
    on_air(lab, ibeacon_bytes())
    resets = lab.opcodes().count(RESET)
    lab.hardware_error(0x42)
    assert lab.advertising() is None
    on_air(lab, ibeacon_bytes(), timeout=10)
    assert lab.opcodes().count(RESET) == resets + 1
    assert 'reported Hardware Error 0x42' in b.log()


def test_interval_refused_as_invalid_is_raised_to_the_100_ms_floor(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    lab.add_fault(EXT_PARAMS, hci.HCI_INVALID_HCI_COMMAND_PARAMETERS_ERROR, times=1)
    b = start(tmp_path, processes, device, interval_ms=30)
    family, st = on_air(lab, ibeacon_bytes())
    assert st['interval_min'] == 160
    assert 'raising the interval to 100 ms' in b.log()


def fds(pid: int) -> int:
    """The descriptors the process keeps: the fewest over half a second. A sample taken in the middle of an apply
    also counts a file being written then (the state file's temporary copy), which a leak is not."""
    counts = []
    for _ in range(5):
        counts.append(len(os.listdir(f'/proc/{pid}/fd')))
        time.sleep(0.1)
    return min(counts)


def rss_kib(pid: int) -> int:
    for line in open(f'/proc/{pid}/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    raise AssertionError('no VmRSS')


def test_100_lose_recover_cycles_leak_neither_fds_nor_memory(tmp_path, processes):
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}', scan=False) as lab:
        b = start(tmp_path, processes, f'tcp:127.0.0.1:{port}')
        on_air(lab, ibeacon_bytes())
        # Warm up (allocator arenas, first reconnect paths), then take the baseline.
        for _ in range(5):
            n = len(lab.enabled_at())
            lab.disconnect(reopen_after=None)
            wait_for(lambda: len(lab.enabled_at()) > n, timeout=10, what='recovery')
        fd0, rss0 = fds(b.proc.pid), rss_kib(b.proc.pid)
        t0 = time.monotonic()
        for i in range(100):
            n = len(lab.enabled_at())
            lab.disconnect(reopen_after=None)
            wait_for(lambda: len(lab.enabled_at()) > n, timeout=10, what=f'recovery {i}')
        elapsed = time.monotonic() - t0
        fd1, rss1 = fds(b.proc.pid), rss_kib(b.proc.pid)
        print(f'100 cycles in {elapsed:.1f} s; fds {fd0} -> {fd1}; VmRSS {rss0} -> {rss1} KiB')
        assert fd1 == fd0
        assert rss1 - rss0 <= 256  # allocator noise, not growth per cycle
        assert b.proc.poll() is None


def test_a_peer_that_stops_reading_is_a_lost_controller_not_a_sigpipe(tmp_path, processes):
    """Bug: a unix H4 peer that shut its read side made beacond's next write raise SIGPIPE: exit 141, nothing logged,
    and systemd counts SIGPIPE as a clean exit, so Restart=on-failure never brought it back."""
    import socket
    path = str(tmp_path / 'h4.sock')
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(2)
    server.settimeout(20)
    reset = bytes.fromhex('01030c00')
    b = start(tmp_path, processes, f'unix:{path}')
    first, _ = server.accept()
    first.settimeout(10)
    assert first.recv(4) == reset
    first.shutdown(socket.SHUT_RD)
    first.sendall(bytes.fromhex('040e0401030c00'))  # Reset complete: beacond's next command hits the shut side
    # beacond is still there and, as after any lost controller, comes back with a Reset on a new connection.
    second, _ = server.accept()
    second.settimeout(10)
    assert second.recv(4) == reset
    assert b.proc.poll() is None, f'beacond exited with {b.proc.returncode}'
    assert 'connection to the controller lost, retrying in' in b.log()
    for s in (first, second, server):
        s.close()
