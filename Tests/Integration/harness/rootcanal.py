"""A second radio lab for beacond's integration tests: Google's RootCanal, Android's virtual controller (issue #54).

RootCanal (PyPI `rootcanal`, pinned in ../requirements.txt) is a stricter controller than Bumble's: it refuses what
the Core spec lets a controller refuse (Command Disallowed for parameter and random-address changes while advertising,
for extended commands after legacy ones), starts a legacy advertiser's first event one interval after the enable, and
answers each command some 45 ms after it arrives (../shared/guide/testing-facts.md). It emulates no baseband
scheduler: keep time bounds loose, use it for conformance and for "is it heard at all".

What RootCanal(legacy) gives a test:
  * `device`: `tcp:127.0.0.1:PORT` for beacond's --device. beacond's connection goes through a small H4 proxy in
    this process that records every command and every Command Complete / Command Status, so a test sees what
    RootCanal refused (`refused()`) and how long it took to answer (`latencies()`). proxy=False hands out RootCanal's
    own port instead.
  * `received`: what a second client heard: a Bumble host on its own RootCanal controller (the same LE radio, over
    TCP H4), scanning without duplicate filtering; each report with its time, address and data, as lab.py's.
  * `log()`: RootCanal's own log (stdout and stderr, colours stripped). It names each command as it arrives and says
    why it refused one, at level I, without the status ("legacy advertising is enabled" for LE Set Advertising
    Parameters, "advertising, scanning or initiating are currently active" for LE Set Random Address, "Unknown
    command, opcode: 0x2036" for an extended command on the legacy-only controller): the statuses come from the proxy.

legacy=True serves beacond a controller without LE extended advertising (and without LL privacy, 2M and Coded PHY):
a Pi-like legacy part, from RootCanal's per-port configuration (proto/rootcanal/configuration.proto in
google/rootcanal: `tcp_server { tcp_port: P configuration { features { le_extended_advertising: false ... } } }`).
legacy=False serves it the default controller (Core 5.3, advertising sets). The scanner's controller is the default
one either way (scanner_legacy=True gives it the legacy-only one), so it hears legacy and extended PDUs alike.

The binary in the wheel needs glibc 2.39 and GLIBCXX_3.4.32, newer than Debian 12's: it runs through the dynamic loader
and libraries of the Debian 13 (trixie) build root that scripts/buildroot.sh makes and CI caches. Without that root
(or without the package) this fails loudly; it never skips.
"""
from __future__ import annotations

import asyncio
import dataclasses
import glob
import hashlib
import os
import platform
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bumble import hci
from bumble.device import Device
from bumble.transport import open_transport

ROOT = Path(__file__).resolve().parent.parent.parent.parent
BUILDROOT_SCRIPT = ROOT / 'scripts' / 'buildroot.sh'
LEGACY_FEATURES = 'le_extended_advertising: false ll_privacy: false le_2m_phy: false le_coded_phy: false'
SCANNER_ADDRESS = 'C0:C1:C2:C3:C4:C5'  # a static random address for the scanning host
# RootCanal's own two beacons, which every scanner hears (test_command_handler.cc: "Add beacon@be:ac:01:55:00:0N").
ROOTCANAL_BEACONS = ('BE:AC:01:55:00:01', 'BE:AC:01:55:00:02')


class RootCanalUnavailable(RuntimeError):
    """RootCanal cannot run on this machine: says what is missing and how to get it."""


# -- finding the pieces ------------------------------------------------------------------------------------------------
def rootcanal_binary() -> Path:
    """The prebuilt linux-x86_64 binary in the installed `rootcanal` wheel."""
    if platform.machine() != 'x86_64':
        raise RootCanalUnavailable(f'RootCanal: the rootcanal wheel carries a Linux binary for x86_64 only, this machine is '
                                   f'{platform.machine()}')
    try:
        import rootcanal.binaries
    except ImportError as e:
        raise RootCanalUnavailable(f'RootCanal: the Python package `rootcanal` is not installed in this venv ({e}): install '
                                   f'Tests/Integration/requirements.txt (make venv)') from e
    path = Path(rootcanal.binaries.get_package_binary_resource_path('rootcanal'))
    if not path.is_file():
        raise RootCanalUnavailable(f'RootCanal: the rootcanal package has no binary at {path}')
    return path


def trixie_root() -> Path:
    """The Debian 13 build root whose loader runs RootCanal: the one scripts/buildroot.sh's current key names, else the
    newest complete trixie-amd64 root in the cache (any of them has trixie's libc6, libstdc++6 and libgcc-s1)."""
    cache = Path(os.environ.get('BEACOND_BUILDROOT_CACHE', '/var/cache/beacond-buildroot'))
    key = hashlib.sha256(BUILDROOT_SCRIPT.read_bytes()).hexdigest()[:16]
    current = cache / f'trixie-amd64-{key}'
    candidates = [current] + sorted((Path(p) for p in glob.glob(str(cache / 'trixie-amd64-*'))
                                     if not p.endswith(('.lock', '.tmp'))), key=lambda p: p.stat().st_mtime, reverse=True)
    for root in candidates:
        if (root / '.complete').is_file() and (root / 'lib64' / 'ld-linux-x86-64.so.2').exists():
            return root
    raise RootCanalUnavailable(
        '\n'
        '================================================================================================\n'
        f'RootCanal NEEDS THE DEBIAN 13 (trixie) BUILD ROOT, and there is none in {cache}\n'
        '(no complete trixie-amd64-*/ with lib64/ld-linux-x86-64.so.2).\n'
        "RootCanal's binary needs glibc 2.39 and GLIBCXX_3.4.32, newer than Debian 12's, so it runs through that\n"
        "root's loader. Make the root (as root, needs debootstrap and the machine's Debian mirror):\n"
        '    sudo sh scripts/buildroot.sh amd64\n'
        '(or set BEACOND_BUILDROOT_CACHE to where CI keeps it). These tests do not skip without it.\n'
        '================================================================================================')


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(('127.0.0.1', 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def listening(port: int) -> bool:
    """True when something listens on TCP `port` (read from /proc, so no connection is made: every connection to a
    RootCanal HCI port would make a controller)."""
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == '0A' and int(fields[1].rsplit(':', 1)[1], 16) == port:
                return True
    return False


# -- what the proxy records --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Command:
    at: float
    opcode: int
    parameters: bytes


@dataclasses.dataclass
class Answer:
    """A Command Complete (kind 'complete') or Command Status ('status') event towards beacond."""
    at: float
    opcode: int
    status: int | None  # None: a Command Complete without return parameters
    kind: str


@dataclasses.dataclass
class Received:
    at: float
    address: str
    data: bytes
    connectable: bool
    rssi: int
    legacy: bool
    scan_response: bool


class H4Stream:
    """Splits one direction of an H4 byte stream into packets: (type, header+payload) per packet."""

    # type → (header length, offset and size of the length field, its mask)
    HEADERS = {0x01: (3, 2, 1, 0xFF), 0x02: (4, 2, 2, 0xFFFF), 0x03: (3, 2, 1, 0xFF), 0x04: (2, 1, 1, 0xFF),
               0x05: (4, 2, 2, 0x3FFF)}

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.broken: str | None = None

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        if self.broken:
            return []
        self.buffer += data
        out = []
        while self.buffer:
            kind = self.buffer[0]
            if kind not in self.HEADERS:
                self.broken = f'unknown H4 packet type 0x{kind:02x}'
                return out
            header, at, size, mask = self.HEADERS[kind]
            if len(self.buffer) < 1 + header:
                break
            length = int.from_bytes(self.buffer[1 + at:1 + at + size], 'little') & mask
            if len(self.buffer) < 1 + header + length:
                break
            out.append((kind, bytes(self.buffer[1:1 + header + length])))
            del self.buffer[:1 + header + length]
        return out


# -- the lab -------------------------------------------------------------------------------------------------------
class RootCanal:
    """RootCanal with beacond's controller (legacy-only or default), a proxy that records beacond's commands and their
    answers, and a scanning Bumble host on the same radio. Use as a context manager."""

    def __init__(self, legacy: bool, *, scan: bool = True, active_scan: bool = False, scanner_legacy: bool = False,
                 proxy: bool = True, workdir: str | Path | None = None, startup_timeout: float = 10.0) -> None:
        # First what RootCanal needs, so a machine without it fails here, loudly, before anything is made.
        self.binary = rootcanal_binary()
        self.buildroot = trixie_root()
        self.legacy = legacy
        self.scan = scan
        self.active_scan = active_scan
        self.scanner_legacy = scanner_legacy
        self.use_proxy = proxy
        self.startup_timeout = startup_timeout
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix='rootcanal-'))
        self.beacond_port, self.scanner_port, self.test_port, self.link_port, self.link_ble_port, self.proxy_port = \
            free_ports(6)
        self.process: subprocess.Popen | None = None
        self.startup_s: float | None = None  # exec → beacond's HCI port listening
        self.scanner_ready_s: float | None = None  # the scanning host powered on and scanning
        self.received: list[Received] = []
        self.commands: list[Command] = []  # beacond's commands, in arrival order at the proxy
        self.answers: list[Answer] = []  # Command Complete / Command Status towards beacond
        self.connections = 0  # beacond's connections through the proxy
        self.public_address: str | None = None  # beacond's controller's, from its answer to Read BD_ADDR
        self.proxy_errors: list[str] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._pipes: list[asyncio.StreamWriter] = []
        self._scanner_transport = None
        self.scanner: Device | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def device(self) -> str:
        """beacond's --device: the proxy's port, or RootCanal's own with proxy=False."""
        return f'tcp:127.0.0.1:{self.proxy_port if self.use_proxy else self.beacond_port}'

    @property
    def loader_command(self) -> list[str]:
        r = self.buildroot
        return [str(r / 'lib64' / 'ld-linux-x86-64.so.2'), '--library-path',
                f'{r}/lib/x86_64-linux-gnu:{r}/usr/lib/x86_64-linux-gnu', str(self.binary)]

    def configuration(self) -> str:
        beacond = f'configuration {{ features {{ {LEGACY_FEATURES} }} }}' if self.legacy else ''
        scanner = f'configuration {{ features {{ {LEGACY_FEATURES} }} }}' if self.scanner_legacy else ''
        return (f'tcp_server {{ tcp_port: {self.beacond_port} {beacond} }}\n'
                f'tcp_server {{ tcp_port: {self.scanner_port} {scanner} }}\n')

    def __enter__(self) -> 'RootCanal':
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / 'rootcanal.textproto'
        config.write_text(self.configuration())
        self.log_path = self.workdir / 'rootcanal.log'
        log = open(self.log_path, 'wb')
        start = time.monotonic()
        # The hci_port flag is unused once a configuration file names the ports; give it a free one all the same.
        self.process = subprocess.Popen(
            [*self.loader_command, f'-configuration_file={config}', f'-hci_port={free_ports(1)[0]}',
             f'-test_port={self.test_port}', f'-link_port={self.link_port}', f'-link_ble_port={self.link_ble_port}'],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        log.close()
        try:
            deadline = start + self.startup_timeout
            while not (listening(self.beacond_port) and listening(self.scanner_port)):
                if self.process.poll() is not None:
                    raise RuntimeError(f'RootCanal exited with {self.process.returncode} before listening:\n{self.log()[-3000:]}')
                if time.monotonic() > deadline:
                    raise RuntimeError(f'RootCanal did not listen on {self.beacond_port} and {self.scanner_port} within '
                                       f'{self.startup_timeout} s:\n{self.log()[-3000:]}')
                time.sleep(0.002)
            self.startup_s = time.monotonic() - start
            self._thread.start()
            if self.use_proxy:
                self.call(self._start_proxy)
            if self.scan:
                t = time.monotonic()
                self.call(self._start_scanner)
                self.scanner_ready_s = time.monotonic() - t
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self._thread.is_alive():
                try:
                    self.call(self._stop)
                finally:
                    self._loop.call_soon_threadsafe(self._loop.stop)
                    self._thread.join(timeout=5)
        finally:
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            if self._own_workdir and not exc[0]:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        try:
            text = self.log_path.read_text(errors='replace')
        except (OSError, AttributeError):
            return ''
        return re.sub(r'\x1b\[[0-9;]*m', '', text)

    # -- the scanner -------------------------------------------------------------------------------------------
    async def _start_scanner(self) -> None:
        self._scanner_transport = await open_transport(f'tcp-client:127.0.0.1:{self.scanner_port}')
        self.scanner = Device.with_hci('scanner', hci.Address(SCANNER_ADDRESS), self._scanner_transport.source,
                                       self._scanner_transport.sink)
        await self.scanner.power_on()
        self.scanner.on('advertisement', self._on_advertisement)
        await self.scanner.start_scanning(active=self.active_scan, filter_duplicates=False)

    def _on_advertisement(self, adv: Any) -> None:
        with self._lock:
            self.received.append(Received(time.monotonic(), str(adv.address), bytes(adv.data_bytes), adv.is_connectable,
                                          adv.rssi, adv.is_legacy, adv.is_scan_response))

    # -- the proxy ---------------------------------------------------------------------------------------------
    async def _start_proxy(self) -> None:
        self._server = await asyncio.start_server(self._on_connection, '127.0.0.1', self.proxy_port)

    async def _on_connection(self, down_reader: asyncio.StreamReader, down_writer: asyncio.StreamWriter) -> None:
        """One beacond connection: a new RootCanal controller behind it, bytes forwarded as they come, both ways."""
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection('127.0.0.1', self.beacond_port)
        except OSError as e:
            self.proxy_errors.append(f'cannot reach RootCanal on {self.beacond_port}: {e}')
            down_writer.close()
            return
        for w in (down_writer, up_writer):
            w.get_extra_info('socket').setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pipes.append(w)
        await asyncio.gather(self._pump(down_reader, up_writer, H4Stream(), self._host_packet),
                             self._pump(up_reader, down_writer, H4Stream(), self._controller_packet))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: H4Stream,
                    record: Callable[[float, int, bytes], None]) -> None:
        try:
            while data := await reader.read(65536):
                now = time.monotonic()
                writer.write(data)
                for kind, packet in stream.feed(data):
                    record(now, kind, packet)
                if stream.broken and stream.broken not in self.proxy_errors:
                    self.proxy_errors.append(stream.broken)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def _host_packet(self, at: float, kind: int, packet: bytes) -> None:
        if kind == 0x01:
            with self._lock:
                self.commands.append(Command(at, int.from_bytes(packet[0:2], 'little'), packet[3:]))

    def _controller_packet(self, at: float, kind: int, packet: bytes) -> None:
        if kind != 0x04:
            return
        code, body = packet[0], packet[2:]
        answer = None
        if code == 0x0E and len(body) >= 3:  # Command Complete: credits, opcode, return parameters (status first)
            answer = Answer(at, int.from_bytes(body[1:3], 'little'), body[3] if len(body) > 3 else None, 'complete')
        elif code == 0x0F and len(body) >= 4:  # Command Status: status, credits, opcode
            answer = Answer(at, int.from_bytes(body[2:4], 'little'), body[0], 'status')
        if answer is not None and answer.opcode == 0x1009 and answer.status == 0 and len(body) >= 10:  # Read BD_ADDR
            self.public_address = ':'.join(f'{b:02X}' for b in reversed(body[4:10]))
        if answer is not None and answer.opcode != 0:  # opcode 0: a credit-only event, no command's answer
            with self._lock:
                self.answers.append(answer)

    async def _stop(self) -> None:
        if self.scanner is not None:
            try:
                await asyncio.wait_for(self.scanner.stop_scanning(), 2)
            except Exception:
                pass
        if self._scanner_transport is not None:
            await self._scanner_transport.close()
        if self._server is not None:
            self._server.close()
        for w in self._pipes:
            w.close()

    # -- access from the test thread ---------------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 30) -> Any:
        """Runs fn (a coroutine function or a plain function) on the lab's loop and returns its result."""
        async def run() -> Any:
            r = fn(*args)
            if asyncio.iscoroutine(r):
                r = await r
            return r
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=timeout)

    def refused(self) -> list[tuple[int, int]]:
        """(opcode, status) of every command of beacond's that RootCanal answered with a non-zero status, in order."""
        with self._lock:
            return [(a.opcode, a.status) for a in self.answers if a.status]

    def latencies(self) -> list[tuple[int, float]]:
        """(opcode, seconds from the command at the proxy to its Command Complete / Status) for each answered command,
        pairing each answer with the oldest unanswered command of its opcode."""
        with self._lock:
            commands, answers = list(self.commands), list(self.answers)
        pending: dict[int, list[Command]] = {}
        events = sorted([(c.at, 0, c) for c in commands] + [(a.at, 1, a) for a in answers], key=lambda e: (e[0], e[1]))
        out = []
        for _, kind, item in events:
            if kind == 0:
                pending.setdefault(item.opcode, []).append(item)
            elif pending.get(item.opcode):
                out.append((item.opcode, item.at - pending[item.opcode].pop(0).at))
        return out

    def clear_received(self) -> None:
        with self._lock:
            self.received.clear()

    def heard(self, since: float = 0.0, until: float | None = None,
              match: Callable[[Received], bool] | None = None) -> list[Received]:
        """The advertising reports (not scan responses) the scanner got between since and until, RootCanal's own
        beacons left out; `match` narrows them further."""
        until = time.monotonic() if until is None else until
        with self._lock:
            return [r for r in self.received if since <= r.at <= until and not r.scan_response
                    and r.address.split('/')[0] not in ROOTCANAL_BEACONS and (match is None or match(r))]


def opcode_name(opcode: int) -> str:
    """The command's name as Bumble spells it, with its opcode."""
    return f'{hci.HCI_Command.command_name(opcode)} (0x{opcode >> 10:02x}|0x{opcode & 0x3FF:04x})'
