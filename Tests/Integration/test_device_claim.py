"""One beacond per controller, whatever its state directory (issue #53): the device lock lived in the state directory,
so beacond.service and beacond@hci0.service (two directories) both drove hci0, and a run without a state directory
took no lock at all. Reproduced: two `run`s on one unix device with two state directories both reset the controller.
Now the device itself is claimed, outside any directory (an abstract unix socket named by the device's identity:
no file, no mode, released when the process dies); the second run is refused before it sends anything, naming the
holder. From the controller's side: Bumble's command log."""
from __future__ import annotations

import signal

from conftest import config_text
from harness.lab import Lab, wait_for

RESET = 0x0C03


def test_two_runs_on_one_device_with_two_state_directories_or_none(tmp_path, processes):
    sock = tmp_path / 'hci.sock'
    conf = tmp_path / 'beacond.conf'
    conf.write_text(config_text(minor=1))
    (tmp_path / 'one').mkdir()
    (tmp_path / 'two').mkdir()
    with Lab(f'unix-server:{sock}') as lab:
        first = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'STATE_DIRECTORY': str(tmp_path / 'one')})
        wait_for(lab.advertising, 10, what='the first run on the air')
        for where in (str(tmp_path / 'two'), '/proc/no-state-directory-here'):
            second = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'STATE_DIRECTORY': where})
            assert second.wait(10) == 75, second.log()  # EX_TEMPFAIL: the unit tries again later
            assert (f'Cannot run: another beacond (pid {first.proc.pid}) is running on unix:{sock}: stop it first '
                    '(one controller takes one beacond, whatever its state directory') in second.log(), second.log()
        assert lab.opcodes().count(RESET) == 1, lab.opcodes()
        assert first.proc.poll() is None and lab.advertising()
        # Gone, however it went: the device is free at once (nothing left behind to clean up).
        first.signal(signal.SIGKILL)
        first.wait(5)
        third = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'STATE_DIRECTORY': str(tmp_path / 'two')})
        wait_for(lambda: lab.opcodes().count(RESET) == 2 or third.proc.poll() is not None, 10, what='the third run at the controller')
        assert third.proc.poll() is None, third.log()
