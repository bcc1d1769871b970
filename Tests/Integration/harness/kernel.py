"""The kernel's side of an adapter beacond shares, played on the lab's controller: Home Assistant's active discovery as
Linux runs it (a kernel personality).

On a kernel hciN, beacond's raw HCI socket also receives a copy of every command the kernel itself sends (hci_core.c
hci_send_frame → hci_send_to_sock while a raw socket is open), and the kernel's commands act on the controller
beacond advertises with. Active discovery (bluetoothd's StartDiscovery, which Home Assistant's scanner uses unless
its adapter is set to passive) restarts the LE scan every 10.24 s (DISCOV_LE_TIMEOUT) and, with privacy off, gives
each start a new non-resolvable private address of its own (hci_sync.c hci_active_scan_sync →
hci_update_random_address_sync). The kernel defers that write while legacy advertising is enabled and a random
address is set (hci_set_random_addr_sync: HCI_LE_ADV), and writes it otherwise, as between two of beacond's time
slices. /tmp/research notes and bluez/bluetooth-next #601, #672, #781 are the sources.

KernelDiscovery does that to the lab controller on the lab's loop: every `period` seconds scan off, the address
(deferred or written), scan parameters, scan on; each through the controller's rules as another host's command
(LabController.kernel_command: the chip's refusals apply), and each sent to beacond as an H4 command packet, as the
raw channel delivers the kernel's copies. With `race=True` the first start's address lands right after beacond's own LE Set
Random Address of a time slice, before that slice's enable: an order the kernel's command queue allows, and the one
that put beacons on the kernel's address.
"""
from __future__ import annotations

import asyncio
import random
from typing import Any

from bumble import hci

SET_RANDOM_ADDRESS = hci.HCI_LE_SET_RANDOM_ADDRESS_COMMAND
SET_SCAN_PARAMETERS = hci.HCI_LE_SET_SCAN_PARAMETERS_COMMAND
SET_SCAN_ENABLE = hci.HCI_LE_SET_SCAN_ENABLE_COMMAND


def command_packet(opcode: int, parameters: bytes) -> bytes:
    """The H4 bytes of a command (type 0x01, opcode little-endian, length, parameters)."""
    return bytes([hci.HCI_COMMAND_PACKET, opcode & 0xFF, opcode >> 8, len(parameters)]) + parameters


class KernelDiscovery:
    """Active discovery by the kernel on the lab's beacond controller. Use start() and stop() from the test thread."""

    def __init__(self, lab: Any, period: float = 10.24, race: bool = False, seed: int = 7) -> None:
        self.lab = lab
        self.period = period
        self.race = race
        self.rng = random.Random(seed)
        self.addresses: list[str] = []  # every address the kernel got onto the controller ('XX:…', MSB first)
        self.deferred = 0  # starts whose address write the kernel deferred (beacond's advertising was on)
        self.refused = 0  # address writes the controller refused
        self.starts = 0
        self._task: asyncio.Task | None = None
        self._raced = False

    # -- on the lab's loop ---------------------------------------------------------------------------------------
    def _copy(self, opcode: int, parameters: bytes) -> None:
        c = self.lab.controller
        if c.host:
            c.host.on_packet(command_packet(opcode, parameters))

    def _nrpa(self) -> bytes:
        # Six random bytes, the two top bits of the most significant (last, little-endian) byte 00.
        b = bytearray(self.rng.getrandbits(8) for _ in range(6))
        b[5] &= 0x3F
        return bytes(b)

    def _write_address(self) -> None:
        c = self.lab.controller
        if c.le_legacy_advertiser.enabled and bytes(c.random_address) != bytes(6):
            self.deferred += 1  # hci_set_random_addr_sync: HCI_LE_ADV set, so the kernel keeps the address there
            return
        nrpa = self._nrpa()
        self._copy(SET_RANDOM_ADDRESS, nrpa)
        if c.kernel_command(SET_RANDOM_ADDRESS, nrpa) != 0:
            self.refused += 1  # the kernel then scans from its public address
            return
        self.addresses.append(':'.join(f'{x:02X}' for x in reversed(nrpa)))

    def _command(self, opcode: int, parameters: bytes) -> None:
        """One of the kernel's commands: its copy to beacond, then the controller's rules and state (LabController)."""
        self._copy(opcode, parameters)
        self.lab.controller.kernel_command(opcode, parameters)

    def _start_scan(self) -> None:
        self.starts += 1
        if self.lab.controller.le_scan_enable:
            self._command(SET_SCAN_ENABLE, bytes([0, 0]))  # hci_scan_disable_sync: only when scanning
        self._write_address()
        self._command(SET_SCAN_PARAMETERS, bytes([1, 0x12, 0x00, 0x12, 0x00, 1, 0]))
        self._command(SET_SCAN_ENABLE, bytes([1, 0]))

    def _on_beacond_command(self, opcode: int) -> None:
        # The race: the kernel's first start right behind beacond's own address, before the slice's enable goes out
        # (call_soon runs after the controller answered beacond's command).
        if opcode == SET_RANDOM_ADDRESS and not self._raced:
            self._raced = True
            asyncio.get_running_loop().call_soon(self._start_scan)

    async def _run(self) -> None:
        if not self.race:
            self._start_scan()
        while True:
            await asyncio.sleep(self.period)
            self._start_scan()

    # -- from the test thread -------------------------------------------------------------------------------------
    def start(self) -> None:
        def go() -> None:
            if self.race:
                self.lab.controller.on_command = self._on_beacond_command
            self._task = asyncio.get_running_loop().create_task(self._run())
        self.lab.call(go)

    def stop(self) -> None:
        """Discovery ends: the scan off, for good."""
        def go() -> None:
            if self._task:
                self._task.cancel()
            self.lab.controller.on_command = None
            if self.lab.controller.le_scan_enable:
                self._command(SET_SCAN_ENABLE, bytes([0, 0]))
        self.lab.call(go)


class AirSampler:
    """What the lab controller's legacy advertiser carries, sampled every few milliseconds from the test thread: for
    each time, whether it is enabled, its data and the address it goes out from. The controller's own side of 'on
    the air', free of the lab scanner's timing (its legacy advertiser transmits on a timer of its own, which beats
    against beacond's slots)."""

    def __init__(self, lab: Any, every: float = 0.005) -> None:
        import threading
        self.lab, self.every = lab, every
        self.samples: list[tuple[float, bool, bytes, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _snap(self) -> tuple[bool, bytes, str]:
        a = self.lab.controller.le_legacy_advertiser
        return a.enabled, bytes(a.advertising_data), str(a.address).split('/')[0]

    def _run(self) -> None:
        import time
        while not self._stop.is_set():
            enabled, data, address = self.lab.call(self._snap)
            self.samples.append((time.monotonic(), enabled, data, address))
            time.sleep(self.every)

    def __enter__(self) -> 'AirSampler':
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def on_air(self, data: bytes, since: float, until: float) -> list[tuple[float, str]]:
        """(time, address) of every sample in [since, until] with `data` enabled."""
        return [(t, a) for t, e, d, a in self.samples if since <= t <= until and e and d == data]

    def longest_off_ms(self, data: bytes, since: float, until: float) -> float:
        """The longest stretch in [since, until] without a sample of `data` on the air, less the sampling's grain (the
        longest time between two samples there, twice: a stretch can start just after one sample and end just before
        another), so that it never exceeds the time the controller really had it off."""
        times = [t for t, _ in self.on_air(data, since, until)]
        points = [since] + times + [until]
        return 1000 * (max(b - a for a, b in zip(points, points[1:])) - 2 * self.grain(since, until))

    def grain(self, since: float, until: float) -> float:
        """The longest time between two consecutive samples in [since, until], in seconds."""
        t = [s[0] for s in self.samples if since <= s[0] <= until]
        return max((b - a for a, b in zip(t, t[1:])), default=0.0)
