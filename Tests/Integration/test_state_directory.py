"""One beacond per device and state directory. The README's hand-run recipe (`sudo beacond run --config … --device
hci0`) uses the service's state directory: a second `run` on the same device would read the first's ownership
record as its own and take its advertising off the controller. It is refused before it sends anything, from the
controller's side: Bumble's command log."""
from __future__ import annotations

from conftest import config_text, free_port
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
    assert (f'Cannot run: another beacond (pid {first.proc.pid}) is running on {device} with the state directory '
            f'{state_directory}: stop it first, or give this one a state directory of its own') in second.log()
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
