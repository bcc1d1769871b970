"""A hand run killed while writing its state (issue #53): the temporary `.state.json.*` of the atomic replace stayed
beside the state file, so removing the stale /run/beacond.PID (or $XDG_RUNTIME_DIR/beacond.PID) failed at its rmdir
and the directory stayed for good. Its temporary files now go first."""
from __future__ import annotations

from harness.lab import Lab, wait_for
from test_beacons import IB
from test_status import cli, status


def test_a_run_killed_while_writing_its_state_leaves_no_directory_once_status_finds_it(tmp_path, processes, open_tmp):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    xdg = open_tmp / 'xdg'
    xdg.mkdir(mode=0o700)
    env = {'XDG_RUNTIME_DIR': str(xdg)}
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}'):
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
        wait_for(lambda: status(conf, env)[0] == 0, 10, what='status ok')
        b.proc.kill()
        b.wait()
    left = xdg / f'beacond.{b.proc.pid}'
    # What a kill between the temporary file's creation and its rename leaves (AtomicReplace's name for it).
    (left / '.state.json.1a2b3c').write_text('{"version": ')
    (left / '.state.json.4d5e6f').write_text('')
    r = cli('status', '--config', str(conf), env=env)
    assert r.returncode == 3 and 'No beacond is running' in r.stdout, r.stdout + r.stderr
    assert not left.exists(), sorted(p.name for p in left.iterdir())
    assert list(xdg.iterdir()) == []
