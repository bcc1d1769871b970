"""A radio lab for beacond's integration tests, built from Google Bumble's virtual controller.

One LocalLink (the "air"), a controller for beacond exposed over H4 (TCP or unix socket), and a second controller
with a Bumble host on the same link that scans and records what it receives. The test process runs all of it on an
asyncio loop in a background thread and reads the controllers' state directly.

Bumble's emulator has gaps (see ../shared/guide/testing-facts.md). Each workaround below is marked WORKAROUND and
says what it changes; none of them decides a test outcome on beacond's behalf:
  * legacy ADV_NONCONN_IND is stored but never put on the air, so a scanner would see nothing. The harness relays it
    as an AdvInd on the link; tests read the PDU type from the controller's own state, not from the scanner.
  * HCI Reset does not clear advertising or scanning: the harness clears them, as a real controller does.
  * the emulator never refuses a command. The harness enforces the legacy/extended mixing rule of the Core spec
    (Vol 4 Part E §3.1.1: once one family was used since reset, the other gets Command Disallowed) when asked to,
    refuses LE Set Advertising Parameters while legacy advertising is enabled (Command Disallowed, Vol 4 Part E
    §7.8.5, as real controllers and BlueZ's btdev do), and injects the faults a test names (an error status, no
    reply, a dropped connection, a Hardware Error).
  * the emulator executes every command it has a handler for and answers Read Local Supported Commands from its own
    list, which has no extended advertising commands. A controller playing a personality (personalities.py) answers
    that command with the chip's bitmap instead, Unknown HCI Command to every command outside it, and the chip's
    quirks; its mixing rule also counts scanning, initiating and the reads of the sets among the families (as
    Zephyr's controller does). Without a personality the families stay the advertising commands: test_run's family
    switch injects a refusal after LE Read Number of Supported Advertising Sets was accepted.
"""
from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any, Callable

from bumble import hci, ll
from bumble.controller import Controller, LegacyAdvertiser
from bumble.device import Device
from bumble.link import LocalLink
from bumble.transport import open_transport

from harness.personalities import Personality

LEGACY_ADV_OPCODES = {
    hci.HCI_LE_SET_ADVERTISING_PARAMETERS_COMMAND,
    hci.HCI_LE_SET_ADVERTISING_DATA_COMMAND,
    hci.HCI_LE_SET_SCAN_RESPONSE_DATA_COMMAND,
    hci.HCI_LE_SET_ADVERTISING_ENABLE_COMMAND,
    hci.HCI_LE_READ_ADVERTISING_PHYSICAL_CHANNEL_TX_POWER_COMMAND,
}
EXTENDED_ADV_OPCODES = {
    hci.HCI_LE_SET_EXTENDED_ADVERTISING_PARAMETERS_COMMAND,
    hci.HCI_LE_SET_EXTENDED_ADVERTISING_DATA_COMMAND,
    hci.HCI_LE_SET_EXTENDED_SCAN_RESPONSE_DATA_COMMAND,
    hci.HCI_LE_SET_EXTENDED_ADVERTISING_ENABLE_COMMAND,
    hci.HCI_LE_REMOVE_ADVERTISING_SET_COMMAND,
    hci.HCI_LE_CLEAR_ADVERTISING_SETS_COMMAND,
    hci.HCI_LE_SET_ADVERTISING_SET_RANDOM_ADDRESS_COMMAND,
}
# The families of a controller playing a personality: scanning and initiating too, and the reads of the number of sets
# and of the largest data (Zephyr's controller, subsys/bluetooth/controller/hci/hci.c: le_set_scan_param and
# le_set_scan_enable call adv_cmds_legacy_check, le_read_num_adv_sets and le_read_max_adv_data_len adv_cmds_ext_check).
LEGACY_FAMILY = LEGACY_ADV_OPCODES | {
    hci.HCI_LE_SET_SCAN_PARAMETERS_COMMAND,
    hci.HCI_LE_SET_SCAN_ENABLE_COMMAND,
    hci.HCI_LE_CREATE_CONNECTION_COMMAND,
}
EXTENDED_FAMILY = EXTENDED_ADV_OPCODES | {
    hci.HCI_LE_SET_EXTENDED_SCAN_PARAMETERS_COMMAND,
    hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND,
    hci.HCI_LE_EXTENDED_CREATE_CONNECTION_COMMAND,
    hci.HCI_LE_READ_MAXIMUM_ADVERTISING_DATA_LENGTH_COMMAND,
    hci.HCI_LE_READ_NUMBER_OF_SUPPORTED_ADVERTISING_SETS_COMMAND,
}
# Before Core 5.0, ADV_SCAN_IND and ADV_NONCONN_IND may not go below 0x00A0 (100 ms): 4.2 Vol 2 Part E §7.8.5.
PRE_50_FLOOR = 0x00A0


@dataclasses.dataclass
class Fault:
    """Answer `opcode` with `status` (or not at all when status is None) for the next `times` commands (-1 = always),
    only those whose parameters start with `when` (e.g. b'\\x01' for an enable). `credits`: the
    Num_HCI_Command_Packets of that reply (0 = the controller takes no further command). `delay`: instead of a fault,
    the real reply, `delay` seconds late."""
    opcode: int
    status: int | None
    times: int = 1
    when: bytes = b''
    credits: int = 1
    delay: float | None = None


class RelayingLegacyAdvertiser(LegacyAdvertiser):
    def send_advertising_data(self) -> None:
        if not self.enabled:
            return
        # WORKAROUND: the stock emulator only transmits ADV_IND. Relay the other legacy types as AdvInd so the
        # scanner receives the bytes; the PDU type itself is asserted from controller state.
        self.controller.send_advertising_pdu(ll.AdvInd(advertiser_address=self.address, data=self.advertising_data))


class FloodingAdvertiser(LegacyAdvertiser):
    """A radio that cycles its identity on every advertisement, as an ESP32 can at 100 new ones a second: an
    iBeacon whose minor (and major, past 65535) counts up each time it is sent."""
    counter = 0
    base: bytes = b''

    def send_advertising_data(self) -> None:
        if not self.enabled:
            return
        n = FloodingAdvertiser.counter = FloodingAdvertiser.counter + 1
        data = self.base[:25] + (n >> 16 & 0xFFFF).to_bytes(2, 'big') + (n & 0xFFFF).to_bytes(2, 'big') + self.base[29:30]
        self.controller.send_advertising_pdu(ll.AdvInd(advertiser_address=self.address, data=data))


class LabController(Controller):
    """Bumble's controller with the harness's recording, rule enforcement and fault injection on the command path."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.le_legacy_advertiser = RelayingLegacyAdvertiser(self)
        self.commands: list[tuple[float, int, bytes]] = []  # (time, opcode, parameters) in arrival order
        self.faults: list[Fault] = []
        self.enforce_mixing_rule = False
        self.family_in_use: str | None = None  # 'legacy' | 'extended' since the last reset
        self.on_command: Callable[[int], None] | None = None
        self.close_after: int | None = None  # drop the connection when this many more commands have arrived
        self.drop_connection: Callable[[], None] | None = None
        # A hostile controller: every packet Bumble's controller sends goes through this (H4 bytes in, the list of
        # byte strings actually sent out); None sends it unchanged.
        self.mutate: Callable[[bytes], list[bytes]] | None = None
        self.max_sets: int | None = None  # what LE Read Number of Supported Advertising Sets answers (Bumble: 240)
        self.personality: Personality | None = None
        self.locked_up = False  # a counterfeit CSR after Set Event Filter (Clear All): no reply to anything
        # The host's commands the lab's rules refused (not the faults a test injects): (opcode, status), in order.
        self.refused: list[tuple[int, int]] = []
        # The commands another host on the same controller sent (Lab.kernel_scan), with the status each got.
        self.kernel_answers: list[tuple[int, int | None]] = []

    def become(self, p: Personality) -> None:
        """Answers as the controller `p` models: its version, features, supported commands, sets and quirks."""
        self.personality = p
        self.hci_version, self.hci_revision = p.hci_version, p.hci_revision
        self.lmp_version, self.lmp_subversion = p.lmp_version, p.lmp_subversion
        self.manufacturer_company_identifier = p.manufacturer
        self.le_features = hci.LeFeatureMask(p.le_features)
        self.acl_data_packet_length, self.total_num_acl_data_packets = p.acl
        self.max_sets = p.max_sets
        self.supported_commands = set(p.opcodes)

    def lists(self, opcode: int) -> bool:
        """True when Read Local Supported Commands lists the command (the personality's bitmap, else Bumble's)."""
        if self.personality is not None:
            return opcode in self.personality.opcodes
        return opcode in self.supported_commands

    def on_hci_read_local_supported_commands_command(self, command: Any) -> Any:
        if self.personality is None:
            return super().on_hci_read_local_supported_commands_command(command)
        return hci.HCI_Read_Local_Supported_Commands_ReturnParameters(
            hci.HCI_ErrorCode.SUCCESS, supported_commands=self.personality.commands)

    def refusal(self, opcode: int, parameters: bytes) -> int | None | bool:
        """What the lab's rules make of this command, before Bumble's handler runs: a status to answer with, None for
        no answer at all, or False when the controller executes it as usual. Latches the command family."""
        p = self.personality
        q = p.quirks if p is not None else frozenset()
        if p is not None:
            if self.locked_up:
                return None
            if 'event-filter-lockup' in q and opcode == hci.HCI_SET_EVENT_FILTER_COMMAND and parameters[:1] == b'\x00':
                self.locked_up = True
                return None
            if 'unsupported-advertised' in q and opcode in (hci.HCI_DELETE_STORED_LINK_KEY_COMMAND,
                                                            hci.HCI_READ_DEFAULT_ERRONEOUS_DATA_REPORTING_COMMAND):
                return hci.HCI_UNKNOWN_HCI_COMMAND_ERROR
            if not p.knows(opcode):
                return hci.HCI_UNKNOWN_HCI_COMMAND_ERROR
        if self.enforce_mixing_rule:
            legacy, extended = (LEGACY_FAMILY, EXTENDED_FAMILY) if p is not None else (LEGACY_ADV_OPCODES,
                                                                                        EXTENDED_ADV_OPCODES)
            family = 'legacy' if opcode in legacy else 'extended' if opcode in extended else None
            if family:
                if self.family_in_use and self.family_in_use != family:
                    return hci.HCI_COMMAND_DISALLOWED_ERROR
                self.family_in_use = family
        if opcode == hci.HCI_LE_SET_ADVERTISING_PARAMETERS_COMMAND and self.le_legacy_advertiser.enabled:
            return hci.HCI_COMMAND_DISALLOWED_ERROR
        if ('random-address-while-scanning' in q and opcode == hci.HCI_LE_SET_RANDOM_ADDRESS_COMMAND
                and (self.le_scan_enable or self.le_legacy_advertiser.enabled)):
            return hci.HCI_COMMAND_DISALLOWED_ERROR
        if ('pre-5.0-interval-floor' in q and opcode == hci.HCI_LE_SET_ADVERTISING_PARAMETERS_COMMAND
                and len(parameters) >= 5 and parameters[4] in (2, 3)  # ADV_SCAN_IND, ADV_NONCONN_IND
                and min(int.from_bytes(parameters[0:2], 'little'), int.from_bytes(parameters[2:4], 'little')) < PRE_50_FLOOR):
            return hci.HCI_INVALID_HCI_COMMAND_PARAMETERS_ERROR
        return False

    def kernel_command(self, opcode: int, parameters: bytes = b'') -> int | None:
        """A command from another host on the same controller (the kernel, for a program that scans): the same rules
        as the host's commands, the same state, but its answer goes to that host, not to beacond. Returns the status
        (None: no answer) and keeps it in `kernel_answers`."""
        answer = self.refusal(opcode, parameters)
        if answer is None or answer is not False:
            status = answer
        else:
            command = hci.HCI_Packet.from_bytes(bytes([hci.HCI_COMMAND_PACKET]) + opcode.to_bytes(2, 'little')
                                                + bytes([len(parameters)]) + parameters)
            result = getattr(self, f'on_{command.name.lower()}', self.on_hci_command)(command)
            status = int(getattr(result, 'status', 0))
        self.kernel_answers.append((opcode, status))
        return status

    def on_hci_le_read_number_of_supported_advertising_sets_command(self, command: Any) -> Any:
        if self.max_sets is None:
            return super().on_hci_le_read_number_of_supported_advertising_sets_command(command)
        return hci.HCI_LE_Read_Number_Of_Supported_Advertising_Sets_ReturnParameters(
            status=hci.HCI_ErrorCode.SUCCESS, num_supported_advertising_sets=self.max_sets)

    def send_hci_packet(self, packet: hci.HCI_Packet) -> None:
        data = bytes(packet)
        out = self.mutate(data) if self.mutate else [data]
        if self.host:
            for b in out:
                asyncio.get_running_loop().call_soon(self.host.on_packet, b)

    def on_hci_command_packet(self, command: hci.HCI_Command) -> None:
        opcode = command.op_code
        self.commands.append((time.monotonic(), opcode, bytes(command.parameters or b'')))
        if self.on_command:
            self.on_command(opcode)
        if self.close_after is not None:
            self.close_after -= 1
            if self.close_after <= 0:
                self.close_after = None
                if self.drop_connection:
                    self.drop_connection()  # the command is lost with the connection: no reply
                return
        for fault in self.faults:
            if fault.opcode == opcode and fault.times != 0 and bytes(command.parameters or b'').startswith(fault.when):
                if fault.times > 0:
                    fault.times -= 1
                if fault.delay is not None:
                    asyncio.get_running_loop().call_later(fault.delay, super().on_hci_command_packet, command)
                    return
                if fault.status is None:
                    return  # never answer
                if opcode == hci.HCI_RESET_COMMAND and fault.status == 0:
                    self._reset_state()
                self._complete(opcode, fault.status, fault.credits)
                return
        answer = self.refusal(opcode, bytes(command.parameters or b''))
        if answer is None:
            return
        if answer is not False:
            self.refused.append((opcode, answer))
            self._complete(opcode, answer)
            return
        if opcode == hci.HCI_RESET_COMMAND:
            self._reset_state()
        if opcode == hci.HCI_LE_REMOVE_ADVERTISING_SET_COMMAND:
            # WORKAROUND: the emulator removes an enabled set; the Core spec (Vol 4 Part E §7.8.59) says a controller
            # refuses that with Command Disallowed, and real ones do, which leaves the set on the air.
            s = self.advertising_sets.get(command.parameters[0]) if command.parameters else None
            if s is not None and s.enabled:
                self._complete(opcode, hci.HCI_COMMAND_DISALLOWED_ERROR)
                return
        super().on_hci_command_packet(command)

    def _reset_state(self) -> None:
        # WORKAROUND: the stock emulator's Reset keeps advertising and scanning running; a real controller stops them.
        self.le_legacy_advertiser.stop()
        self.le_legacy_advertiser.advertising_data = b''
        for s in list(self.advertising_sets.values()):
            s.stop()
        self.advertising_sets.clear()
        self.le_scan_enable = False
        self.family_in_use = None

    def _complete(self, opcode: int, status: int, credits: int = 1) -> None:
        # Command Complete with only the status byte: what a controller returns for a refused command.
        self.send_hci_packet(hci.HCI_Command_Complete_Event(
            num_hci_command_packets=credits, command_opcode=opcode,
            return_parameters=hci.HCI_StatusReturnParameters(status)))


@dataclasses.dataclass
class Received:
    at: float
    address: str
    data: bytes
    connectable: bool
    rssi: int = -50


class Lab:
    """Starts the link, beacond's controller behind an H4 server, and a scanning Bumble host. Use as a context manager."""

    def __init__(self, transport: str, *, extended: bool = True, hci_version: int = hci.HCI_VERSION_BLUETOOTH_CORE_5_0,
                 enforce_mixing_rule: bool = True, family_in_use: str | None = None, scan: bool = True,
                 advertisers: list[tuple[str, bytes]] = (), second_transport: str | None = None,
                 flooders: list[tuple[str, bytes]] = (), max_sets: int | None = None,
                 personality: Personality | None = None) -> None:
        """advertisers: other radios on the same link, each (public address, advertising data), advertising from the
        start with legacy ADV_NONCONN_IND. second_transport: a second controller on the link behind its own H4 server
        (for a second beacond). personality: beacond's controller answers as that model of a real one does
        (personalities.py); it decides extended, the HCI version and the sets."""
        self.transport_spec = transport  # e.g. tcp-server:127.0.0.1:0 is not supported; give a real port or unix path
        self.extended = extended
        self.hci_version = hci_version
        self.enforce = enforce_mixing_rule
        self.initial_family = family_in_use
        self.scan = scan
        self.received: list[Received] = []
        self.advertisers = list(advertisers)
        self.flooders = list(flooders)
        self.second_transport_spec = second_transport
        self.max_sets = max_sets
        self.personality = personality
        if personality is not None:
            self.extended, self.hci_version = personality.extended, personality.hci_version
        self.controller2: LabController | None = None
        self._transport2 = None
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.controller: LabController | None = None
        self._transport = None
        self.dropped_at: list[float] = []  # when the harness dropped beacond's connection
        self.reachable_at: list[float] = []  # when the controller listened again after a disconnect

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def __enter__(self) -> 'Lab':
        self._thread.start()
        self.call(self._start)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.call(self._stop)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    async def _start(self) -> None:
        link = LocalLink()
        self._transport = await open_transport(self.transport_spec)
        c = LabController('beacond-radio', host_source=self._transport.source, host_sink=self._transport.sink,
                          link=link, public_address='F0:F1:F2:F3:F4:F5')
        c.hci_version = self.hci_version
        if not self.extended:
            c.le_features = c.le_features & ~hci.LeFeatureMask.LE_EXTENDED_ADVERTISING
        c.enforce_mixing_rule = self.enforce
        c.family_in_use = self.initial_family
        c.drop_connection = self._drop_now
        c.max_sets = self.max_sets
        if self.personality is not None:
            c.become(self.personality)
        self.controller = c
        for i, (address, data) in enumerate(self.advertisers + self.flooders):
            # Another beacon in the room: a controller of its own on the link, driven through HCI commands directly.
            other = LabController(f'advertiser-{i}', link=link, public_address=address)
            flooding = i >= len(self.advertisers)
            if flooding:
                other.le_legacy_advertiser = FloodingAdvertiser(other)
                other.le_legacy_advertiser.base = data
            for command in (hci.HCI_LE_Set_Advertising_Parameters_Command(
                                # Bumble reads the interval as milliseconds: 160 ms, or 10 ms for a flooder.
                                advertising_interval_min=10 if flooding else 0xA0,
                                advertising_interval_max=10 if flooding else 0xA0,
                                advertising_type=hci.HCI_LE_Set_Advertising_Parameters_Command.AdvertisingType.ADV_NONCONN_IND,
                                own_address_type=0, peer_address_type=0, peer_address=hci.Address.ANY,
                                advertising_channel_map=7, advertising_filter_policy=0),
                            hci.HCI_LE_Set_Advertising_Data_Command(advertising_data=data),
                            hci.HCI_LE_Set_Advertising_Enable_Command(advertising_enable=1)):
                other.on_hci_command_packet(command)
        if self.second_transport_spec:
            self._transport2 = await open_transport(self.second_transport_spec)
            c2 = LabController('second-radio', host_source=self._transport2.source, host_sink=self._transport2.sink,
                               link=link, public_address='E0:E1:E2:E3:E4:E5')
            c2.hci_version = self.hci_version
            self.controller2 = c2
        if self.scan:
            scanner_controller = Controller('scanner-radio', link=link, public_address='C0:C1:C2:C3:C4:C5')
            self.scanner = Device.with_hci('scanner', hci.Address('C0:C1:C2:C3:C4:C5'), scanner_controller,
                                           scanner_controller)
            await self.scanner.power_on()
            self.scanner.on('advertisement', self._on_advertisement)
            await self.scanner.start_scanning(active=False, filter_duplicates=False)

    def _current_connection(self):
        sink = self._transport.sink if self._transport is not None else None
        return getattr(sink, 'transport', None)

    def _drop_now(self) -> None:
        conn = self._current_connection()
        if conn is not None:
            conn.close()
            self.dropped_at.append(time.monotonic())

    async def _reopen(self) -> None:
        """Listens again on the same address with a fresh transport wired to the same controller."""
        self._transport = await open_transport(self.transport_spec)
        self._transport.source.set_packet_sink(self.controller)
        self.controller.host = self._transport.sink
        self.reachable_at.append(time.monotonic())

    async def _disconnect(self, reopen_after: float | None) -> None:
        self._drop_now()
        if reopen_after is None:
            return
        # Stop listening: connection attempts are refused until the controller "returns".
        self._transport.server.close()
        await self._transport.server.wait_closed()
        async def later() -> None:
            await asyncio.sleep(reopen_after)
            await self._reopen()
        asyncio.get_running_loop().create_task(later())

    async def _stop(self) -> None:
        if self.scan:
            try:
                await self.scanner.stop_scanning()
            except Exception:
                pass
        if self._transport is not None:
            await self._transport.close()
        if self._transport2 is not None:
            await self._transport2.close()

    def _on_advertisement(self, adv: Any) -> None:
        if adv.is_scan_response:
            return  # the emulator's synthetic scan response carries a copy of the data
        with self._lock:
            self.received.append(Received(time.monotonic(), str(adv.address), bytes(adv.data_bytes), adv.is_connectable,
                                          adv.rssi))

    # -- access from the test thread ---------------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Runs fn (a coroutine function or a plain function) on the lab's loop and returns its result."""
        async def run() -> Any:
            r = fn(*args)
            if asyncio.iscoroutine(r):
                r = await r
            return r
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=30)

    def state(self) -> dict[str, Any]:
        """A snapshot of beacond's controller: legacy advertiser and extended sets."""
        def snap() -> dict[str, Any]:
            c = self.controller
            assert c is not None
            a = c.le_legacy_advertiser
            return {
                'legacy': {'enabled': a.enabled, 'type': a.advertising_type, 'interval_min': a.advertising_interval_min,
                           'interval_max': a.advertising_interval_max, 'own_address_type': a.own_address_type,
                           'channel_map': a.advertising_channel_map, 'data': bytes(a.advertising_data),
                           'random_address': str(c.random_address), 'scan_response': bytes(a.scan_response_data)},
                'sets': {h: {'enabled': s.enabled, 'data': bytes(s.data), 'scan_response': bytes(s.scan_response_data),
                             'properties': int(s.parameters.advertising_event_properties) if s.parameters else None,
                             'interval_min': s.parameters.primary_advertising_interval_min if s.parameters else None,
                             'own_address_type': int(s.parameters.own_address_type) if s.parameters else None,
                             'random_address': str(s.random_address) if s.random_address else None,
                             'tx_power': (s.parameters.advertising_tx_power + 128) % 256 - 128 if s.parameters else None}  # signed dBm
                         for h, s in c.advertising_sets.items()},
                'commands': list(c.commands),
            }
        return self.call(snap)

    def advertising(self) -> tuple[str, dict[str, Any]] | None:
        """('legacy', state) or ('extended', set state) for whatever advertising is enabled, else None."""
        s = self.state()
        if s['legacy']['enabled']:
            return 'legacy', s['legacy']
        for st in s['sets'].values():
            if st['enabled']:
                return 'extended', st
        return None

    def disconnect(self, reopen_after: float | None = None) -> None:
        """Drops beacond's connection. reopen_after=None keeps listening (beacond may reconnect at once); a number
        stops listening and listens again, with a fresh transport, after that many seconds."""
        self.call(self._disconnect, reopen_after)

    def close_after(self, commands: int) -> None:
        """Drops the connection when the N-th command from now arrives (that command gets no reply)."""
        self.call(lambda: setattr(self.controller, 'close_after', commands))

    def hardware_error(self, code: int = 0x42) -> None:
        """The controller reports a Hardware Error (Vol 4 Part E §7.7.16) and, as a real one would, loses its state."""
        def go() -> None:
            c = self.controller
            c.le_legacy_advertiser.stop()
            for s in list(c.advertising_sets.values()):
                s.stop()
            c.advertising_sets.clear()
            c.send_hci_packet(hci.HCI_Packet.from_bytes(bytes([hci.HCI_EVENT_PACKET, hci.HCI_HARDWARE_ERROR_EVENT, 1, code])))
        self.call(go)

    def stop_advertising_silently(self) -> None:
        """The controller stops advertising and says nothing: no event, no reply to anything. A Pi's radio did this
        under bleno (noble/bleno#387: gone from every scan until a reboot) and a BlueZ peripheral (bluez/bluez#1015,
        "how can I check advertising loss programmatically?"); no public trace shows whether such a controller then
        thinks itself enabled, so the lab's says disabled, as Bumble's does after a stop."""
        def go() -> None:
            c = self.controller
            c.le_legacy_advertiser.stop()
            for s in list(c.advertising_sets.values()):
                s.stop()
        self.call(go)

    def enabled_at(self) -> list[float]:
        """Times of every advertising enable command the controller received."""
        return [t for t, op, p in self.state()['commands']
                if (op in (hci.HCI_LE_SET_ADVERTISING_ENABLE_COMMAND, hci.HCI_LE_SET_EXTENDED_ADVERTISING_ENABLE_COMMAND)
                    and p[:1] == b'\x01')]

    def add_fault(self, opcode: int, status: int | None, times: int = 1, when: bytes = b'', credits: int = 1,
                  delay: float | None = None) -> None:
        self.call(lambda: self.controller.faults.append(Fault(opcode, status, times, when, credits, delay)))

    def mutate(self, fn: Callable[[bytes], list[bytes]] | None) -> None:
        """Passes every packet the controller sends to beacond through fn (H4 bytes in, byte strings out)."""
        self.call(lambda: setattr(self.controller, 'mutate', fn))

    def inject(self, *packets: bytes) -> None:
        """Sends raw bytes to beacond as if the controller had sent them (anything: garbage is allowed)."""
        def go() -> None:
            for p in packets:
                self.controller.host.on_packet(p)
        self.call(go)

    def on_command(self, fn: Callable[[int], None] | None) -> None:
        """Calls fn(opcode) on the lab's thread as each command from beacond arrives (before it is answered)."""
        self.call(lambda: setattr(self.controller, 'on_command', fn))

    def connect_central(self, address: str | None = None) -> None:
        """The scanning radio connects to beacond's radio as a central, as a phone would to a connectable beacon:
        to `address` (a random one) or to the radio's public address."""
        async def go() -> None:
            await self.scanner.stop_scanning()
            target = (hci.Address(address, hci.Address.RANDOM_DEVICE_ADDRESS) if address
                      else hci.Address('F0:F1:F2:F3:F4:F5', hci.Address.PUBLIC_DEVICE_ADDRESS))
            self.central_connection = await self.scanner.connect(target, timeout=10)
        self.call(go)

    def disconnect_central(self) -> None:
        async def go() -> None:
            await self.central_connection.disconnect()
        self.call(go)

    def kernel_scan(self, on: bool) -> list[tuple[int, int | None]]:
        """Scanning on beacond's controller, switched by another host as the kernel does for a scanning program (Home
        Assistant's passive scan) on the same adapter; beacond sees no command for it. The kernel's commands go through
        the controller's rules (LabController.kernel_command): the extended scan commands where the controller lists
        both (the kernel's use_ext_scan(): Supported Commands 37.5 and 37.6) unless the personality has
        kernel-legacy-scan (HCI_QUIRK_BROKEN_EXT_SCAN), else LE Set Scan Parameters and LE Set Scan Enable, with the
        kernel's passive parameters (hci_core.c: le_scan_interval 0x0060, le_scan_window 0x0030). Returns each
        command's (opcode, status)."""
        def go() -> list[tuple[int, int | None]]:
            c = self.controller
            p = c.personality
            extended = (c.lists(hci.HCI_LE_SET_EXTENDED_SCAN_PARAMETERS_COMMAND)
                        and c.lists(hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND)
                        and not (p is not None and 'kernel-legacy-scan' in p.quirks))
            if extended:
                commands = ([(hci.HCI_LE_SET_EXTENDED_SCAN_PARAMETERS_COMMAND, bytes([0, 0, 1, 0]) + (0x60).to_bytes(2, 'little')
                              + (0x30).to_bytes(2, 'little'))] if on else []) + [
                    (hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND, bytes([1 if on else 0, 0, 0, 0, 0, 0]))]
            else:
                commands = ([(hci.HCI_LE_SET_SCAN_PARAMETERS_COMMAND, bytes([0]) + (0x60).to_bytes(2, 'little')
                              + (0x30).to_bytes(2, 'little') + bytes([0, 0]))] if on else []) + [
                    (hci.HCI_LE_SET_SCAN_ENABLE_COMMAND, bytes([1 if on else 0, 0]))]
            return [(op, c.kernel_command(op, params)) for op, params in commands]
        return self.call(go)

    def kernel_answers(self) -> list[tuple[int, int | None]]:
        """Every command the kernel_scan()s sent, with the status each got."""
        return self.call(lambda: list(self.controller.kernel_answers))

    def clear_faults(self) -> None:
        self.call(lambda: self.controller.faults.clear())

    def clear_received(self) -> None:
        with self._lock:
            self.received.clear()

    def received_data(self) -> list[bytes]:
        with self._lock:
            return [r.data for r in self.received]

    def opcodes(self) -> list[int]:
        return [op for _, op, _ in self.state()['commands']]


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = 'condition') -> Any:
    """Polls predicate until it returns something truthy; fails the test with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out after {timeout} s waiting for {what}')
        time.sleep(interval)
