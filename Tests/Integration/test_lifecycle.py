"""Lifecycle races against a real virtual controller: credits that never come back, a reload during a failing
bring-up, a stop in the middle of an apply, a central that connects to a connectable beacon, and the unit's restart
policy for fatal exits. Each one was a bug; each test failed before its fix.

Assertions read the controller's state and the commands it received, or the sd_notify datagrams systemd would get.
"""
from __future__ import annotations

import os
import re
import signal
import time

from bumble import hci

from conftest import ROOT, config_text, ibeacon_bytes, run_cli, kept_address
from harness.lab import Lab, wait_for
from test_beacons import ALT, ALT_BYTES, IB, IB_BYTES, heard_all
from test_faults import start
from test_run import EXT_DATA, EXT_ENABLE, EXT_PARAMS, on_air

RESET = hci.HCI_RESET_COMMAND
VERSION = hci.HCI_READ_LOCAL_VERSION_INFORMATION_COMMAND
LEGACY_DATA = hci.HCI_LE_SET_ADVERTISING_DATA_COMMAND
LEGACY_ENABLE = hci.HCI_LE_SET_ADVERTISING_ENABLE_COMMAND


def test_zero_command_credits_after_reset_are_treated_as_a_hung_controller_and_it_is_reopened(
        tmp_path, processes, tcp_lab, notify):
    lab, device = tcp_lab
    # Reset is answered with Num_HCI_Command_Packets = 0 and nothing else ever comes: beacond may not send again.
    lab.add_fault(RESET, 0, times=1, credits=0)
    b = start(tmp_path, processes, device, notify)
    wait_for(lambda: lab.opcodes().count(RESET) >= 1, timeout=5, what='the first Reset')
    # The kernel's ncmd timer is 4 s; beacond's bound is the same. Then it reopens, resets again, and advertises.
    on_air(lab, ibeacon_bytes(), timeout=15)
    ops = lab.opcodes()
    assert ops[0] == RESET and ops[1] == RESET, [hex(o) for o in ops[:4]]  # nothing was sent without a credit
    status = notify.wait_for('STATUS=Failed to probe the controller')
    assert 'gave no command credit back within 4 s and is treated as hung, retrying in' in status, status
    assert b.proc.poll() is None


def test_a_reload_during_a_failing_bring_up_is_answered_with_ready(tmp_path, processes, tcp_lab, notify):
    lab, device = tcp_lab
    # The probe's Read Local Version goes unanswered: each bring-up takes the 2 s command timeout and fails before
    # anything is applied.
    lab.add_fault(VERSION, None, times=-1)
    pid = {}
    sent = []

    def hup_once(op):
        if op == VERSION and not sent and 'pid' in pid:
            sent.append(time.monotonic())
            os.kill(pid['pid'], signal.SIGHUP)  # arrives while the bring-up waits for its answer

    b = start(tmp_path, processes, device, notify)
    pid['pid'] = b.proc.pid
    notify.wait_for('READY=1')  # settled into retrying; the SIGHUP lands in a later bring-up
    lab.on_command(hup_once)
    wait_for(lambda: sent, timeout=10, what='the SIGHUP during a bring-up')
    notify.wait_for('RELOADING=1')
    n = notify.assignments().index('RELOADING=1')
    # READY=1 must follow, with a STATUS that tells the truth (still retrying), well inside systemd's reload timeout.
    ready = wait_for(lambda: 'READY=1' in notify.assignments()[n:], timeout=8, what='READY=1 after RELOADING=1')
    later = notify.assignments()[n:]
    assert any(a.startswith('STATUS=') and 'retrying in' in a for a in later), later
    # And STATUS keeps following the retries after the reload.
    k = len(notify.assignments())
    wait_for(lambda: any(a.startswith('STATUS=') for a in notify.assignments()[k:]), timeout=10,
             what='a STATUS update after the reload')
    assert ready and b.proc.poll() is None


def test_a_stop_between_set_data_and_enable_leaves_nothing_on_air(tmp_path, processes, tcp_lab, notify):
    lab, device = tcp_lab
    pid = {}
    lab.add_fault(EXT_DATA, 0, times=1, delay=0.5)  # the real reply, half a second late

    def term_on_data(op):
        if op == EXT_DATA and 'pid' in pid:
            os.kill(pid['pid'], signal.SIGTERM)

    lab.on_command(term_on_data)
    b = start(tmp_path, processes, device, notify)
    pid['pid'] = b.proc.pid
    assert b.wait(10) == 0
    time.sleep(0.3)
    assert lab.advertising() is None, lab.state()['sets']
    s = lab.state()
    assert s['sets'] == {}, s['sets']  # the set was removed, not only disabled
    after = [(op, p) for _, op, p in s['commands']]
    data = next(i for i, (op, _) in enumerate(after) if op == EXT_DATA)
    tail = after[data + 1:]
    # Whatever the order, no enable may come after the stop's disable, and the last word removes the sets (on an H4
    # controller beacond owns: LE Clear Advertising Sets, all of them in one command).
    disables = [i for i, (op, p) in enumerate(tail) if op == EXT_ENABLE and p[:1] == b'\x00']
    assert disables, tail
    assert not any(op == EXT_ENABLE and p[:1] == b'\x01' for op, p in tail[disables[0]:]), tail
    assert tail[-1][0] == hci.HCI_LE_CLEAR_ADVERTISING_SETS_COMMAND, tail


def test_a_stop_while_a_time_slice_is_out_waits_for_the_slot(tmp_path, processes, notify):
    """Legacy time slices with an address per beacon restart the advertiser each slot (disable, address, data,
    enable). A SIGTERM while a slot's data command is out: the slot's enable comes back first, then the stop's
    disable is the last word. The bug: the stop's disable went out between the slot's data and its enable (two
    sequences of commands interleaved on one controller), so whether the controller was left advertising depended
    on the slot's enable being lost with the connection."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', extended=False) as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'NOTIFY_SOCKET': notify.path})
        heard_all(lab, [IB_BYTES, ALT_BYTES], timeout=10)
        armed = len(lab.state()['commands'])
        lab.add_fault(LEGACY_DATA, 0, times=1, delay=0.5)  # the next slot's data: the real reply, half a second late
        sent = []
        lab.on_command(lambda op: op == LEGACY_DATA and not sent and (sent.append(op) or os.kill(b.proc.pid, signal.SIGTERM)))
        assert b.wait(10) == 0
        time.sleep(0.6)  # anything still queued in the controller lands
        tail = [(op, p) for _, op, p in lab.state()['commands'][armed:]]
        data = next(i for i, (op, _) in enumerate(tail) if op == LEGACY_DATA)
        assert tail[data:] == [tail[data], (LEGACY_ENABLE, b'\x01'), (LEGACY_ENABLE, b'\x00')], tail
        assert lab.advertising() is None, lab.state()


def test_a_reload_from_an_h4_device_to_a_kernel_one_starts_watching_kernel_device_events(tmp_path, processes, tcp_lab, notify):
    """The kernel's device events (an adapter registered or up again: used at once, not at the next retry) were
    watched only when the first device was an hciN: after a reload from an H4 device to hci0, a returning adapter
    waited for the retry. This machine has no Bluetooth sockets, so the watcher's own attempt is what shows: it is
    made when the device becomes a kernel one (the debug line says why it cannot watch here)."""
    lab, device = tcp_lab
    conf = tmp_path / 'beacond.conf'
    daemon = '[daemon]\nlog_level = "debug"\n'
    conf.write_text(config_text(extra=f'\n[controller]\ndevice = "{device}"\n{daemon}'))
    b = processes('run', '-c', str(conf), env={'NOTIFY_SOCKET': notify.path})
    on_air(lab, ibeacon_bytes())
    assert 'hciN device events' not in b.log()  # an H4 device: nothing to watch
    conf.write_text(config_text(extra=f'\n[controller]\ndevice = "hci0"\n{daemon}'))
    os.kill(b.proc.pid, signal.SIGHUP)
    wait_for(lambda: lab.advertising() is None, timeout=5, what='the H4 controller left')
    # (Then, with no Bluetooth in this kernel, beacond exits 69 as at a start on hci0: not this test's subject.)
    wait_for(lambda: re.search(r'(Not watching|Watching) hciN device events', b.log()), timeout=5,
             what="the kernel device watcher's start after the reload")


def test_connectable_advertising_is_back_after_a_central_connects_and_after_it_disconnects(
        tmp_path, processes, tcp_lab, notify, state_directory):
    lab, device = tcp_lab
    b = start(tmp_path, processes, device, notify, connectable=True)
    on_air(lab, ibeacon_bytes())
    enables = len(lab.enabled_at())
    # The central connects to the address the beacon advertises from: the static one beacond keeps.
    lab.connect_central(kept_address(state_directory))
    # The controller stopped advertising when the central connected; beacond must turn it back on.
    wait_for(lambda: len(lab.enabled_at()) > enables, timeout=5, what='advertising re-enabled after the connection')
    on_air(lab, ibeacon_bytes(), timeout=5)
    enables = len(lab.enabled_at())
    lab.disconnect_central()
    wait_for(lambda: len(lab.enabled_at()) > enables, timeout=5, what='advertising re-enabled after the disconnection')
    on_air(lab, ibeacon_bytes(), timeout=5)
    assert b.proc.poll() is None


def test_every_fatal_exit_status_of_run_prevents_a_restart_in_both_units():
    text = run_cli('run', '--help').stdout
    exit_section = text.split('EXIT STATUS:', 1)[1]
    # Each code with its meaning, up to the next comma; 0 and the codes systemd is meant to restart are not fatal.
    codes = re.findall(r'\b(\d+) ([^,]*?(?:\([^)]*\))?)(?:,|\.|$)', ' '.join(exit_section.split()))
    fatal = {int(n) for n, meaning in codes if int(n) != 0 and 'systemd restarts' not in meaning}
    assert 1 not in fatal and 1 in {int(n) for n, _ in codes}, codes
    assert {64, 69, 77, 78} <= fatal, exit_section
    for unit in ('beacond.service', 'beacond@.service'):
        body = (ROOT / 'systemd' / unit).read_text()
        m = re.search(r'^RestartPreventExitStatus=(.*)$', body, re.M)
        assert m, unit
        assert fatal <= {int(x) for x in m.group(1).split()}, (unit, m.group(1), fatal)


def test_the_shipped_config_puts_nothing_on_the_air_until_gen_uuid_sets_a_uuid(tmp_path, processes, tcp_lab, notify):
    lab, device = tcp_lab
    conf = tmp_path / 'beacond.conf'
    conf.write_text((ROOT / 'config/beacond.conf').read_text())  # exactly what the package installs
    b = processes('run', '-c', str(conf), '-d', device, env={'NOTIFY_SOCKET': notify.path})
    status = notify.wait_for('STATUS=Not advertising')
    assert f"[beacon] in {conf}:4 has no uuid yet; set one with 'beacond gen-uuid --set {conf}', then reload" in status
    assert 'READY=1' in notify.assignments()  # the unit is up: systemctl start returns, status shows the hint
    time.sleep(1)
    assert lab.opcodes() == [], [hex(o) for o in lab.opcodes()]  # the controller was not touched at all
    checked = run_cli('check-config', '-c', str(conf))
    assert checked.returncode == 0 and 'no beacon yet' in checked.stdout, checked.stdout
    refused = run_cli('payload', '-c', str(conf))
    assert refused.returncode == 78 and f'{conf}:4:1: error: no beacon to print' in refused.stderr, refused.stderr
    # The user provisions the region and reloads: the beacon goes on the air with that UUID.
    uuid = run_cli('gen-uuid', '--set', str(conf), check=True).stdout.strip()
    b.signal(signal.SIGHUP)
    on_air(lab, ibeacon_bytes(uuid=uuid), timeout=10)
    assert b.proc.poll() is None
    # Taking the uuid out again takes the beacon off the air, and beacond keeps running, saying so.
    conf.write_text((ROOT / 'config/beacond.conf').read_text())
    k = len(notify.assignments())
    b.signal(signal.SIGHUP)
    wait_for(lambda: any(a.startswith('STATUS=Not advertising') for a in notify.assignments()[k:]), timeout=10,
             what='STATUS back to not advertising')
    wait_for(lambda: lab.advertising() is None, timeout=5, what="advertising off on the controller")
    assert b.proc.poll() is None
