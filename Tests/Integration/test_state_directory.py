"""One beacond per device and state directory. The README's hand-run recipe (`sudo beacond run --config … --device
hci0`) uses the service's state directory: a second `run` on the same device would read the first's ownership
record as its own and take its advertising off the controller. It is refused before it sends anything, from the
controller's side: Bumble's command log."""
from __future__ import annotations

import os
import signal
import stat
import subprocess

from conftest import APPLE_UUID, NOBODY, beacond_path, config_text, free_port
from harness.lab import Lab, wait_for


def test_a_second_run_on_the_same_device_and_state_directory_is_refused_before_any_command(tmp_path, processes, tcp_lab, state_directory):
    lab, device = tcp_lab
    conf = tmp_path / 'beacond.conf'
    conf.write_text(config_text(minor=1))
    first = processes('run', '-c', str(conf), '-d', device)
    wait_for(lab.advertising, 10, what='the first run on the air')
    commands = len(lab.opcodes())
    second = processes('run', '-c', str(conf), '-d', device)
    assert second.wait(10) == 75, second.log()  # EX_TEMPFAIL: the unit tries again later
    assert (f'Cannot run: another beacond (pid {first.proc.pid}) is running on {device}: stop it first (one controller '
            'takes one beacond, whatever its state directory') in second.log()
    assert len(lab.opcodes()) == commands and lab.advertising() and first.proc.poll() is None
    # Another device beside it, with the same state directory: both on the air, each beacon's address kept.
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}') as other:
        conf2 = tmp_path / 'other.conf'
        conf2.write_text(config_text(minor=2))
        processes('run', '-c', str(conf2), '-d', f'tcp:127.0.0.1:{port}')
        wait_for(other.advertising, 10, what='the other device on the air')
        wait_for(lambda: len([l for l in (state_directory / 'addresses').read_text().splitlines() if not l.startswith('#')]) == 2, 5,
                 what='both beacons in addresses')
    # Once the first run stops, its device is free again.
    assert first.stop() == 0
    lab.call(lambda: lab.controller.commands.clear())
    third = processes('run', '-c', str(conf), '-d', device)
    wait_for(lambda: lab.opcodes() or third.proc.poll() is not None, 10, what='the third run at the controller')
    assert third.proc.poll() is None, third.log()


def nobody_owns(path):
    os.chown(path, 65534, 65534)
    return path


def test_a_state_directory_another_user_controls_is_refused_before_anything_is_read_or_sent(tmp_path, processes, tcp_lab, open_tmp):
    """bug (review #43): root's beacond used whatever STATE_DIRECTORY named. In a directory nobody owns, their
    `addresses` chose the address root's beacon advertised from, and a FIFO as lock.DEVICE hung root's beacond
    before its first line. Now a directory that is not this user's, or that others may write, is refused at the start
    (exit 77, naming the owner and what to do), before a command reaches the controller."""
    lab, device = tcp_lab
    conf = tmp_path / 'beacond.conf'
    conf.write_text(config_text(minor=1))
    theirs = open_tmp / 'theirs'
    theirs.mkdir()
    nobody_owns(theirs)
    (theirs / 'addresses').write_text(f'C6:11:22:33:44:55 ibeacon {APPLE_UUID} 1 1\n')
    nobody_owns(theirs / 'addresses')
    os.mkfifo(theirs / StateLockName(device))
    nobody_owns(theirs / StateLockName(device))
    shared = open_tmp / 'shared'
    shared.mkdir()
    os.chmod(shared, 0o1777)  # root's, sticky, world-writable: others still make the names beacond uses
    for d, why in ((theirs, 'belongs to user 65534'), (shared, 'may be written by others')):
        b = processes('run', '-c', str(conf), '-d', device, env={'STATE_DIRECTORY': str(d)})
        assert b.wait(5) == 77, b.log()
        assert f'the state directory {d} {why}' in b.log() and '$(mktemp -d)' in b.log(), b.log()
        assert lab.opcodes() == [] and not lab.advertising()


def StateLockName(device: str) -> str:
    return 'lock.' + ''.join(c if c.isalnum() or c in '.-' else '%%%02X' % ord(c) for c in device)


def test_a_records_lock_another_process_holds_does_not_freeze_beacond(tmp_path, processes, tcp_lab, open_tmp):
    """bug (review #43): a state directory a hand-run beacond had made (0755) kept lock.records at 0644: nobody
    opened it and held its lock (`flock lock.records sleep`), and root's beacond waited for it without end, in phase
    "opening", nothing on the air, deaf to SIGTERM. Now the lock files are 0600 (nobody cannot open them), and a
    lock held anyway is waited on with a deadline: beacond says who holds it, retries, and stops on SIGTERM."""
    lab, device = tcp_lab
    conf = tmp_path / 'beacond.conf'
    conf.write_text(config_text(minor=1))
    state = open_tmp / 'state'
    state.mkdir(mode=0o755)
    records = state / 'lock.records'
    records.touch(mode=0o644)  # as an earlier version left it
    os.chmod(records, 0o644)
    holder = subprocess.Popen([*NOBODY, 'flock', '-o', str(records), 'sleep', '60'])  # -o: sleep does not inherit the lock
    try:
        wait_for(lambda: f' {holder.pid} ' in open('/proc/locks').read() or any(
            f' {c} ' in open('/proc/locks').read() for c in children(holder.pid)), 5, what="nobody's lock on lock.records")
        b = processes('run', '-c', str(conf), '-d', device, env={'STATE_DIRECTORY': str(state)})
        wait_for(lambda: 'lock.records' in b.log(), 10, what='beacond to say the records are locked')
        assert 'is held by' in b.log(), b.log()
        b.signal(signal.SIGTERM)
        assert b.wait(5) == 0, b.log()
        assert stat.S_IMODE(os.stat(records).st_mode) == 0o600
    finally:
        holder.kill()
        holder.wait()
    # Once no one holds it, the same directory works, and nobody can no longer open the lock.
    b = processes('run', '-c', str(conf), '-d', device, env={'STATE_DIRECTORY': str(state)})
    wait_for(lab.advertising, 10, what='on the air')
    r = subprocess.run([*NOBODY, 'flock', '-n', str(records), 'true'], capture_output=True, text=True)
    assert r.returncode != 0 and 'Permission denied' in r.stderr, r.stderr
    b.stop()


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in open(f'/proc/{pid}/task/{pid}/children').read().split()]
    except OSError:
        return []


def test_records_and_locks_have_their_modes_whatever_the_umask_and_a_lock_that_cannot_be_taken_is_an_error(tmp_path, tcp_lab, open_tmp):
    """bug (review #43): the records took the caller's umask. Root ran beacond by hand once with umask 077 in the
    service's state directory; after that the service (its own user) could not open the lock: it ran without one,
    lost its static address ("addresses: Permission denied") and a second beacond ran beside it. Now the records
    are 0644 and the locks 0600 whatever the umask, and a lock file beacond cannot take stops it (exit 77)."""
    lab, device = tcp_lab
    conf = open_tmp / 'beacond.conf'  # nobody reads it too
    conf.write_text(config_text(minor=1))
    state = open_tmp / 'state'
    state.mkdir(mode=0o700)
    p = subprocess.Popen([str(beacond_path()), 'run', '-c', str(conf), '-d', device], env={**os.environ, 'STATE_DIRECTORY': str(state)},
                         preexec_fn=lambda: os.umask(0o077), stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lab.advertising, 10, what='on the air')
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in state.iterdir()}
    assert modes == {'addresses': 0o644, 'in-use': 0o644, 'lock.records': 0o600, StateLockName(device): 0o600}, modes
    # The service's directory (its user's: nobody here), with the lock root's hand run left behind.
    nobody_owns(state)
    for f in ('addresses', 'in-use', 'lock.records'):
        nobody_owns(state / f)
    r = subprocess.run([*NOBODY, str(beacond_path()), 'run', '-c', str(conf), '-d', device], capture_output=True, text=True, timeout=10,
                       env={**os.environ, 'STATE_DIRECTORY': str(state)})
    assert r.returncode == 77, r.stderr
    assert f'{state}/{StateLockName(device)} belongs to user 0' in r.stderr, r.stderr
    assert not lab.advertising()


def test_a_second_run_on_another_spelling_of_the_same_device_is_refused(tmp_path, processes, state_directory):
    """bug (review #43): the lock's name came from the device's spelling: a second beacond on `unix:…/./m.sock` ran
    beside the one on `unix:…/m.sock` (so would /dev/serial0 beside ttyAMA0, tcp:localhost beside tcp:127.0.0.1).
    Devices are compared by what they are: the resolved path and its inode, the device number, the address."""
    sock = tmp_path / 'm.sock'
    (tmp_path / 'link').symlink_to(tmp_path)
    conf = tmp_path / 'beacond.conf'
    conf.write_text(config_text(minor=1))
    with Lab(f'unix-server:{sock}') as lab:
        first = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        wait_for(lab.advertising, 10, what='the first run on the air')
        for alias in (f'unix:{tmp_path}/./m.sock', f'unix:{tmp_path}/link/m.sock', f'unix:{tmp_path}//m.sock'):
            second = processes('run', '-c', str(conf), '-d', alias)
            assert second.wait(10) == 75, second.log()
            assert f'another beacond (pid {first.proc.pid}) is running on {alias}' in second.log(), second.log()
        assert first.proc.poll() is None and lab.advertising()
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}') as lab:
        first = processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port}')
        wait_for(lab.advertising, 10, what='the first run on the air')
        second = processes('run', '-c', str(conf), '-d', f'tcp:localhost:{port}')
        assert second.wait(10) == 75, second.log()
