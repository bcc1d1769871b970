"""A hostile controller: Bumble's real controller with its event stream mutated, and raw bytes injected, while it still
speaks H4. For every kind of misbehaviour, beacond must not crash, must say what it saw, must reset or reopen where
that is needed, and must have the beacon back on the air (read from the controller's state) once the controller
behaves again."""
from __future__ import annotations

import os
import signal
import time

import pytest
from bumble import hci

from conftest import config_text, ibeacon_bytes
from harness.lab import wait_for
from test_faults import start
from test_run import EXT_DATA, EXT_ENABLE, on_air

RESET = hci.HCI_RESET_COMMAND
VERSION = hci.HCI_READ_LOCAL_VERSION_INFORMATION_COMMAND


def event(code: int, params: bytes) -> bytes:
    return bytes([4, code, len(params)]) + params


def complete(opcode: int, ret: bytes = b'\x00', credits: int = 1) -> bytes:
    return event(0x0E, bytes([credits]) + opcode.to_bytes(2, 'little') + ret)


def opcode_of_complete(p: bytes) -> int | None:
    return p[4] | p[5] << 8 if len(p) >= 6 and p[0] == 4 and p[1] == 0x0E else None


def resets(lab) -> int:
    return lab.opcodes().count(RESET)


def settle(lab, b, expected=None, resets_before=None, timeout=15):
    """The controller behaves again: the beacon must be (back) on the air and beacond alive."""
    lab.mutate(None)
    on_air(lab, expected or ibeacon_bytes(), timeout=timeout)
    assert b.proc.poll() is None, b.log()[-2000:]


@pytest.fixture
def running(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    b = start(tmp_path, processes, device, None)
    on_air(lab, ibeacon_bytes())
    return lab, b, tmp_path


def reload_minor(b, tmp_path, minor):
    (tmp_path / 'beacond.conf').write_text(config_text(minor=minor))
    b.signal(signal.SIGHUP)


def test_garbage_bytes_break_the_stream_and_beacond_reopens(running):
    lab, b, _ = running
    n = resets(lab)
    lab.inject(b'\x07\x01\x02garbage that is no H4 packet')
    wait_for(lambda: resets(lab) > n, timeout=10, what='a reopen with a new Reset')
    settle(lab, b)
    assert 'broken H4 stream' in b.log()


def test_a_truncated_event_swallows_what_follows_until_the_command_timeout_reopens(running):
    lab, b, tmp_path = running
    n = resets(lab)
    lab.inject(b'\x04\x0e\x0a\x01\x03')  # claims 10 bytes, gives 2: the next packets are taken as its body
    reload_minor(b, tmp_path, 2)  # a data update whose reply goes into the truncated event
    wait_for(lambda: resets(lab) > n, timeout=10, what='a reopen after the command timeout')
    settle(lab, b, ibeacon_bytes(minor=2), timeout=20)
    assert 'no answer from the controller (timeout)' in b.log()


def test_oversized_lengths_and_report_lengths_past_the_end_are_skipped(running):
    lab, b, _ = running
    n = resets(lab)
    report = bytes([0x0D, 1]) + bytes(23) + bytes([200]) + b'\x02\x01\x06'  # data length 200, 3 bytes given
    lab.inject(event(0x0E, bytes([1, 0x34, 0x12]) + bytes(252)),  # the longest event there is, for a command never sent
               event(0x3E, report), event(0x3E, bytes([0x02, 5]) + bytes(10)))  # 5 legacy reports in 10 bytes
    time.sleep(0.5)
    settle(lab, b)
    assert resets(lab) == n  # nothing needed a reopen
    assert 'answered 0x1234, which beacond did not send' in b.log()


def test_unknown_event_codes_and_vendor_events_are_ignored(running):
    lab, b, _ = running
    n = resets(lab)
    lab.inject(event(0x77, b'\x01\x02'), event(0xFF, b'\x42' * 40), event(0x3E, b'\x99\x01'))
    time.sleep(0.5)
    settle(lab, b)
    assert resets(lab) == n
    assert 'sent event 0x77 (2 bytes), which beacond does not use; ignoring it' in b.log()
    assert 'sent event 0xFF (40 bytes)' in b.log()


def test_malformed_events_are_named_and_skipped(running):
    lab, b, _ = running
    n = resets(lab)
    lab.inject(event(0x0E, b'\x01'), event(0x0F, b'\x00\x01'), event(0x10, b''))  # too short for their codes
    time.sleep(0.5)
    settle(lab, b)
    assert resets(lab) == n
    assert 'sent a malformed event 0x0E' in b.log()


def test_a_reply_with_the_wrong_opcode_times_out_and_beacond_reopens(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    state = {'done': False}

    def wrong_opcode(p):
        if not state['done'] and opcode_of_complete(p) == EXT_ENABLE:
            state['done'] = True
            return [p[:4] + (0x2036).to_bytes(2, 'little') + p[6:]]  # the enable's reply, labelled Set Parameters
        return [p]

    lab.mutate(wrong_opcode)
    b = start(tmp_path, processes, device, None)
    wait_for(lambda: state['done'], timeout=10, what='the mislabelled reply')
    wait_for(lambda: resets(lab) == 2, timeout=10, what='a reopen after the enable timed out')
    on_air(lab, ibeacon_bytes(), timeout=15)
    assert b.proc.poll() is None
    assert 'LE Set Extended Advertising Enable (0x2039) → no answer from the controller (timeout)' in b.log()


def test_command_status_where_a_complete_is_expected_is_a_malformed_probe_and_retried(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    state = {'n': 0}

    def status_instead(p):
        if state['n'] < 2 and opcode_of_complete(p) == VERSION:
            state['n'] += 1
            return [event(0x0F, bytes([0, 1]) + VERSION.to_bytes(2, 'little'))]  # Command Status: success
        return [p]

    lab.mutate(status_instead)
    b = start(tmp_path, processes, device, None)
    on_air(lab, ibeacon_bytes(), timeout=15)
    assert state['n'] == 2 and resets(lab) == 3 and b.proc.poll() is None
    assert 'sent a malformed probe reply' in b.log()


def test_duplicated_replies_are_ignored(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    lab.mutate(lambda p: [p, p] if opcode_of_complete(p) is not None else [p])
    b = start(tmp_path, processes, device, None)
    on_air(lab, ibeacon_bytes(), timeout=10)
    reload_minor(b, tmp_path, 3)
    on_air(lab, ibeacon_bytes(minor=3), timeout=10)
    assert resets(lab) == 1 and b.proc.poll() is None  # every duplicate was harmless
    assert 'which beacond did not send or no longer waits for; ignoring it' in b.log()


def test_le_meta_subevents_with_short_payloads(running):
    lab, b, _ = running
    n = resets(lab)
    lab.inject(*(event(0x3E, bytes([sub]) + bytes(k)) for sub in (0x01, 0x02, 0x0A, 0x0D, 0x12, 0x29) for k in (0, 1, 2)))
    time.sleep(0.5)
    settle(lab, b)
    assert resets(lab) == n
    assert 'sent LE Meta subevent 0x02 (0 bytes), which beacond does not use; ignoring it' in b.log()


def test_a_flood_of_events_is_survived_with_flat_memory_and_commands_still_work(running):
    lab, b, tmp_path = running
    def rss():
        return int(next(l for l in open(f'/proc/{b.proc.pid}/status') if l.startswith('VmRSS:')).split()[1])
    lab.inject(*[event(0xFF, bytes([i % 256]) * 30) for i in range(2000)])
    time.sleep(1)
    before = rss()
    for _ in range(5):
        lab.inject(*[event(0xFF, bytes([i % 256]) * 30) for i in range(4000)])
    time.sleep(1)
    after = rss()
    reload_minor(b, tmp_path, 4)
    settle(lab, b, ibeacon_bytes(minor=4))
    print(f'event flood: 22000 vendor events; RSS {before} -> {after} KiB')
    assert after - before <= 512
    log = b.log()
    assert log.count('sent event 0xFF') == 1, 'a flood must not flood the journal'


def test_zero_credits_then_silence_is_a_hung_controller(tmp_path, processes, tcp_lab):
    lab, device = tcp_lab
    lab.add_fault(RESET, 0, times=1, credits=0)
    b = start(tmp_path, processes, device, None)
    on_air(lab, ibeacon_bytes(), timeout=15)
    assert resets(lab) == 2 and 'treated as hung' in b.log()
