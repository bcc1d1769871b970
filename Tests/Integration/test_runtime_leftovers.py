"""A hand run killed while writing its state (issue #53): the temporary `.state.json.*` of the atomic replace stayed
beside the state file, so removing the stale /run/beacond.PID (or $XDG_RUNTIME_DIR/beacond.PID) failed at its rmdir
and the directory stayed for good. Its temporary files now go first."""
from __future__ import annotations

from test_status import cli, killed_hand_run


def test_a_run_killed_while_writing_its_state_leaves_no_directory_once_status_finds_it(tmp_path, processes, open_tmp):
    conf, env, left = killed_hand_run(tmp_path, processes, open_tmp)
    # What a kill between the temporary file's creation and its rename leaves (AtomicReplace's name for it).
    (left / '.state.json.1a2b3c').write_text('{"version": ')
    (left / '.state.json.4d5e6f').write_text('')
    r = cli('status', '--config', str(conf), env=env)
    assert r.returncode == 3 and 'No beacond is running' in r.stdout, r.stdout + r.stderr
    assert not left.exists(), sorted(p.name for p in left.iterdir())
    assert list(left.parent.iterdir()) == []
