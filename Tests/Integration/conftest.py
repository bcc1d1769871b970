"""Shared fixtures: the built beacond binary, a Bumble radio lab, config files, a beacond process, NOTIFY_SOCKET."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness.lab import Lab, wait_for
from harness.notify import NotifyListener

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / 'Tests' / 'Fixtures'
APPLE_UUID = 'E2C56DB5-DFFB-48D2-B060-D0F5A71096E0'


def beacond_path() -> Path:
    path = Path(os.environ.get('BEACOND', ROOT / '.build' / 'debug' / 'beacond'))
    if not path.exists():
        pytest.exit(f'beacond binary not found at {path}: build it first (make build) or set BEACOND', returncode=2)
    return path


@pytest.fixture(scope='session')
def beacond() -> Path:
    return beacond_path()


def run_cli(*args: str, check: bool = False, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(beacond_path()), *args], capture_output=True, text=True, timeout=60, check=check, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def config_text(uuid: str = APPLE_UUID, major: int = 1, minor: int = 1, measured_power: int = -59,
                interval_ms: int = 100, connectable: bool = False, tx_power: int | None = None, extra: str = '') -> str:
    text = (f'[beacon]\nuuid = "{uuid}"\nmajor = {major}\nminor = {minor}\nmeasured_power = {measured_power}\n\n'
            f'[advertising]\ninterval_ms = {interval_ms}\nconnectable = {"true" if connectable else "false"}\n')
    if tx_power is not None:
        text += f'tx_power = {tx_power}\n'
    return text + extra


def ibeacon_bytes(uuid: str = APPLE_UUID, major: int = 1, minor: int = 1, power: int = -59) -> bytes:
    """The expected frame, written out independently of beacond's code."""
    return (bytes.fromhex('0201061aff4c000215') + bytes.fromhex(uuid.replace('-', ''))
            + major.to_bytes(2, 'big') + minor.to_bytes(2, 'big') + power.to_bytes(1, 'big', signed=True))


class Beacond:
    """A running `beacond run` with its stderr collected line by line."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([str(beacond_path()), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})
        self.lines: list[str] = []
        self.exited_at: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip('\n'))

    def log(self) -> str:
        return '\n'.join(self.lines)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 10.0) -> int:
        rc = self.proc.wait(timeout=timeout)
        self.exited_at = time.monotonic()
        self._reader.join(timeout=2)
        return rc

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                return self.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.wait(5)


@pytest.fixture(autouse=True)
def state_directory(tmp_path_factory, monkeypatch):
    """Where `address = "static"` keeps its address, as systemd's StateDirectory= would give it: one per test."""
    d = tmp_path_factory.mktemp('state')
    monkeypatch.setenv('STATE_DIRECTORY', str(d))
    return d


def on_a_terminal(args: list[str], timeout: float = 10) -> str:
    """What a command prints on a terminal (a pty), once it has exited 0."""
    import pty
    primary, replica = pty.openpty()
    p = subprocess.Popen(args, stdout=replica, stderr=subprocess.PIPE)
    os.close(replica)
    out = b''
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert p.wait(timeout) == 0
    os.close(primary)
    return out.decode()


def stated_intervals(conf, run_dir) -> list[int]:
    """Each beacon's interval as `beacond status --json` states it for the daemon whose runtime directory is run_dir
    (ms), in config order: what the time slices achieve on its controller."""
    import json
    r = subprocess.run([str(beacond_path()), 'status', '--json', '--config', str(conf)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, 'RUNTIME_DIRECTORY': str(run_dir)})
    return [x['interval_ms'] for x in json.loads(r.stdout)['daemons'][0]['beacons']]


def kept_addresses(state_directory: Path) -> dict[str, str]:
    """The state directory's addresses file: each beacon's identity → its static address."""
    out = {}
    for line in (state_directory / 'addresses').read_text().splitlines():
        if line and not line.startswith('#'):
            address, key = line.split(' ', 1)
            out[key] = address
    return out


def kept_address(state_directory: Path) -> str:
    """The one static address kept (a config with one beacon)."""
    (address,) = kept_addresses(state_directory).values()
    return address


@pytest.fixture
def notify(tmp_path: Path):
    n = NotifyListener(tmp_path)
    yield n
    n.close()


@pytest.fixture
def processes():
    started: list[Beacond] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Beacond:
        b = Beacond(list(args), env)
        started.append(b)
        return b

    yield start
    for b in started:
        if b.proc.poll() is None:
            b.proc.kill()
            b.proc.wait()


NOBODY = ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups']


def as_nobody(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """beacond run as user nobody (no group of root's): what another local user can read, or do to root's beacond."""
    return subprocess.run([*NOBODY, str(beacond_path()), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def open_tmp():
    """A directory of root's that every user may enter and read (pytest's own are 0700): for what nobody reads."""
    import shutil
    import tempfile
    d = Path(tempfile.mkdtemp(prefix='beacond-test-'))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tcp_lab():
    """A Bumble lab reached over TCP: (lab, device spec)."""
    port = free_port()
    with Lab(f'tcp-server:127.0.0.1:{port}') as lab:
        yield lab, f'tcp:127.0.0.1:{port}'
