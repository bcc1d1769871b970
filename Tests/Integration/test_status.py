"""`beacond status` and `beacond reload` against Bumble's controller: three beacons, where every fact `status --json`
gives (data, addresses, family, sets, intervals) is checked against the controller's own state; then a good reload
(the new data is on the controller when `reload` returns), a broken one (how many errors, on which lines, the old
beacons still on the air and listed), and a controller loss.

The state file comes from `run` ($RUNTIME_DIRECTORY here, as the units' RuntimeDirectory= gives it).
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import time

from conftest import APPLE_UUID, beacond_path, ibeacon_bytes
from harness.lab import Lab, wait_for
import output_schema
from test_beacons import ALT, ALT_BYTES, EDDY, EDDY_BYTES, IB, IB_BYTES, enabled_sets
from test_formats import INSTANCE, NAMESPACE


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(beacond_path()), *args], capture_output=True, text=True, timeout=90, env={**os.environ, **env})


def status(conf, env) -> tuple[int, dict]:
    r = cli('status', '--json', '--config', str(conf), env=env)
    return r.returncode, output_schema.loads('status', r.stdout)


def test_status_matches_the_controller_through_reloads_and_a_loss(tmp_path, processes):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + EDDY)
    run_dir = tmp_path / 'run'
    env = {'RUNTIME_DIRECTORY': str(run_dir)}
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', max_sets=6) as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
        sets = wait_for(lambda: (s := enabled_sets(lab)) and len(s) == 3 and s, 10, what='three sets enabled')
        by_data = {s['data']: s for s in sets.values()}
        code, st = wait_for(lambda: (r := status(conf, env)) and r[1]['ok'] and r, 5, what='status ok')
        assert code == 0 and st['problems'] == []
        (d,) = st['daemons']
        assert d['unit'] is None and d['state_file'] == str(run_dir / 'state.json')
        assert d['pid'] == b.proc.pid and d['phase'] == 'advertising'
        assert d['config'] == {'path': str(conf), 'sha256': hashlib.sha256(conf.read_bytes()).hexdigest()}
        # The controller as Bumble is: extended commands (its sets are the ones enabled), 6 sets, Bluetooth 5.0.
        manufacturer = lab.controller.manufacturer_company_identifier
        assert d['controller'] == {'device': f'unix:{sock}', 'backend': 'hci', 'family': 'extended', 'bluetooth_version': '5.0',
                                   'manufacturer': manufacturer, 'sets': 6, 'instances': None, 'time_sliced': False}
        beacons = d['beacons']
        assert [x['format'] for x in beacons] == ['ibeacon', 'altbeacon', 'eddystone-uid']
        assert beacons[0]['identity'] == {'uuid': APPLE_UUID, 'major': 1, 'minor': 2}
        assert beacons[1]['identity'] == {'uuid': APPLE_UUID, 'major': 513, 'minor': 1027}
        assert beacons[2]['identity'] == {'namespace': NAMESPACE, 'instance': INSTANCE}
        # Each address is the one the controller's set has for that beacon's data.
        for x, data in zip(beacons, [IB_BYTES, ALT_BYTES, EDDY_BYTES]):
            assert x['address'] == by_data[data]['random_address'] and x['address_kind'] == 'static'
            assert x['interval_ms'] == by_data[data]['interval_min'] * 0.625
            assert x['on_air'] is True and isinstance(x['on_air_since'], int) and x['warnings'] == []
        assert d['reload'] == {'count': 0, 'result': None} and d['last_refused'] is None and d['clock'] is None
        # Readable by any user, whatever the umask.
        assert stat.S_IMODE(os.stat(run_dir / 'state.json').st_mode) == 0o644
        text = cli('status', '--config', str(conf), env=env)
        assert text.returncode == 0
        assert f'1. ibeacon uuid {APPLE_UUID} major 1 minor 2 from {by_data[IB_BYTES]["random_address"]} (static), every 100 ms' in text.stdout
        assert 'controller: ' in text.stdout and 'extended advertising' in text.stdout and '6 advertising sets' in text.stdout

        # A good reload: the new minor is on the controller when `reload` returns.
        conf.write_text(IB.replace('minor = 2', 'minor = 3') + ALT + EDDY)
        r = cli('reload', '--config', str(conf), env=env)
        assert r.returncode == 0, r.stderr
        new_ib = ibeacon_bytes(major=1, minor=3)
        assert new_ib in {s['data'] for s in enabled_sets(lab).values()}
        code, st = status(conf, env)
        (d,) = st['daemons']
        assert code == 0 and d['reload'] == {'count': 1, 'result': 'applied'}
        assert d['config']['sha256'] == hashlib.sha256(conf.read_bytes()).hexdigest()
        assert d['beacons'][0]['identity']['minor'] == 3

        # A broken reload: refused with how many errors and on which lines (their text is in the journal and
        # check-config: the state file is every user's), the old beacons still on the air and listed.
        good = conf.read_bytes()
        conf.write_text(IB.replace('minor = 2', 'minor = 3') + ALT + EDDY.replace('measured_power = -20', 'measured_power = "loud"'))
        bad_line = conf.read_text().splitlines().index('measured_power = "loud"') + 1
        r = cli('reload', '--config', str(conf), env=env)
        assert r.returncode == 78
        assert f'{conf} was refused (1 error, on line {bad_line}; \'beacond check-config --config {conf}\' lists them)' in r.stderr, r.stderr
        assert 'previous configuration stays on the air' in r.stderr
        assert sorted(s['data'] for s in enabled_sets(lab).values()) == sorted([new_ib, ALT_BYTES, EDDY_BYTES])
        code, st = status(conf, env)
        (d,) = st['daemons']
        assert code == 1 and st['ok'] is False
        assert d['reload'] == {'count': 2, 'result': 'refused', 'error_count': 1, 'error_lines': [bad_line]}
        assert d['last_refused']['error_count'] == 1 and d['last_refused']['error_lines'] == [bad_line]
        assert d['config']['sha256'] == hashlib.sha256(good).hexdigest()  # the file on the air, not the refused one
        assert all(x['on_air'] for x in d['beacons']) and d['beacons'][0]['identity']['minor'] == 3
        assert any('refused' in p and f'{conf} has 1 error, on line {bad_line}' in p for p in st['problems']), st['problems']

        # The controller goes away: nothing on the air, and status says so (exit 1).
        lab.disconnect(reopen_after=None)
        code, st = wait_for(lambda: (r := status(conf, env)) and r[1]['daemons'][0]['phase'] != 'advertising' and r, 10,
                            what='status to see the loss')
        (d,) = st['daemons']
        assert code == 1 and not any(x['on_air'] for x in d['beacons'])
        assert any('not on the air' in p for p in st['problems'])

        b.stop()
        assert not (run_dir / 'state.json').exists()
        r = cli('status', '--config', str(conf), env=env)
        assert r.returncode == 3 and 'No beacond is running' in r.stdout


def test_when_systemd_hears_ready_the_state_file_already_says_so(tmp_path, processes):
    """`systemctl start beacond` returns at READY=1 (Type=notify), as `systemctl reload` does at a reload's READY=1,
    and a script's next line is often `beacond status`: by then the state file must say what READY=1 says (on the
    air; the reload applied, or refused). It was written after the datagram went out, at the end of the lifecycle's
    step: a reader woken by READY=1 could find the state before it. Each READY=1 here is read from a socket of the
    test's own, and the state file at once."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    run_dir = tmp_path / 'run'
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(tmp_path / 'notify.sock'))
    listener.settimeout(20)
    env = {'RUNTIME_DIRECTORY': str(run_dir), 'NOTIFY_SOCKET': str(tmp_path / 'notify.sock')}

    def state_at_ready():
        while 'READY=1' not in listener.recv(4096).decode().split('\n'):
            pass
        return output_schema.loads('state', (run_dir / 'state.json').read_text())

    sock = tmp_path / 'hci.sock'
    try:
        with Lab(f'unix-server:{sock}'):
            b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
            st = state_at_ready()
            assert st['phase'] == 'advertising' and st['beacons'][0]['on_air'] is True, st
            conf.write_text(IB.replace('minor = 2', 'minor = 3'))
            b.signal(signal.SIGHUP)
            st = state_at_ready()
            assert st['reload'] == {'count': 1, 'result': 'applied'} and st['beacons'][0]['identity']['minor'] == 3, st
            conf.write_text(IB.replace('minor = 2', 'minor = "three"'))
            b.signal(signal.SIGHUP)
            st = state_at_ready()
            assert st['reload']['count'] == 2 and st['reload']['result'] == 'refused', st
    finally:
        listener.close()


def test_reload_of_a_refused_file_then_a_fixed_one_and_status_without_json_lists_problems(tmp_path, processes):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    run_dir = tmp_path / 'run'
    env = {'RUNTIME_DIRECTORY': str(run_dir)}
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', extended=False) as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
        wait_for(lambda: lab.advertising(), 10, what='advertising')
        wait_for(lambda: status(conf, env)[0] == 0, 5, what='status ok')
        conf.write_text(IB.replace(APPLE_UUID, 'nope'))
        r = cli('reload', '--config', str(conf), env=env)
        assert r.returncode == 78 and f'{conf} was refused (1 error, on line 2;' in r.stderr, r.stderr
        t = cli('status', '--config', str(conf), env=env)
        assert t.returncode == 1 and 'Problems:' in t.stdout and 'the last reload was refused' in t.stdout
        assert 'legacy advertising' in t.stdout
        # The file on the air put back without a reload (a hand edit undone): the refusal is history, not a problem
        # that fails every deployment after it.
        conf.write_text(IB)
        e = cli('status', '--json', '--config', str(conf), '--expect-sha256', hashlib.sha256(conf.read_bytes()).hexdigest(), env=env)
        assert e.returncode == 0 and output_schema.loads('status', e.stdout)['problems'] == [], e.stdout
        conf.write_text(IB.replace('minor = 2', 'minor = 9'))
        # What a deployment waits on: the file it wrote is not on the air until the reload takes it.
        wanted = hashlib.sha256(conf.read_bytes()).hexdigest()
        e = cli('status', '--json', '--config', str(conf), '--expect-sha256', wanted.upper(), env=env)
        st = output_schema.loads('status', e.stdout)
        assert e.returncode == 1 and st['ok'] is False, e.stdout
        assert any(f'runs another config (SHA-256 ' in p and f'than expected ({wanted[:12]}…)' in p for p in st['problems']), st['problems']
        assert cli('status', '--expect-sha256', 'beef', env=env).returncode == 64
        r = cli('reload', '--config', str(conf), env=env)
        assert r.returncode == 0, r.stderr
        assert lab.advertising()[1]['data'] == ibeacon_bytes(major=1, minor=9)
        e = cli('status', '--json', '--config', str(conf), '--expect-sha256', wanted, env=env)
        assert e.returncode == 0 and output_schema.loads('status', e.stdout)['ok'] is True and output_schema.loads('status', e.stdout)['problems'] == [], e.stdout
        code, st = status(conf, env)
        (d,) = st['daemons']
        assert code == 0 and d['reload'] == {'count': 2, 'result': 'applied'} and d['last_refused'] is not None
        assert d['controller']['family'] == 'legacy' and d['controller']['sets'] is None


def test_check_reports_what_the_controller_says_and_what_run_would_do(tmp_path):
    """status --check on an H4 controller (Bumble): its own LE answers, and run's plan for the config; then a config
    with more beacons than the controller has sets: a problem naming both numbers, exit 1."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + EDDY)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', max_sets=6) as lab:
        r = cli('status', '--check', '--json', '--config', str(conf), '--device', f'unix:{sock}', env={})
        assert r.returncode == 0, r.stdout + r.stderr
        c = output_schema.loads('check', r.stdout)
        assert c['ok'] is True and c['problems'] == []
        assert c['hci']['extended_advertising'] is True and c['hci']['sets'] == 6 and c['hci']['bluetooth_version'] == '5.0'
        assert c['hci']['manufacturer'] == lab.controller.manufacturer_company_identifier
        assert c['run']['backend'] == 'hci' and c['run']['family'] == 'extended'
        assert c['run']['sharing'] == 'each beacon on its own advertising set (3 of 6)'
        assert c['mgmt'] is None  # an H4 controller: no kernel device
        # Nothing went on the air: the check asks, it does not advertise.
        assert not any(s['enabled'] for s in lab.state()['sets'].values())
    with Lab(f'unix-server:{sock}', max_sets=2) as lab:
        r = cli('status', '--check', '--config', str(conf), '--device', f'unix:{sock}', env={})
        assert r.returncode == 1
        assert 'the config has 3 beacons, but the controller on unix:' in r.stdout and 'has 2 advertising sets' in r.stdout
    with Lab(f'unix-server:{sock}', extended=False) as lab:
        r = cli('status', '--check', '--config', str(conf), '--device', f'unix:{sock}', env={})
        assert r.returncode == 0, r.stdout
        assert 'legacy advertising, time slices of the controller\'s one advertiser (3 beacons take turns)' in r.stdout
        assert 'extended advertising no' in r.stdout


def test_check_names_a_config_mistake_with_its_place_and_exits_78(tmp_path):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB.replace('major = 1', 'major = -1'))
    r = cli('status', '--check', '--config', str(conf), '--device', 'unix:/nonexistent/hci.sock', env={})
    assert r.returncode == 78
    assert f'{conf}:3:9: error:' in r.stdout


def test_check_leaves_an_h4_controller_a_running_beacond_owns_alone(tmp_path, processes):
    """Bug (review): status --check opened the H4 controller of a running beacond and reset it under it."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    env = {'RUNTIME_DIRECTORY': str(tmp_path / 'run')}
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
        wait_for(lambda: status(conf, env)[0] == 0, 10, what='status ok')
        commands = len(lab.state()['commands'])
        r = cli('status', '--check', '--json', '--config', str(conf), '--device', f'unix:{sock}', env=env)
        c = output_schema.loads('check', r.stdout)
        assert r.returncode == 0 and c['hci'] is None and 'owns the controller' in c['hci_error'], c
        assert any('runs on unix:' in n for n in c['run']['notes']), c
        assert len(lab.state()['commands']) == commands  # not one command more: no reset, no probe
        assert [s['data'] for s in enabled_sets(lab).values()] == [IB_BYTES]


def test_check_leaves_alone_a_controller_a_running_beacond_owns_under_another_spelling(tmp_path, processes):
    """bug (review #43): status --check on `unix:…/./hci.sock` reset the controller a beacond on `unix:…/hci.sock`
    drives: the hands-off rule compared the strings."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    env = {'RUNTIME_DIRECTORY': str(tmp_path / 'run')}
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
        wait_for(lambda: status(conf, env)[0] == 0, 10, what='status ok')
        commands = len(lab.state()['commands'])
        r = cli('status', '--check', '--json', '--config', str(conf), '--device', f'unix:{tmp_path}/./hci.sock', env=env)
        c = output_schema.loads('check', r.stdout)
        assert c['hci'] is None and 'owns the controller' in c['hci_error'], c
        assert len(lab.state()['commands']) == commands  # no reset, no probe
        assert [s['data'] for s in enabled_sets(lab).values()] == [IB_BYTES]


def killed_hand_run(tmp_path, processes, open_tmp):
    """A hand run (its runtime directory in $XDG_RUNTIME_DIR) killed once status saw it: its config, the environment
    and the directory it left."""
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
    return conf, env, xdg / f'beacond.{b.proc.pid}'


def test_a_state_file_a_killed_run_left_is_stale_whatever_has_its_pid_now(tmp_path, processes, open_tmp):
    """bug (review #43): a SIGKILLed hand run left /run/beacond.PID/state.json; `status` then called whatever process
    had that pid later "advertising" (exit 0), and root's `reload` sent SIGHUP to it. Now the daemon holds its
    directory's lock for its lifetime: a free lock is a dead daemon, whatever has its pid, and such a directory is
    removed when found."""
    import shutil
    conf, env, left = killed_hand_run(tmp_path, processes, open_tmp)
    assert (left / 'state.json').exists()
    # Another process gets that pid: here, one whose pid the leftover is made to name.
    other = subprocess.Popen(['sleep', '60'])
    try:
        reused = left.parent / f'beacond.{other.pid}'
        state = json.loads((left / 'state.json').read_text())
        state['pid'] = other.pid
        (left / 'state.json').write_text(json.dumps(state))
        left.rename(reused)
        shutil.copytree(reused, tmp_path / 'leftover', symlinks=True)
        r = cli('status', '--config', str(conf), env=env)
        assert r.returncode == 3 and 'No beacond is running' in r.stdout, r.stdout + r.stderr
        assert not reused.exists()  # stale: removed
        shutil.copytree(tmp_path / 'leftover', reused, symlinks=True)
        r = cli('reload', '--pid', str(other.pid), '--timeout', '2', env=env)
        assert r.returncode == 3, r.stdout + r.stderr
        time.sleep(0.2)
        assert other.poll() is None, 'reload signalled the process that has the pid now'
    finally:
        other.kill()
        other.wait()


def test_a_hand_run_leaves_no_runtime_directory_behind(tmp_path, processes, open_tmp):
    """bug (review #43): every hand run left an empty beacond.PID directory in /run (or $XDG_RUNTIME_DIR) behind; they
    piled up. A run removes its own at exit."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    xdg = open_tmp / 'xdg'
    xdg.mkdir(mode=0o700)
    env = {'XDG_RUNTIME_DIR': str(xdg)}
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        for _ in range(2):
            b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
            wait_for(lambda: status(conf, env)[0] == 0, 10, what='status ok')
            assert (xdg / f'beacond.{b.proc.pid}' / 'state.json').exists()
            assert b.stop() == 0
    assert list(xdg.iterdir()) == []


def test_a_state_file_that_cannot_be_read_is_a_running_beacond_and_reload_pid_still_signals_it(tmp_path, processes):
    """bug (review #43): a refused reload with thousands of errors made state.json 5.5 MB (readers take 1 MiB);
    `status` then said no beacond runs, and `reload` never signalled again (exit 3). The state is capped now
    (RuntimeStateTests); a file that cannot be read all the same is a running beacond whose state is unreadable, and
    `reload --pid` signals it and waits for a state it can read."""
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB)
    run_dir = tmp_path / 'run'
    env = {'RUNTIME_DIRECTORY': str(run_dir)}
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env=env)
        wait_for(lambda: status(conf, env)[0] == 0, 10, what='status ok')
        (run_dir / 'state.json').write_text('{"pid": %d, "x": "%s"}' % (b.proc.pid, 'x' * (2 << 20)))
        r = cli('status', '--config', str(conf), env=env)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f'beacond (pid {b.proc.pid}, by hand): running (pid {b.proc.pid}), state unreadable: {run_dir}/state.json is larger than 1 MiB' in r.stdout, r.stdout
        conf.write_text(IB.replace('minor = 2', 'minor = 5'))
        r = cli('reload', '--pid', str(b.proc.pid), env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert [s['data'] for s in enabled_sets(lab).values()] == [ibeacon_bytes(major=1, minor=5)]
        assert status(conf, env)[0] == 0


def test_status_calls_only_the_units_own_directories_units_and_reads_no_other_users(tmp_path, open_tmp):
    """bug (review #43): root's `status` called any $XDG_RUNTIME_DIR/beacond/ "beacond.service", whoever owned it.
    Only /run/beacond and /run/beacond-* owned by root or the units' user are units; a directory of another user's is
    not read at all."""
    from conftest import NOBODY
    theirs = open_tmp / 'xdg'
    theirs.mkdir()
    fake = theirs / 'beacond'
    fake.mkdir()
    for p in (theirs, fake):
        os.chown(p, 65534, 65534)
    holder = subprocess.Popen([*NOBODY, 'flock', '-o', str(fake / 'lock'), 'sleep', '60'])
    try:
        wait_for(lambda: (fake / 'lock').exists(), 5, what="nobody's lock")
        (fake / 'state.json').write_text(json.dumps({
            'version': '0.3.0', 'pid': holder.pid, 'config': {'path': '/etc/beacond/fake.conf', 'sha256': '0' * 64},
            'phase': 'advertising', 'status': 'Advertising whatever nobody says', 'controller': {'device': 'hci0'},
            'beacons': [], 'reload': {'count': 0, 'result': None}, 'last_refused': None, 'clock': None}))
        os.chown(fake / 'state.json', 65534, 65534)
        r = cli('status', '--json', '--config', '/etc/beacond/fake.conf', env={'XDG_RUNTIME_DIR': str(theirs)})
        out = output_schema.loads('status', r.stdout)
        assert out['daemons'] == [] and r.returncode == 3, out
    finally:
        holder.kill()
        holder.wait()
