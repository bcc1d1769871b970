"""The lab's controller answers as strictly as the chips it models (issue #42, point 6): each test sends HCI commands
straight to a LabController playing a personality and reads its Command Complete, with no beacond in between.

Bumble's controller executes every command it has a handler for, whatever its Read Local Supported Commands says, and
refuses almost nothing; these check the rules the harness adds so that beacond meets what a real controller answers:
the chip's own bitmap (verbatim where a public dump gives it) and Unknown HCI Command for everything outside it,
LE Set Advertising Parameters refused while legacy advertising is on, the pre-5.0 interval floor, the wider
mixing-rule families and the kernel's legacy scan on an RTL8761B with HCI_QUIRK_BROKEN_EXT_SCAN.
"""
from __future__ import annotations

import asyncio
import struct

import pytest
from bumble import hci
from bumble.link import LocalLink

from harness.lab import LabController
from harness.personalities import ALL, BY_NAME

SUCCESS, UNKNOWN, DISALLOWED, INVALID = 0x00, 0x01, 0x0C, 0x12

# The bitmaps the public dumps print (octet 0 first), copied here from the sources, not from personalities.py.
VERBATIM = {
    # nikitos1550/ble-notes usb-adapters/buro_bu-bt40a/README.md, hciconfig "Commands: Octet 0 = 0xff ... Octet 28 = 0x7f"
    'csr8510': 'ffffff03fefffffffffffffff30fe8fe3ff783ff1c00000061f7ffff7f',
    # teslamotors/vehicle-command#101, hcidump of a Pi 3B (BCM43430A1, LMP 0x2209)
    'cyw43438': 'ffffff03ccffefffffffec1ff20fe8fe3ff78fff1c00040061f7ffff7ff8ffffff3f0000000000000008',
    # nikitos1550/ble-notes usb-adapters/asus_usb-bt500/README.md (RTL8761B, fw 0x097bec43), octets 0-39
    'rtl8761b': 'ffffff03ccffffff3ffffc9ff30fe8fe3ff78fff1c00000061f7ffff7f00e0ffff0000f0ffe38007',
}
# The AX200's LE octets 25-41 from its btmon trace on linux-bluetooth (20201112121614.c5kko4iofg32ckxs@orac).
AX200_LE = 'f7ffff7fb80000feffffffffe380070008'

ADV_PARAMS = hci.HCI_LE_SET_ADVERTISING_PARAMETERS_COMMAND
ADV_ENABLE = hci.HCI_LE_SET_ADVERTISING_ENABLE_COMMAND
NONCONN, SCANNABLE, CONNECTABLE = 3, 2, 0


def adv_params(interval: int, adv_type: int = NONCONN) -> tuple[int, bytes]:
    return ADV_PARAMS, struct.pack('<HHBBB6sBB', interval, interval, adv_type, 0, 0, bytes(6), 7, 0)


def answers(personality, *commands: tuple[int, bytes], kernel_first: list[tuple[int, bytes]] = ()):
    """Each command's status from a fresh LabController playing `personality` (None: Bumble's own), in order;
    None for a command that got no Command Complete or Command Status. kernel_first: commands another host (the
    kernel) sends before them, through LabController.kernel_command."""
    async def run():
        c = LabController('chip', link=LocalLink(), public_address='F0:F1:F2:F3:F4:F5')
        c.enforce_mixing_rule = True
        if personality is not None:
            c.become(personality)
        got: list[bytes] = []

        class Host:
            def on_packet(self, packet: bytes) -> None:
                got.append(packet)
        c.host = Host()
        for opcode, parameters in kernel_first:
            c.kernel_command(opcode, parameters)
        statuses = []
        for opcode, parameters in commands:
            n = len(got)
            c.on_packet(bytes([hci.HCI_COMMAND_PACKET]) + struct.pack('<HB', opcode, len(parameters)) + parameters)
            await asyncio.sleep(0.01)
            status = None
            for p in got[n:]:
                if p[:2] == b'\x04\x0e' and struct.unpack_from('<H', p, 4)[0] == opcode:
                    status = p[6] if len(p) > 6 else None
                    if opcode == hci.HCI_READ_LOCAL_SUPPORTED_COMMANDS_COMMAND and status == SUCCESS:
                        status = p[7:71]  # the bitmap itself
                elif p[:2] == b'\x04\x0f' and struct.unpack_from('<H', p, 5)[0] == opcode:
                    status = p[3]
            statuses.append(status)
        for s in [c.le_legacy_advertiser, *c.advertising_sets.values()]:
            s.stop()
        return statuses
    return asyncio.run(run())


def bitmap_of(personality) -> bytes:
    (bitmap,) = answers(personality, (hci.HCI_READ_LOCAL_SUPPORTED_COMMANDS_COMMAND, b''))
    assert isinstance(bitmap, bytes) and len(bitmap) == 64, bitmap
    return bitmap


def listed(bitmap: bytes, opcode: int) -> bool:
    return bool(int.from_bytes(bitmap, 'little') & hci.HCI_SUPPORTED_COMMANDS_MASKS[opcode])


@pytest.mark.parametrize('name', sorted(VERBATIM))
def test_read_local_supported_commands_is_the_public_dump_verbatim(name):
    assert bitmap_of(BY_NAME[name]).hex() == bytes.fromhex(VERBATIM[name]).ljust(64, b'\0').hex()


def test_the_ax200s_le_octets_are_its_trace():
    assert bitmap_of(BY_NAME['ax200'])[25:42].hex() == AX200_LE


DATA_LENGTH = [hci.HCI_LE_SET_DATA_LENGTH_COMMAND, hci.HCI_LE_READ_SUGGESTED_DEFAULT_DATA_LENGTH_COMMAND,
               hci.HCI_LE_WRITE_SUGGESTED_DEFAULT_DATA_LENGTH_COMMAND, hci.HCI_LE_READ_MAXIMUM_DATA_LENGTH_COMMAND]
PRIVACY = [hci.HCI_LE_ADD_DEVICE_TO_RESOLVING_LIST_COMMAND, hci.HCI_LE_SET_ADDRESS_RESOLUTION_ENABLE_COMMAND,
           hci.HCI_LE_SET_RESOLVABLE_PRIVATE_ADDRESS_TIMEOUT_COMMAND, hci.HCI_LE_SET_PRIVACY_MODE_COMMAND]
PHY = [hci.HCI_LE_READ_PHY_COMMAND, hci.HCI_LE_SET_DEFAULT_PHY_COMMAND, hci.HCI_LE_SET_PHY_COMMAND]
EXTENDED = [hci.HCI_LE_SET_ADVERTISING_SET_RANDOM_ADDRESS_COMMAND, hci.HCI_LE_SET_EXTENDED_ADVERTISING_PARAMETERS_COMMAND,
            hci.HCI_LE_SET_EXTENDED_ADVERTISING_DATA_COMMAND, hci.HCI_LE_SET_EXTENDED_ADVERTISING_ENABLE_COMMAND,
            hci.HCI_LE_READ_NUMBER_OF_SUPPORTED_ADVERTISING_SETS_COMMAND, hci.HCI_LE_REMOVE_ADVERTISING_SET_COMMAND,
            hci.HCI_LE_CLEAR_ADVERTISING_SETS_COMMAND, hci.HCI_LE_SET_EXTENDED_SCAN_PARAMETERS_COMMAND,
            hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND]
FOUR_X = ['csr8510', 'csr8510-clone', 'cyw43438', 'bcm43430b0']


@pytest.mark.parametrize('name', FOUR_X)
def test_a_4_x_chip_claims_no_privacy_phy_or_extended_commands(name):
    b = bitmap_of(BY_NAME[name])
    claimed = [hex(op) for op in PRIVACY + PHY + EXTENDED if listed(b, op)]
    assert claimed == []
    # Data length (4.2) only on the Zero 2 W's B0 variant, whose model has the LE feature.
    assert [listed(b, op) for op in DATA_LENGTH] == [name == 'bcm43430b0'] * 4
    assert listed(b, ADV_PARAMS) and listed(b, ADV_ENABLE)


@pytest.mark.parametrize('name', ['rtl8761b', 'ax200', 'ax210'])
def test_an_extended_chip_lists_the_extended_commands_bumble_leaves_out(name):
    b = bitmap_of(BY_NAME[name])
    assert [hex(op) for op in EXTENDED if not listed(b, op)] == []


@pytest.mark.parametrize('personality', ALL, ids=str)
def test_the_bitmap_agrees_with_the_le_extended_advertising_feature(personality):
    b = bitmap_of(personality)
    assert all(listed(b, op) == personality.extended for op in EXTENDED)


def test_bumbles_handlers_do_not_run_for_commands_outside_the_chips_bitmap():
    # Bumble has handlers for all of these; a genuine CSR8510 lists none of them, and answers Unknown HCI Command.
    csr = BY_NAME['csr8510']
    statuses = answers(csr,
                       (hci.HCI_SET_EVENT_MASK_PAGE_2_COMMAND, bytes(8)),
                       (hci.HCI_LE_WRITE_SUGGESTED_DEFAULT_DATA_LENGTH_COMMAND, struct.pack('<HH', 251, 2120)),
                       (hci.HCI_LE_SET_ADDRESS_RESOLUTION_ENABLE_COMMAND, b'\x01'),
                       (hci.HCI_LE_SET_DEFAULT_PHY_COMMAND, b'\x00\x01\x01'),
                       (hci.HCI_LE_READ_NUMBER_OF_SUPPORTED_ADVERTISING_SETS_COMMAND, b''),
                       (hci.HCI_LE_READ_TRANSMIT_POWER_COMMAND, b''))
    assert statuses == [UNKNOWN] * 6
    # What it lists is executed as usual.
    assert answers(csr, (hci.HCI_LE_READ_LOCAL_SUPPORTED_FEATURES_COMMAND, b''), (hci.HCI_RESET_COMMAND, b'')) == [SUCCESS] * 2
    # The CYW43438 lists Set Event Mask Page 2 (22.2) but no LE Set Default PHY.
    assert answers(BY_NAME['cyw43438'], (hci.HCI_SET_EVENT_MASK_PAGE_2_COMMAND, bytes(8)),
                   (hci.HCI_LE_SET_DEFAULT_PHY_COMMAND, b'\x00\x01\x01')) == [SUCCESS, UNKNOWN]


@pytest.mark.parametrize('personality', [None, *ALL], ids=str)
def test_advertising_parameters_are_refused_while_legacy_advertising_is_on(personality):
    """Core Vol 4 Part E §7.8.5: Command Disallowed while advertising is enabled (BlueZ's btdev does the same). An
    extended chip takes the legacy family too when it comes first after a reset."""
    statuses = answers(personality, adv_params(0xA0), (ADV_ENABLE, b'\x01'), adv_params(0x140), (ADV_ENABLE, b'\x00'),
                       adv_params(0x140))
    assert statuses == [SUCCESS, SUCCESS, DISALLOWED, SUCCESS, SUCCESS]


FLOOR = ['csr8510', 'csr8510-clone', 'csr8510-clone-5', 'cyw43438', 'bcm43430b0']


@pytest.mark.parametrize('name', FLOOR)
def test_a_pre_5_0_chip_refuses_a_non_connectable_or_scannable_interval_under_100_ms(name):
    p = BY_NAME[name]
    assert answers(p, adv_params(0x20)) == [INVALID]
    assert answers(p, adv_params(0x9F, SCANNABLE)) == [INVALID]
    assert answers(p, adv_params(0xA0)) == [SUCCESS]
    assert answers(p, adv_params(0x20, CONNECTABLE)) == [SUCCESS]  # connectable advertising had the 20 ms floor already


@pytest.mark.parametrize('personality', [p for p in ALL if p.name not in FLOOR], ids=str)
def test_a_5_x_chip_takes_20_ms(personality):
    assert answers(personality, adv_params(0x20)) == [SUCCESS]


READ_SETS = (hci.HCI_LE_READ_NUMBER_OF_SUPPORTED_ADVERTISING_SETS_COMMAND, b'')
LEGACY_SCAN_PARAMS = (hci.HCI_LE_SET_SCAN_PARAMETERS_COMMAND, struct.pack('<BHHBB', 0, 0x60, 0x30, 0, 0))
LEGACY_SCAN_ON = (hci.HCI_LE_SET_SCAN_ENABLE_COMMAND, b'\x01\x00')
EXT_SCAN_PARAMS = (hci.HCI_LE_SET_EXTENDED_SCAN_PARAMETERS_COMMAND, struct.pack('<BBBBHH', 0, 0, 1, 0, 0x60, 0x30))
EXT_SCAN_ON = (hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND, struct.pack('<BBHH', 1, 0, 0, 0))


@pytest.mark.parametrize('name', ['rtl8761b', 'ax200'])
def test_scanning_and_the_read_of_the_sets_count_are_in_the_mixing_rules_families(name):
    """Zephyr's controller checks the family in le_set_scan_param/le_set_scan_enable (legacy) and in
    le_read_num_adv_sets (extended), as chips.md §6 quotes; so does the lab's model of a chip."""
    p = BY_NAME[name]
    # The kernel reads the number of sets at init on an extended controller: its legacy scan is refused afterwards.
    assert answers(p, READ_SETS, LEGACY_SCAN_PARAMS, LEGACY_SCAN_ON) == [SUCCESS, DISALLOWED, DISALLOWED]
    assert answers(p, READ_SETS, EXT_SCAN_PARAMS, EXT_SCAN_ON) == [SUCCESS] * 3
    # A legacy scan first: the extended advertising commands and the read of the sets are refused.
    assert answers(p, LEGACY_SCAN_PARAMS, LEGACY_SCAN_ON, READ_SETS,
                   (hci.HCI_LE_SET_EXTENDED_ADVERTISING_PARAMETERS_COMMAND, bytes(25))) == \
        [SUCCESS, SUCCESS, DISALLOWED, DISALLOWED]


def test_the_kernels_legacy_scan_on_an_rtl8761b_with_the_broken_ext_scan_quirk():
    """Kernels 7.1.9 / 6.18.45 and later set HCI_QUIRK_BROKEN_EXT_SCAN on the RTL8761B (bluetooth-next #133, #637):
    the kernel scans with LE Set Scan Parameters/Enable on a controller whose family is extended from the kernel's
    own init. beacond's extended advertising commands keep succeeding; the kernel's scan is what is refused."""
    p = BY_NAME['rtl8761b-legacy-scan']
    assert 'kernel-legacy-scan' in p.quirks and p.extended
    enable = (hci.HCI_LE_SET_EXTENDED_ADVERTISING_ENABLE_COMMAND, b'\x00\x00')  # disable all: no set needed
    assert answers(p, enable, kernel_first=[READ_SETS, LEGACY_SCAN_PARAMS, LEGACY_SCAN_ON]) == [SUCCESS]
    # After a reset the kernel's legacy scan can come first: then the extended family is the one refused.
    assert answers(p, READ_SETS, enable, kernel_first=[LEGACY_SCAN_PARAMS, LEGACY_SCAN_ON]) == [DISALLOWED, DISALLOWED]


def test_bumbles_own_controller_keeps_the_narrow_families():
    """Without a personality the lab keeps the mixing rule to the advertising commands: test_run's family switch
    injects a refusal after LE Read Number of Supported Advertising Sets was accepted."""
    assert answers(None, READ_SETS, adv_params(0xA0)) == [SUCCESS, SUCCESS]
