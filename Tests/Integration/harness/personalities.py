"""Controller personalities: what the Bluetooth controllers people own answer over HCI, for the Bumble lab.

Each one sets what Bumble's controller reports (Read Local Version Information, the LE features, the supported
commands, the number of advertising sets, the largest advertising data, the ACL buffers) and names the quirks the lab
controller then plays (LabController in lab.py). Every value carries its source in `sources`: a public trace, issue or
kernel file, with a few words of it. A value no public source showed is marked INFERRED with the reasoning, or left to
Bumble (None) and said so; docs/testing.md lists what each personality covers and what it cannot.

The quirks:
  * unknown-extended: a controller without LE extended advertising answers every extended advertising and scanning
    command, and LE Read Number of Supported Advertising Sets, with Unknown HCI Command (0x01), as the Pi 4's CYW43455
    does for LE Set Extended Scan Parameters (citruz/beacontools#63).
  * random-address-while-scanning: LE Set Random Address gets Command Disallowed (0x0C) while scanning or legacy
    advertising is enabled (Core 5.x Vol 4 Part E §7.8.4; seen on a Pi 4 and a BCM43455 next to the kernel's scans:
    bluez/bluez#1950, bluez/bluetooth-next#781). The lab's `kernel_scan()` turns scanning on as the kernel would for
    Home Assistant on the same adapter.
  * mixing-rule: once one advertising family was used since reset, the other gets Command Disallowed (Core §3.1.1;
    an Intel controller's trace on linux-bluetooth, 2020-11-12). Every personality with extended advertising has it.
  * event-filter-lockup: a counterfeit CSR8510 locks up when it gets Set Event Filter with Filter_Type 0x00 (Clear All
    Filters): no reply, to it or to anything after it (drivers/bluetooth/btusb.c btusb_setup_csr,
    HCI_QUIRK_BROKEN_FILTER_CLEAR_ALL: "without these the controller will lock up").
  * unsupported-advertised: commands a counterfeit CSR lists as supported but answers with Unknown HCI Command
    (Delete Stored Link Key, Read Default Erroneous Data Reporting: btusb.c HCI_QUIRK_BROKEN_STORED_LINK_KEY and
    HCI_QUIRK_BROKEN_ERR_DATA_REPORTING, "advertised, but not supported"; the status itself is INFERRED).
"""
from __future__ import annotations

import dataclasses

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
    quirks: frozenset[str]
    sources: dict[str, str]
    max_sets: int | None = None  # LE Read Number of Supported Advertising Sets (extended only); None: Bumble's 240
    max_adv_data: int | None = None  # LE Read Maximum Advertising Data Length (extended only); None: Bumble's 1650

    @property
    def extended(self) -> bool:
        return bool(self.le_features & LE_EXTENDED_ADVERTISING)

    def __str__(self) -> str:
        return self.name


CYW43455 = Personality(
    name='cyw43455', devices='Raspberry Pi 3B+, 4, 5 (CYW43455 / BCM4345C0)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_0, hci_revision=0x0172, lmp_version=0x09, lmp_subversion=0x6119,
    manufacturer=305, le_features=0x3F | LE_REMOTE_PUBLIC_KEY_VALIDATION, acl=(1021, 8),
    quirks=frozenset({'unknown-extended', 'random-address-while-scanning'}),
    sources={
        'version': 'canonical/checkbox#2260 (Pi 4): "HCI Version: 5.0 (0x9) Revision: 0x172", "LMP Version: 5.0 (0x9) '
                   'Subversion: 0x6119", "Manufacturer: Cypress Semiconductor (305)"; raspberrypi/linux#7473 (Pi 5): '
                   '"Cypress controller (HCI 5.0, Rev 0x17e, LMP subversion 0x6119)"',
        'le_features': 'canonical/checkbox#2475 (Pi 5): "Raw 8-byte LE feature mask: 3f 0 0 8 0 0 0 0", "Extended '
                       'advertising support: False"',
        'acl': 'canonical/checkbox#2260: "ACL MTU: 1021:8 SCO MTU: 64:1"',
        'unknown-extended': 'citruz/beacontools#63 (Pi 4): "LE Set Extended Scan Parameters (0x08|0x0041) ... Status: '
                            'Unknown HCI Command (0x01)"',
        'random-address-while-scanning': 'bluez/bluez#1950 (Pi 4, passive scanning): "LE Set Random Address (Opcode '
                                         '0x2005) ... Command Disallowed (0x0c)"; bluez/bluetooth-next#781 (BCM43455)',
        'legacy data length': 'raspberrypi/linux#7473: "Available adv data len | 28 | 31" (31 less the kernel\'s Flags)',
    })

CYW43438 = Personality(
    name='cyw43438', devices='Raspberry Pi 3B, Zero W, some Zero 2 W (CYW43438 / BCM43430A1)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_1, hci_revision=0x0168, lmp_version=0x07, lmp_subversion=0x2209,
    manufacturer=15, le_features=LE_ENCRYPTION | LE_41, acl=(1021, 8),
    quirks=frozenset({'unknown-extended', 'random-address-while-scanning'}),
    sources={
        'version': 'currantlabs/ble#29: "HCI Version: 4.1 (0x7) HCI Revision: 0xb6", "LMP Subversion: 0x2209", '
                   '"Manufacturer: Broadcom Corporation (15)"; arkq/bluez-alsa#264: "Revision: 0x168" (newer firmware)',
        'acl': 'currantlabs/ble#29: "ACL MTU 1021:8 SCO MTU 64:1"',
        'le_features': 'INFERRED: the Bluetooth 4.1 link-layer features, without Data Length Extension '
                       '(RPi-Distro/firmware-nonfree#31, same 0x2209 firmware: "there is no LE Data Length Extension '
                       'feature supported"); no LE feature dump found',
        'unknown-extended': 'INFERRED: a 4.1 controller has no extended advertising commands',
        'random-address-while-scanning': 'Core 5.x Vol 4 Part E §7.8.4 (all controllers); the CYW43455 traces above',
    })

BCM43430B0 = Personality(
    name='bcm43430b0', devices='Raspberry Pi Zero 2 W (BCM43430B0 variant)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_2, hci_revision=0x005C, lmp_version=0x08, lmp_subversion=0x410C,
    manufacturer=15, le_features=LE_ENCRYPTION | LE_41 | LE_DLE, acl=(1021, 7),
    quirks=frozenset({'unknown-extended', 'random-address-while-scanning'}),
    sources={
        'version': 'a public hciconfig dump of a Zero 2 W: "HCI Version: 4.2 (0x8) Revision: 0x5c ... Subversion: '
                   '0x410c ... Broadcom Corporation (15)", "ACL MTU: 1021:7"; the kernel\'s btbcm.c '
                   'bcm_uart_subver_table: "{ 0x410c, "BCM43430B0" }"',
        'le_features': 'INFERRED: 4.1 features plus Data Length Extension ("some Z2Ws can do DLE and others can\'t", '
                       'RPi-Distro/firmware-nonfree#31)',
        'unknown-extended': 'INFERRED: a 4.2 controller has no extended advertising commands',
        'random-address-while-scanning': 'Core 5.x Vol 4 Part E §7.8.4 (all controllers); the CYW43455 traces above',
    })

RTL8761B = Personality(
    name='rtl8761b', devices='Realtek RTL8761B / RTL8761BU USB dongles (ASUS USB-BT500, TP-Link UB500, …)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_1, hci_revision=0xDFC6, lmp_version=0x0A, lmp_subversion=0xD922,
    manufacturer=93, le_features=0x00665FBD, acl=(1021, 6), max_sets=4,
    quirks=frozenset({'mixing-rule', 'random-address-while-scanning'}),
    sources={
        'version': 'Realtek on linux-bluetooth (b452257b550a47feb1c45b905018fe17@realtek.com, RTL8761BUV 0bda:8771): '
                   '"HCI Version: 5.1 (0xa) Revision: 0xdfc6 ... Subversion: 0xd922"; nikitos1550/ble-notes (ASUS '
                   'USB-BT500): "Manufacturer: Realtek Semiconductor Corporation (93)", "ACL MTU: 1021:6"',
        'le_features': 'opendroneid/transmitter-linux#12 (ONVIAN RTL8761B): "Features: 0xbd 0x5f 0x66 0x00 0x00 0x00 '
                       '0x00 0x00" (bit 12, extended advertising, is set)',
        'max_sets': 'linux-bluetooth (8b071973dfd2da7d8faf5d5720637662616e01cb.camel@interlinx.bc.ca, 0bda:8771): '
                    '"SupportedInstances: 0x04 (4)", which the kernel copies from the controller\'s number of sets '
                    '(INFERRED: the HCI answer itself was not shown)',
        'mixing-rule': 'Core 5.x Vol 4 Part E §3.1.1',
    })

AX200 = Personality(
    name='ax200', devices='Intel Wi-Fi 6 AX200 (and AX201, 9560: the same legacy-bootloader family)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_1, hci_revision=0x0100, lmp_version=0x0A, lmp_subversion=0x0100,
    manufacturer=2, le_features=0x080059FF, acl=(1021, 4), max_sets=6,
    quirks=frozenset({'mixing-rule', 'random-address-while-scanning'}),
    sources={
        'version': 'linux-bluetooth 2020-11-12 (20201112121614.c5kko4iofg32ckxs@orac): "HCI version: Bluetooth 5.1 '
                   '(0x0a) - Revision 256 (0x0100) ... Intel Corp. (2)"; deviceplug/btleplug#52: "same issue with an '
                   'Intel AX 200" (INFERRED: the trace does not name the chip)',
        'max_sets': 'the same trace: "Num supported adv sets: 6"',
        'le_features': 'the same trace: LE features ff 59 00 08 (2M, Coded, Extended Advertising)',
        'acl': 'the same trace: ACL 1021 x 4',
        'mixing-rule': 'the same thread: after extended commands "LE Set Advertising Parameters ... Status: Command '
                       'Disallowed (0x0c)"',
    })

AX210 = Personality(
    name='ax210', devices='Intel Wi-Fi 6E AX210 (USB 8087:0032)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_5_2, hci_revision=0x3597, lmp_version=0x0B, lmp_subversion=0x3597,
    manufacturer=2, le_features=0x080059FF, acl=(1021, 4), max_sets=None,
    quirks=frozenset({'mixing-rule', 'random-address-while-scanning'}),
    sources={
        'version': 'bluez/bluez#661 (Intel Read Version TLV): "USB PID(24): 0x0032 ... HCI Revision(37): 0x3597 ... '
                   'LMP SubVersion(38): 0x3597"; the HCI version 5.2 is INFERRED (no dump found)',
        'le_features': 'INFERRED: the AX200\'s (same vendor, newer part)',
        'max_sets': 'not found in a public trace: Bumble\'s answer (240) stands',
        'mixing-rule': 'as the AX200',
    })

CSR8510 = Personality(
    name='csr8510', devices='CSR8510 A10 USB dongles, genuine (0a12:0001)',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_0, hci_revision=0x22BB, lmp_version=0x06, lmp_subversion=0x22BB,
    manufacturer=10, le_features=LE_ENCRYPTION, acl=(310, 10),
    quirks=frozenset({'unknown-extended', 'random-address-while-scanning'}),
    sources={
        'version': 'nikitos1550/ble-notes (buro_bu-bt40a): "HCI Version: 4.0 (0x6) Revision: 0x22bb ... Subversion: '
                   '0x22bb ... Cambridge Silicon Radio (10)"; ACL 310 x 10; securing/gattacker#16: "HCI Version: 4.0 '
                   '(0x6) Revision: 0x22bb"',
        'le_features': 'INFERRED: the one Bluetooth 4.0 link-layer feature (LE Encryption)',
        'unknown-extended': 'the same dump: only Bluetooth 4.0 LE commands',
    })

CSR8510_CLONE = Personality(
    name='csr8510-clone', devices='counterfeit "CSR8510 A10" dongles (the kernel says "Unbranded CSR clone detected")',
    hci_version=hci.HCI_VERSION_BLUETOOTH_CORE_4_0, hci_revision=0x3120, lmp_version=0x06, lmp_subversion=0x22BB,
    manufacturer=10, le_features=LE_ENCRYPTION, acl=(310, 10),
    quirks=frozenset({'unknown-extended', 'random-address-while-scanning', 'event-filter-lockup', 'unsupported-advertised'}),
    sources={
        'version': 'linux-bluetooth (3b6c7c18-dc48-b924-bd09-3638a5c741a4@gmail.com): "Name: \'CSR8510 A10.\' ... '
                   'HCI Version: 4.0 (0x6) Revision: 0x3120 ... Subversion: 0x22bb" (revision != subversion: a clone '
                   'to btusb_setup_csr)',
        'event-filter-lockup': 'drivers/bluetooth/btusb.c btusb_setup_csr sets HCI_QUIRK_BROKEN_FILTER_CLEAR_ALL; '
                               'include/net/bluetooth/hci.h: "A subset of the CSR controller clones struggle with this '
                               'and instantly lock up"',
        'unsupported-advertised': 'btusb_setup_csr: HCI_QUIRK_BROKEN_STORED_LINK_KEY, HCI_QUIRK_BROKEN_ERR_DATA_REPORTING '
                                  '("advertised, but not supported"); the status answered is INFERRED',
    })

ALL = [CYW43455, CYW43438, BCM43430B0, RTL8761B, AX200, AX210, CSR8510, CSR8510_CLONE]
BY_NAME = {p.name: p for p in ALL}
