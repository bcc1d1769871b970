"""Controller personalities: what the Bluetooth controllers people own answer over HCI, for the Bumble lab.

Each one sets what Bumble's controller reports (Read Local Version Information, the LE features, Read Local
Supported Commands, the number of advertising sets, the largest advertising data, the ACL buffers) and names the quirks
the lab controller then plays (LabController in lab.py). Every value carries its source in `sources`: a public trace,
issue or kernel file, with a few words of it. A value no public source showed is marked INFERRED with the reasoning, or
left to Bumble (None) and said so; docs/testing.md lists what each personality covers and what it cannot.

Supported commands (`commands`, the 64 bytes of Read Local Supported Commands, answered exactly so): the octets a public
`hciconfig hciX commands` / hcidump / btmon dump printed, verbatim where one gave the hex (CSR8510, CYW43438, RTL8761B
fw 0x097bec43), rebuilt from a decoded list (a CSR clone, the AX200's LE octets), and INFERRED from the nearest chip
where none was found (CYW43455, BCM43430B0, BCM4345C5, the AX200's octets 0-24, AX210). The research behind them, with
every bitmap decoded by Bumble's table: /tmp/research/chips.md in the session that wrote them (issue #42 point 6).

Rules every personality plays (lab.py, LabController.refusal):
  * a command outside the chip's bitmap is answered Unknown HCI Command (0x01) and not executed: Bumble's controller
    executes whatever it has a handler for, whatever its bitmap says. Seen for extended commands on the Pi 4's CYW43455
    (citruz/beacontools#63, LE Set Extended Scan Parameters) and the Pico W's CYW43439 (raspberrypi/pico-sdk#2313);
    INFERRED for the rest of each bitmap. Commands without a bit in the table (Read Local Supported Commands itself,
    vendor commands) are not gated.
  * the mixing rule counts scanning (LE Set Scan Parameters/Enable vs the extended ones), initiating (LE Create
    Connection vs LE Extended Create Connection) and the reads of the sets and of the largest data among the families,
    as Zephyr's controller does (subsys/bluetooth/controller/hci/hci.c: le_set_scan_param and le_set_scan_enable call
    adv_cmds_legacy_check, le_read_num_adv_sets and le_read_max_adv_data_len adv_cmds_ext_check).

The quirks:
  * random-address-while-scanning: LE Set Random Address gets Command Disallowed (0x0C) while scanning or legacy
    advertising is enabled (Core 5.x Vol 4 Part E §7.8.4; seen on a Pi 4 and a BCM43455 next to the kernel's scans:
    bluez/bluez#1950, bluez/bluetooth-next#781). The lab's `kernel_scan()` turns scanning on as the kernel would for
    Home Assistant on the same adapter.
  * mixing-rule: once one advertising family was used since reset, the other gets Command Disallowed (Core §3.1.1;
    an Intel controller's trace on linux-bluetooth, 2020-11-12). Every personality with extended advertising has it.
  * pre-5.0-interval-floor: LE Set Advertising Parameters with ADV_SCAN_IND or ADV_NONCONN_IND and an interval under
    0x00A0 (100 ms) is refused with Invalid HCI Command Parameters (0x12), as the Core before 5.0 requires (4.2 Vol 2
    Part E §7.8.5: "shall not be set to less than 0x00A0 (100 ms) if the Advertising_Type is set to 0x02 ... or 0x03";
    the status is INFERRED, no trace of the refusal was found).
  * kernel-legacy-scan: the kernel scans on this controller with the legacy commands although it lists the extended
    ones (HCI_QUIRK_BROKEN_EXT_SCAN on the RTL8761B from kernels 7.1.9 and 6.18.45: bluez/bluetooth-next #133, #637).
    `Lab.kernel_scan()` then sends LE Set Scan Parameters/Enable instead of the extended ones.
  * event-filter-lockup: a counterfeit CSR8510 locks up when it gets Set Event Filter with Filter_Type 0x00 (Clear All
    Filters): no reply, to it or to anything after it (drivers/bluetooth/btusb.c btusb_setup_csr,
    HCI_QUIRK_BROKEN_FILTER_CLEAR_ALL: "without these the controller will lock up").
  * unsupported-advertised: commands a counterfeit CSR lists as supported but answers with Unknown HCI Command
    (Delete Stored Link Key, Read Default Erroneous Data Reporting: btusb.c HCI_QUIRK_BROKEN_STORED_LINK_KEY and
    HCI_QUIRK_BROKEN_ERR_DATA_REPORTING, "advertised, but not supported"; the status itself is INFERRED).
"""
from __future__ import annotations

import dataclasses
import functools

from bumble import hci

LE_ENCRYPTION = 1 << 0
LE_41 = 0x1E  # Connection Parameters Request, Extended Reject Indication, Peripheral-initiated Features Exchange, LE Ping
LE_DLE = 1 << 5  # LE Data Packet Length Extension (4.2)
LE_2M = 1 << 8
LE_CODED = 1 << 11
LE_EXTENDED_ADVERTISING = 1 << 12
LE_REMOTE_PUBLIC_KEY_VALIDATION = 1 << 27

# What a controller without LE extended advertising does not know (and so answers with Unknown HCI Command).
EXTENDED_ONLY_OPCODES = frozenset({
    hci.HCI_LE_SET_ADVERTISING_SET_RANDOM_ADDRESS_COMMAND,
    hci.HCI_LE_SET_EXTENDED_ADVERTISING_PARAMETERS_COMMAND,
    hci.HCI_LE_SET_EXTENDED_ADVERTISING_DATA_COMMAND,
    hci.HCI_LE_SET_EXTENDED_SCAN_RESPONSE_DATA_COMMAND,
    hci.HCI_LE_SET_EXTENDED_ADVERTISING_ENABLE_COMMAND,
    hci.HCI_LE_READ_MAXIMUM_ADVERTISING_DATA_LENGTH_COMMAND,
    hci.HCI_LE_READ_NUMBER_OF_SUPPORTED_ADVERTISING_SETS_COMMAND,
    hci.HCI_LE_REMOVE_ADVERTISING_SET_COMMAND,
    hci.HCI_LE_CLEAR_ADVERTISING_SETS_COMMAND,
    hci.HCI_LE_SET_EXTENDED_SCAN_PARAMETERS_COMMAND,
    hci.HCI_LE_SET_EXTENDED_SCAN_ENABLE_COMMAND,
    hci.HCI_LE_EXTENDED_CREATE_CONNECTION_COMMAND,
})
# Bluetooth 4.2's data length commands (Supported Commands 33.6, 33.7, 34.0, 35.3).
DATA_LENGTH_OPCODES = frozenset({
    hci.HCI_LE_SET_DATA_LENGTH_COMMAND,
    hci.HCI_LE_READ_SUGGESTED_DEFAULT_DATA_LENGTH_COMMAND,
    hci.HCI_LE_WRITE_SUGGESTED_DEFAULT_DATA_LENGTH_COMMAND,
    hci.HCI_LE_READ_MAXIMUM_DATA_LENGTH_COMMAND,
})
# Bluetooth 5.0's PHY commands (35.4-35.6).
PHY_OPCODES = frozenset({hci.HCI_LE_READ_PHY_COMMAND, hci.HCI_LE_SET_DEFAULT_PHY_COMMAND, hci.HCI_LE_SET_PHY_COMMAND})


def bitmap(octets: str) -> bytes:
    """A Supported Commands bitmap as hciconfig and hcidump print it (octet 0 first, trailing zero octets left out),
    as the 64 bytes Read Local Supported Commands returns."""
    b = bytes.fromhex(octets)
    assert len(b) <= 64, octets
    return b.ljust(64, b'\0')


def with_commands(commands: bytes, opcodes) -> bytes:
    """`commands` with the bits of `opcodes` set (Bumble's table of Core Vol 4 Part E §6.27)."""
    v = int.from_bytes(commands, 'little')
    for op in opcodes:
        v |= hci.HCI_SUPPORTED_COMMANDS_MASKS[op]
    return v.to_bytes(64, 'little')


# -- the bitmaps, each from its dump ---------------------------------------------------------------------------------
# Genuine CSR8510 A10 (0a12:0001, bcdDevice 88.91): nikitos1550/ble-notes usb-adapters/buro_bu-bt40a/README.md,
# hciconfig "Octet 0 = 0xff ... Octet 24 = 0x61 ... Octet 28 = 0x7f"; the same octets in hama_d3001663, tl-link_ub400
# and tl-link_ub4a. LE 4.0 only (25.0-28.6).
CSR8510_COMMANDS = bitmap('ffffff03fefffffffffffffff30fe8fe3ff783ff1c00000061f7ffff7f')
# A CSR clone (HCI 5.0 rev 0x0810, LMP subversion 0x2312): kernel bugzilla 60824 comments #249/#250 (btmon, "Commands:
# 163 entries", the last line "LE Test End (Octet 28 - Bit 6)" added in #250), rebuilt octet by octet from the list.
# It lists Delete Stored Link Key (6.7) and Read Default Erroneous Data Reporting (18.2), which btusb calls
# "advertised, but not supported" on clones.
CSR_CLONE_COMMANDS = bitmap('bfffff03feffffff0fffff1ff20fe8fe3ff78fff1c00000061f7ffff7f')
# CYW43438 / BCM43430A1 (Pi 3B, LMP 0x2209): teslamotors/vehicle-command#101, hcidump "Commands:
# ffffff03ccffefffffffec1ff20fe8fe3ff78fff1c00040061f7ffff7ff8ffffff3f0000000000000008". No data length, privacy, PHY
# or extended commands.
CYW43438_COMMANDS = bitmap('ffffff03ccffefffffffec1ff20fe8fe3ff78fff1c00040061f7ffff7ff8ffffff3f0000000000000008')
# RTL8761B with firmware 0x097bec43 (ASUS USB-BT500 0b05:190e; the same octets for ORICO BTA-50B 0bda:8771):
# nikitos1550/ble-notes usb-adapters/asus_usb-bt500/README.md, "Octet 0 = 0xff ... Octet 39 = 0x07". PHY, all of
# octet 36, 37.0/37.1/37.5-37.7 (extended advertising, scanning, create connection), no periodic advertising, and no
# data length or resolving list commands at all.
RTL8761B_COMMANDS = bitmap('ffffff03ccffffff3ffffc9ff30fe8fe3ff78fff1c00000061f7ffff7f00e0ffff0000f0ffe38007')
# Intel AX200: the LE octets 25-41 of the btmon decode on linux-bluetooth (20201112121614.c5kko4iofg32ckxs@orac):
# 25.0-28.6, 29.3/29.4/29.5/29.7, 32.1-33.7, 34.0-37.1, 37.5-37.7, 38.7, 39.0-39.2, 41.3. Octets 0-24 INFERRED: the
# RTL8761B's (another Bluetooth 5 USB controller; the decode was not found for them). beacond uses only Reset, Set
# Event Mask and Read Local Version there, which every dump found lists.
AX200_COMMANDS = RTL8761B_COMMANDS[:25] + bytes.fromhex('f7ffff7fb80000feffffffffe380070008').ljust(39, b'\0')
# INFERRED (no dump found; chips.md §2 and §8): the CYW43438's bitmap, plus the 4.2 data length commands that the
# LE feature bit 5 of these models says exist, plus (CYW43455, a 5.0 part) the PHY commands. No privacy, no extended
# (Pi 4: "it seems to use the standard commands instead of the extended commands", wcbonner/GoveeBTTempLogger#43;
# the kernel picks extended scan only from 37.5 and 37.6).
BCM43430B0_COMMANDS = with_commands(CYW43438_COMMANDS, DATA_LENGTH_OPCODES)
CYW43455_COMMANDS = with_commands(CYW43438_COMMANDS, DATA_LENGTH_OPCODES | PHY_OPCODES)


@dataclasses.dataclass(frozen=True)
class Personality:
    name: str
    devices: str
    hci_version: int
    hci_revision: int
    lmp_version: int
    lmp_subversion: int
    manufacturer: int
    le_features: int
    acl: tuple[int, int]  # ACL data packet length, number of packets
    commands: bytes  # Read Local Supported Commands, the 64 bytes answered verbatim
    quirks: frozenset[str]
    sources: dict[str, str]
    max_sets: int | None = None  # LE Read Number of Supported Advertising Sets (extended only); None: Bumble's 240
    max_adv_data: int | None = None  # LE Read Maximum Advertising Data Length (extended only); None: Bumble's 1650

    def __post_init__(self) -> None:
        assert len(self.commands) == 64, self.name

    @property
    def extended(self) -> bool:
        return bool(self.le_features & LE_EXTENDED_ADVERTISING)

    @functools.cached_property
    def opcodes(self) -> frozenset[int]:
        """The commands the bitmap lists, by Bumble's table of Core Vol 4 Part E §6.27 (the deprecated BR/EDR bits
        the table has no opcode for are in `commands` but not here)."""
        v = int.from_bytes(self.commands, 'little')
        return frozenset(op for op, mask in hci.HCI_SUPPORTED_COMMANDS_MASKS.items() if v & mask)

    def knows(self, opcode: int) -> bool:
        """False for a command the chip answers with Unknown HCI Command: one with a bit in the table that its bitmap
        leaves out. Commands without a bit (Read Local Supported Commands, vendor commands) are not judged here."""
        return opcode not in hci.HCI_SUPPORTED_COMMANDS_MASKS or opcode in self.opcodes

    def __str__(self) -> str:
        return self.name


CYW43455 = Personality(
    name='cyw43455', devices='Raspberry Pi 3B+, 3A+, 4, 5, 500, CM5, some CM4 (CYW43455 / BCM4345C0)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_0, hci_revision=0x0172, lmp_version=0x09, lmp_subversion=0x6119,
    manufacturer=305, le_features=0x3F | LE_REMOTE_PUBLIC_KEY_VALIDATION, acl=(1021, 8), commands=CYW43455_COMMANDS,
    quirks=frozenset({'random-address-while-scanning'}),
    sources={
        'version': 'canonical/checkbox#2260 (Pi 4): "HCI Version: 5.0 (0x9) Revision: 0x172", "LMP Version: 5.0 (0x9) '
                   'Subversion: 0x6119", "Manufacturer: Cypress Semiconductor (305)"; raspberrypi/linux#7473 (Pi 5): '
                   '"Cypress controller (HCI 5.0, Rev 0x17e, LMP subversion 0x6119)"',
        'le_features': 'canonical/checkbox#2475 (Pi 5): "Raw 8-byte LE feature mask: 3f 0 0 8 0 0 0 0", "Extended '
                       'advertising support: False"',
        'acl': 'canonical/checkbox#2260: "ACL MTU: 1021:8 SCO MTU: 64:1"',
        'commands': 'INFERRED: the CYW43438\'s bitmap (teslamotors/vehicle-command#101, same vendor) plus data length '
                    '(LE feature bit 5 in checkbox#2475) and the PHY commands of a 5.0 part; no extended commands '
                    '(citruz/beacontools#63 below; wcbonner/GoveeBTTempLogger#43: the kernel "seems to use the '
                    'standard commands instead of the extended commands" on a Pi 4). A full decode (204 entries) is '
                    'in petzval/btferret#73, not read',
        'unknown commands': 'citruz/beacontools#63 (Pi 4): "LE Set Extended Scan Parameters (0x08|0x0041) ... Status: '
                            'Unknown HCI Command (0x01)"',
        'random-address-while-scanning': 'bluez/bluez#1950 (Pi 4, passive scanning): "LE Set Random Address (Opcode '
                                         '0x2005) ... Command Disallowed (0x0c)"; bluez/bluetooth-next#781 (BCM43455)',
        'legacy data length': 'raspberrypi/linux#7473: "Available adv data len | 28 | 31" (31 less the kernel\'s Flags)',
        'no interval floor': 'INFERRED: an HCI 5.0 controller takes the 5.0 floor (20 ms); no refusal seen',
    })

BCM4345C5 = Personality(
    name='bcm4345c5', devices='Raspberry Pi 400, most CM4 (BCM4345C5 / BCM43456)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_0, hci_revision=0x0036, lmp_version=0x09, lmp_subversion=0x6606,
    manufacturer=15, le_features=0x3F | LE_REMOTE_PUBLIC_KEY_VALIDATION, acl=(1021, 8), commands=CYW43455_COMMANDS,
    quirks=frozenset({'random-address-while-scanning'}),
    sources={
        'version': 'wiki.kewl.org interfaces:bluetooth ("Raspberry Pi 400 Rev 1.0"): "HCI Version: 5.0 (0x9) Revision: '
                   '0x36 / LMP Version: 5.0 (0x9) Subversion: 0x6606 / Manufacturer: Broadcom Corporation (15)", '
                   '"ACL MTU: 1021:8"; the kernel\'s btbcm.c: "{ 0x6606, "BCM4345C5" }"; RPi-Distro/bluez-firmware#9 '
                   '(pelwell): "CM4 and Pi 400 both use the Synaptics 43456, which has different firmware"',
        'le_features': 'INFERRED: no dump found (RPi-Distro/firmware-nonfree#35 not read). The CYW43455\'s: the same '
                       'BCM4345 die (C5 against C0), the same firmware vendor and HCI 5.0, and the Pi OS stack treats '
                       'both as legacy-only (no LE extended advertising)',
        'commands': 'INFERRED: the CYW43455\'s model. LE Set Default PHY (35.5) is listed for certain: the kernel sent '
                    'it on a Pi 400 ("Opcode 0x2031 failed: -22", miraclelinux/meta-emlinux#321), and hci_sync.c sends '
                    'it only when commands[35] & 0x20',
        'random-address-while-scanning': 'Core 5.x Vol 4 Part E §7.8.4 (all controllers); the CYW43455 traces',
    })

CYW43438 = Personality(
    name='cyw43438', devices='Raspberry Pi 3B, Zero W, some Zero 2 W (CYW43438 / BCM43430A1)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_1, hci_revision=0x0168, lmp_version=0x07, lmp_subversion=0x2209,
    manufacturer=15, le_features=LE_ENCRYPTION | LE_41, acl=(1021, 8), commands=CYW43438_COMMANDS,
    quirks=frozenset({'random-address-while-scanning', 'pre-5.0-interval-floor'}),
    sources={
        'version': 'currantlabs/ble#29: "HCI Version: 4.1 (0x7) HCI Revision: 0xb6", "LMP Subversion: 0x2209", '
                   '"Manufacturer: Broadcom Corporation (15)"; arkq/bluez-alsa#264: "Revision: 0x168" (newer firmware)',
        'acl': 'currantlabs/ble#29: "ACL MTU 1021:8 SCO MTU 64:1"',
        'le_features': 'INFERRED: the Bluetooth 4.1 link-layer features, without Data Length Extension '
                       '(RPi-Distro/firmware-nonfree#31, same 0x2209 firmware: "there is no LE Data Length Extension '
                       'feature supported"); no LE feature dump found',
        'commands': 'teslamotors/vehicle-command#101 (Pi 3B, "LMP Subversion: 0x2209"), hcidump, verbatim',
        'random-address-while-scanning': 'Core 5.x Vol 4 Part E §7.8.4 (all controllers); the CYW43455 traces above',
        'pre-5.0-interval-floor': 'Core 4.1 Vol 2 Part E §7.8.5 (an HCI 4.1 controller)',
    })

BCM43430B0 = Personality(
    name='bcm43430b0', devices='Raspberry Pi Zero 2 W (BCM43430B0 variant)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_2, hci_revision=0x005C, lmp_version=0x08, lmp_subversion=0x410C,
    manufacturer=15, le_features=LE_ENCRYPTION | LE_41 | LE_DLE, acl=(1021, 7), commands=BCM43430B0_COMMANDS,
    quirks=frozenset({'random-address-while-scanning', 'pre-5.0-interval-floor'}),
    sources={
        'version': 'a public hciconfig dump of a Zero 2 W: "HCI Version: 4.2 (0x8) Revision: 0x5c ... Subversion: '
                   '0x410c ... Broadcom Corporation (15)", "ACL MTU: 1021:7"; the kernel\'s btbcm.c '
                   'bcm_uart_subver_table: "{ 0x410c, "BCM43430B0" }"',
        'le_features': 'INFERRED: 4.1 features plus Data Length Extension ("some Z2Ws can do DLE and others can\'t", '
                       'RPi-Distro/firmware-nonfree#31)',
        'commands': 'INFERRED: no dump found; the CYW43438\'s bitmap plus the data length commands its LE feature says '
                    'it has; no privacy, PHY or extended commands (a 4.2 part)',
        'random-address-while-scanning': 'Core 5.x Vol 4 Part E §7.8.4 (all controllers); the CYW43455 traces above',
        'pre-5.0-interval-floor': 'Core 4.2 Vol 2 Part E §7.8.5 (an HCI 4.2 controller)',
    })

RTL8761B = Personality(
    name='rtl8761b', devices='Realtek RTL8761B / RTL8761BU USB dongles (ASUS USB-BT500, TP-Link UB500, …)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_1, hci_revision=0xDFC6, lmp_version=0x0A, lmp_subversion=0xD922,
    manufacturer=93, le_features=0x00665FBD, acl=(1021, 6), commands=RTL8761B_COMMANDS, max_sets=4,
    quirks=frozenset({'mixing-rule', 'random-address-while-scanning'}),
    sources={
        'version': 'Realtek on linux-bluetooth (b452257b550a47feb1c45b905018fe17@realtek.com, RTL8761BUV 0bda:8771): '
                   '"HCI Version: 5.1 (0xa) Revision: 0xdfc6 ... Subversion: 0xd922"; nikitos1550/ble-notes (ASUS '
                   'USB-BT500): "Manufacturer: Realtek Semiconductor Corporation (93)", "ACL MTU: 1021:6"',
        'le_features': 'opendroneid/transmitter-linux#12 (ONVIAN RTL8761B): "Features: 0xbd 0x5f 0x66 0x00 0x00 0x00 '
                       '0x00 0x00" (bit 12, extended advertising, is set)',
        'commands': 'nikitos1550/ble-notes asus_usb-bt500 (fw 0x097bec43), hciconfig, verbatim. For this firmware '
                    '(0xdfc6d922) INFERRED the same: no dump found; its ROM (ugreen_cm390, no firmware loaded) has the '
                    'same octets 36 and 37, and the kernel took extended scan on 0xdfc6d922 before '
                    'HCI_QUIRK_BROKEN_EXT_SCAN (bluez/bluetooth-next#637), which needs 37.5 and 37.6',
        'max_sets': 'linux-bluetooth (8b071973dfd2da7d8faf5d5720637662616e01cb.camel@interlinx.bc.ca, 0bda:8771): '
                    '"SupportedInstances: 0x04 (4)", which the kernel copies from the controller\'s number of sets '
                    '(INFERRED: the HCI answer itself was not shown)',
        'mixing-rule': 'Core 5.x Vol 4 Part E §3.1.1',
    })

RTL8761B_LEGACY_SCAN = dataclasses.replace(
    RTL8761B, name='rtl8761b-legacy-scan',
    devices='RTL8761B(U) on kernels 7.1.9, 6.18.45 and later (HCI_QUIRK_BROKEN_EXT_SCAN: the kernel scans with the '
            'legacy commands)',
    quirks=RTL8761B.quirks | {'kernel-legacy-scan'},
    sources={**RTL8761B.sources,
             'kernel-legacy-scan': 'bluez/bluetooth-next drivers/bluetooth/btrtl.c btrtl_set_quirks, "case '
                                   'CHIP_ID_8761B: ... hci_set_quirk(hdev, HCI_QUIRK_BROKEN_EXT_SCAN)" (commit '
                                   '5ead2063611a, bluetooth-next#133); #637: "the culprit has already reached 7.1.9 and '
                                   '6.18.45"; hci_core.h use_ext_scan() is then false, ext_adv_capable() is not, so the '
                                   'kernel scans with 0x200B/0x200C and advertises with the extended commands',
             'the kernel\'s legacy scan answered': 'INFERRED: Command Disallowed (0x0C) by the mixing rule, since the '
                                                   'kernel\'s init reads the number of sets (0x203B) first (the '
                                                   'AX200 trace, #69). The firmware seen instead never answers LE Set '
                                                   'Scan Enable ("command 0x200c tx timeout", #637, #641) and btusb '
                                                   'resets it: not modelled'})

AX200 = Personality(
    name='ax200', devices='Intel Wi-Fi 6 AX200 (and AX201, 9560: the same legacy-bootloader family)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_1, hci_revision=0x0100, lmp_version=0x0A, lmp_subversion=0x0100,
    manufacturer=2, le_features=0x080059FF, acl=(1021, 4), commands=AX200_COMMANDS, max_sets=6,
    quirks=frozenset({'mixing-rule', 'random-address-while-scanning'}),
    sources={
        'version': 'linux-bluetooth 2020-11-12 (20201112121614.c5kko4iofg32ckxs@orac): "HCI version: Bluetooth 5.1 '
                   '(0x0a) - Revision 256 (0x0100) ... Intel Corp. (2)"; deviceplug/btleplug#52: "same issue with an '
                   'Intel AX 200" (INFERRED: the trace does not name the chip)',
        'max_sets': 'the same trace: "Num supported adv sets: 6"',
        'le_features': 'the same trace: LE features ff 59 00 08 (2M, Coded, Extended Advertising)',
        'acl': 'the same trace: ACL 1021 x 4',
        'commands': 'the same trace\'s decode of Read Local Supported Commands for octets 25-41; octets 0-24 '
                    'INFERRED (the RTL8761B\'s)',
        'mixing-rule': 'the same thread: after extended commands "LE Set Advertising Parameters ... Status: Command '
                       'Disallowed (0x0c)"',
    })

AX210 = Personality(
    name='ax210', devices='Intel Wi-Fi 6E AX210 (USB 8087:0032)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_2, hci_revision=0x3597, lmp_version=0x0B, lmp_subversion=0x3597,
    manufacturer=2, le_features=0x080059FF, acl=(1021, 4), commands=AX200_COMMANDS, max_sets=None,
    quirks=frozenset({'mixing-rule', 'random-address-while-scanning'}),
    sources={
        'version': 'bluez/bluez#661 (Intel Read Version TLV): "USB PID(24): 0x0032 ... HCI Revision(37): 0x3597 ... '
                   'LMP SubVersion(38): 0x3597"; the HCI version 5.2 is INFERRED (no dump found)',
        'le_features': 'INFERRED: the AX200\'s (same vendor, newer part)',
        'commands': 'INFERRED: the AX200\'s model (no dump found)',
        'max_sets': 'not found in a public trace: Bumble\'s answer (240) stands',
        'mixing-rule': 'as the AX200',
    })

CSR8510 = Personality(
    name='csr8510', devices='CSR8510 A10 USB dongles, genuine (0a12:0001)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_0, hci_revision=0x22BB, lmp_version=0x06, lmp_subversion=0x22BB,
    manufacturer=10, le_features=LE_ENCRYPTION, acl=(310, 10), commands=CSR8510_COMMANDS,
    quirks=frozenset({'random-address-while-scanning', 'pre-5.0-interval-floor'}),
    sources={
        'version': 'nikitos1550/ble-notes (buro_bu-bt40a): "HCI Version: 4.0 (0x6) Revision: 0x22bb ... Subversion: '
                   '0x22bb ... Cambridge Silicon Radio (10)"; ACL 310 x 10; securing/gattacker#16: "HCI Version: 4.0 '
                   '(0x6) Revision: 0x22bb"',
        'le_features': 'INFERRED: the one Bluetooth 4.0 link-layer feature (LE Encryption)',
        'commands': 'nikitos1550/ble-notes (buro_bu-bt40a), hciconfig, verbatim: only Bluetooth 4.0 LE commands',
        'pre-5.0-interval-floor': 'Core 4.0 Vol 2 Part E §7.8.5 (an HCI 4.0 controller)',
    })

_CLONE_SOURCES = {
    'commands': 'INFERRED: the bitmap of another clone (HCI 5.0 rev 0x0810, LMP subversion 0x2312: kernel bugzilla '
                '60824 comments #249/#250, "Commands: 163 entries", rebuilt from the list); every CSR-family dump '
                'found stops at LE Test End (28.6)',
    'event-filter-lockup': 'drivers/bluetooth/btusb.c btusb_setup_csr sets HCI_QUIRK_BROKEN_FILTER_CLEAR_ALL on every '
                           'detected clone; include/net/bluetooth/hci.h: "A subset of the CSR controller clones '
                           'struggle with this and instantly lock up"',
    'unsupported-advertised': 'btusb_setup_csr: HCI_QUIRK_BROKEN_STORED_LINK_KEY, HCI_QUIRK_BROKEN_ERR_DATA_REPORTING '
                              '("advertised, but not supported"); the status answered is INFERRED',
    'not modelled': 'the bulk-RX stall that needs a USB suspend (btusb: "Their bulk RX endpoint will never report any '
                    'data unless the device was suspended at least once"), a kernel matter; "Opcode 0x2005 failed: -32" '
                    '(k1moradi/bluetooth-driver) is a transport error (EPIPE) its author traces to short BR/EDR replies, '
                    'not an HCI status, so no refusal of LE Set Random Address is modelled',
}

CSR8510_CLONE = Personality(
    name='csr8510-clone', devices='counterfeit "CSR8510 A10" dongles reporting 4.0 (the kernel says "Unbranded CSR '
                                  'clone detected")',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_0, hci_revision=0x3120, lmp_version=0x06, lmp_subversion=0x22BB,
    manufacturer=10, le_features=LE_ENCRYPTION, acl=(310, 10), commands=CSR_CLONE_COMMANDS,
    quirks=frozenset({'random-address-while-scanning', 'event-filter-lockup', 'unsupported-advertised',
                      'pre-5.0-interval-floor'}),
    sources={
        'version': 'linux-bluetooth (3b6c7c18-dc48-b924-bd09-3638a5c741a4@gmail.com): "Name: \'CSR8510 A10.\' ... '
                   'HCI Version: 4.0 (0x6) Revision: 0x3120 ... Subversion: 0x22bb" (revision != subversion: a clone '
                   'to btusb_setup_csr)',
        'pre-5.0-interval-floor': 'Core 4.0 Vol 2 Part E §7.8.5 (an HCI 4.0 controller)',
        **_CLONE_SOURCES,
    })

CSR8510_CLONE_5 = Personality(
    name='csr8510-clone-5', devices='the common counterfeit "CSR8510 A10" reporting 5.0 (bcdDevice 25.20)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_0, hci_revision=0x3120, lmp_version=0x09, lmp_subversion=0x22BB,
    manufacturer=10, le_features=LE_ENCRYPTION, acl=(310, 10), commands=CSR_CLONE_COMMANDS,
    quirks=frozenset({'random-address-while-scanning', 'event-filter-lockup', 'unsupported-advertised',
                      'pre-5.0-interval-floor'}),
    sources={
        'version': 'kernel bugzilla 60824, mailed to linux-bluetooth (a Pi user): "CSR: Setting up dongle with HCI '
                   'ver=9 rev=3120; LMP ver=9 subver=22bb; manufacturer=10", "Unbranded CSR clone detected"; '
                   'k1moradi/bluetooth-driver README.md: "bcdDevice=25.20 ... HCI ver=9 rev=3120 ... LMP ver=9 '
                   'subver=22bb; manufacturer=10" (btusb: lmp_subver <= 0x22bb with hci_ver > 4.0 is a clone)',
        'le_features': 'INFERRED: the 4.0 clone\'s (LE Encryption); its LE commands stop at 4.0',
        'acl': 'INFERRED: the other CSR8510s\' 310 x 10',
        'pre-5.0-interval-floor': 'INFERRED: a 4.0 link layer (its LE commands stop at 28.6, 4.0\'s last) reporting '
                                  '5.0, so it keeps 4.0\'s floor although its version says 5.0; no trace of the '
                                  'refusal was found',
        **_CLONE_SOURCES,
    })

ALL = [CYW43455, BCM4345C5, CYW43438, BCM43430B0, RTL8761B, RTL8761B_LEGACY_SCAN, AX200, AX210, CSR8510, CSR8510_CLONE,
       CSR8510_CLONE_5]
BY_NAME = {p.name: p for p in ALL}
