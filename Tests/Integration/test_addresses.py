"""Every beacon its own device: a static address per beacon on extended sets and in legacy time slices, kept across a
restart and a reordered file; the upgrade from the one address earlier versions kept; chosen addresses; what payload
and check-config show; TX power beside measured_power; `scan --calibrate`; and the parsers gateways run decoding
what a second radio heard.

Addresses come from what Bumble's scanner radio heard (each report's own address) and from Bumble's controller
state (each set's random address), never from beacond's logs. The gateway parsers are the ones on PyPI:
- Home Assistant: bluetooth-data-tools parses the advertisement (as for its ESPHome proxies and local adapters) and
  ibeacon-ble decodes the iBeacon; HA's device for a fixed-MAC iBeacon is uuid_major_minor_address;
- ble_monitor (the Passive BLE Monitor integration): bleparser, on the HCI LE Advertising Report a gateway's socket
  delivers (built here from the scanner's report: type, address, data, RSSI);
- Theengs Gateway and OpenMQTTGateway: TheengsDecoder on the JSON they feed it (the id is the MAC).
None of these decodes Eddystone-UID (bleparser takes any long Eddystone service data for a RuuviTag and raises on it,
Theengs knows only vendors' Eddystone sensors), so for it HA's own advertisement parser and beacontools check the
service data.
"""
from __future__ import annotations

import asyncio
import json
import re

import pytest

from conftest import APPLE_UUID, ibeacon_bytes, kept_addresses, run_cli
from harness.lab import Lab, wait_for
from harness.notify import NotifyListener
import output_schema
from test_beacons import ALT, ALT_BYTES, EDDY, EDDY_BYTES, IB, IB_BYTES, heard_all
from test_formats import INSTANCE, NAMESPACE

IB2 = IB.replace('minor = 2', 'minor = 9')
IB2_BYTES = ibeacon_bytes(major=1, minor=2 + 7)
STATIC = re.compile(r'[C-F][0-9A-F](:[0-9A-F]{2}){5}')


def one_address_each(frames: dict[bytes, set[str]], wanted: list[bytes]) -> dict[bytes, str]:
    """Each frame was heard from exactly one address, and no two frames share one."""
    for f in wanted:
        assert len(frames[f]) == 1, f'{f.hex()[:24]}… heard from {frames[f]}'
    got = {f: min(frames[f]) for f in wanted}
    assert len(set(got.values())) == len(wanted), f'beacons share an address: {got}'
    return got


@pytest.mark.parametrize('extended', [True, False], ids=['extended', 'legacy'])
def test_each_beacon_is_heard_from_its_own_address_the_same_after_a_restart_and_a_reordered_file(
        tmp_path, processes, state_directory, extended):
    conf = tmp_path / 'beacond.conf'
    sock = tmp_path / 'hci.sock'
    three = [IB_BYTES, ALT_BYTES, EDDY_BYTES]
    seen = []
    # The file as written, then reordered with a fourth beacon added: the three keep theirs, the fourth gets its own.
    for run, (text, frames) in enumerate(((IB + ALT + EDDY, three), (EDDY + IB2 + IB + ALT, three + [IB2_BYTES]))):
        conf.write_text(text)
        (tmp_path / f'run{run}').mkdir()
        with Lab(f'unix-server:{sock}', extended=extended) as lab:
            notify = NotifyListener(tmp_path / f'run{run}')
            try:
                b = processes('run', '-c', str(conf), '-d', f'unix:{sock}', env={'NOTIFY_SOCKET': notify.path})
                got = one_address_each(heard_all(lab, frames, timeout=10), frames)
                assert all(STATIC.fullmatch(a) for a in got.values()), got
                assert set(kept_addresses(state_directory).values()) == set(got.values())
                status = notify.wait_for(f'STATUS=Advertising {len(frames)} beacons')
                for f, a in got.items():
                    assert f' from {a}' in status, status
                if not extended:
                    assert 'time-sliced' in status and "each slot restarted from its beacon's address" in status, status
                    # What a slot's restart costs, measured by beacond on the controller it drives. The slots are
                    # 100 ms, or longer when the restarts cost more than SliceTiming allows for (on a loaded machine:
                    # 12.5 ms, 102.5 ms slots).
                    wait_for(lambda: re.search(r"Time slices on \S+ restart the advertiser from each beacon's own address: "
                                               r'\d commands, at most [\d.]+ (ms|µs) off the air of every [\d.]+ ms slot, '
                                               r'advertising every 35 ms within it', b.log()),
                             10, what='the slot restart cost')
                else:
                    sets = {s['data']: s['random_address'] for s in lab.state()['sets'].values() if s['enabled']}
                    assert sets == got  # the controller's own record of each set's address
                seen.append(got)
                assert b.stop() == 0
            finally:
                notify.close()
    assert {f: seen[1][f] for f in three} == seen[0]
    assert seen[1][IB2_BYTES] not in seen[0].values()


def test_an_upgrade_gives_the_one_kept_address_to_the_first_beacon(tmp_path, processes, state_directory):
    (state_directory / 'static-address').write_text('C6:12:34:56:78:9A\n')  # what earlier versions kept
    conf = tmp_path / 'beacond.conf'
    conf.write_text(ALT + IB)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        got = one_address_each(heard_all(lab, [ALT_BYTES, IB_BYTES], timeout=10), [ALT_BYTES, IB_BYTES])
    assert got[ALT_BYTES] == 'C6:12:34:56:78:9A' and got[IB_BYTES] != 'C6:12:34:56:78:9A'
    assert kept_addresses(state_directory)[f'altbeacon {APPLE_UUID} 513 1027'] == 'C6:12:34:56:78:9A'
    assert (state_directory / 'static-address').read_text() == 'C6:12:34:56:78:9A\n'  # left for a downgrade


@pytest.mark.parametrize('extended', [True, False], ids=['extended', 'legacy'])
def test_chosen_addresses_go_on_the_air_exactly(tmp_path, processes, state_directory, extended):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + 'address = "C6:00:00:00:00:01"\n' + ALT + 'address = "d7:00:00:00:00:02"\n' + EDDY)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}', extended=extended) as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        got = one_address_each(heard_all(lab, [IB_BYTES, ALT_BYTES, EDDY_BYTES], timeout=10), [IB_BYTES, ALT_BYTES, EDDY_BYTES])
    assert got[IB_BYTES] == 'C6:00:00:00:00:01' and got[ALT_BYTES] == 'D7:00:00:00:00:02'
    # Only the beacon without a chosen address has a kept one.
    assert kept_addresses(state_directory) == {'eddystone-uid 00112233445566778899 a1b2c3d4e5f6': got[EDDY_BYTES]}


def test_bad_chosen_addresses_are_config_errors_that_name_both_beacons(tmp_path, processes):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + 'address = "C6:00:00:00:00:01"\n' + ALT + 'address = "C6:00:00:00:00:01"\n'
                    + EDDY + 'address = "46:00:00:00:00:03"\n')
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 78
    assert (f"{conf}:13:11: error: 'address' in [[beacon]] #2 is C6:00:00:00:00:01, the same as in [[beacon]] #1 (line 5): "
            'gateways would take the two for one device; give each beacon its own address') in r.stderr, r.stderr
    assert f"{conf}:20:11: error: 'address' in [[beacon]] #3 is not a random static address: its two top bits must be 11" in r.stderr
    assert '2 errors in' in r.stderr
    b = processes('run', '-c', str(conf), '-d', 'unix:/nonexistent')
    assert b.wait(10) == 78


def test_payload_and_check_config_show_each_beacons_address(tmp_path, processes, state_directory):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + 'address = "D7:00:00:00:00:02"\n' + '[controller]\nbackend = "hci"\n')
    file = state_directory / 'addresses'
    r = run_cli('check-config', '-c', str(conf))
    assert r.returncode == 0, r.stderr
    assert f'address       static, made at first start (kept in {file})' in r.stdout, r.stdout
    assert 'address       D7:00:00:00:00:02 (chosen)' in r.stdout
    lines = output_schema.lines('payload', run_cli('payload', '-c', str(conf), '--format', 'json').stdout)
    assert [(l['address'], l['address_setting']) for l in lines] == [(None, 'static'), ('D7:00:00:00:00:02', 'chosen')]
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        got = heard_all(lab, [IB_BYTES], timeout=10)
        b.stop()
    (mine,) = got[IB_BYTES]
    r = run_cli('check-config', '-c', str(conf))
    assert f'address       {mine} (static, kept in {file})' in r.stdout, r.stdout
    lines = output_schema.lines('payload', run_cli('payload', '-c', str(conf), '--format', 'json').stdout)
    assert lines[0]['address'] == mine
    # The hcitool recipe sets the address it advertises from: LE Set Random Address, own address type random.
    hcitool = run_cli('payload', '-c', str(conf), '--format', 'hcitool').stdout
    wire = ' '.join(reversed(mine.lower().split(':')))
    assert f'hcitool -i hci0 cmd 0x08 0x0005 {wire}\n' in hcitool, hcitool
    assert 'hcitool -i hci0 cmd 0x08 0x0005 02 00 00 00 00 d7\n' in hcitool


def test_tx_power_is_logged_beside_measured_power_and_a_value_far_off_is_warned_once(tmp_path, processes):
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + 'measured_power = -100\n' + ALT)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        b = processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        heard_all(lab, [ibeacon_bytes(major=1, minor=2, power=-100), ALT_BYTES], timeout=10)
        tx = 0  # what Bumble's controller selects: its reply to LE Set Extended Advertising Parameters says 0 dBm
        wait_for(lambda: f'TX power on unix:{sock} as the controller reports it: beacon 1: TX {tx} dBm, measured_power -100 dBm at 1 m; '
                         f'beacon 2: TX {tx} dBm, measured_power -61 dBm at 1 m' in b.log(), 10, what='the TX power line')
        warning = f"Beacon 1's measured_power of -100 dBm at 1 m is {tx - 41 + 100} dB weaker than a {tx} dBm transmitter"
        wait_for(lambda: warning in b.log(), 5, what='the warning')
        # A reload that changes the other beacon: applied again, TX power logged again, the warning not repeated.
        conf.write_text(IB + 'measured_power = -100\n' + ALT.replace('minor = 1027', 'minor = 1028'))
        b.signal(1)
        wait_for(lambda: b.log().count('TX power on') == 2, 10, what='the apply after the reload')
        assert b.log().count(warning) == 1
        assert "Beacon 2's measured_power" not in b.log()  # -61 dBm at 1 m is within the model's tolerance


def test_scan_calibrate_gives_the_median_rssi_and_the_sample_count(tmp_path, processes):
    from conftest import beacond_path, free_port, on_a_terminal
    port1, port2 = free_port(), free_port()
    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + EDDY)
    with Lab(f'tcp-server:127.0.0.1:{port1}', scan=False, second_transport=f'tcp-server:127.0.0.1:{port2}') as lab:
        processes('run', '-c', str(conf), '-d', f'tcp:127.0.0.1:{port1}')
        wait_for(lab.advertising, 10, what='beacond run advertising')
        r = run_cli('scan', '--device', f'tcp:127.0.0.1:{port2}', '--calibrate', '5', '--json')
        assert r.returncode == 0, r.stderr
        final = [output_schema.loads('scan', l) for l in r.stdout.splitlines() if '"final":true' in l and '"summary"' not in l]
        by = {l['kind']: l for l in final}
        # Bumble reports every packet at -50 dBm: the median is -50; the sample count is the packets counted.
        ib = by['ibeacon']['calibration']
        assert ib['median_rssi'] == -50.0 and ib['measured_power'] == -50 and ib['samples'] == by['ibeacon']['packets'] >= 10
        uid = by['eddystone-uid']['calibration']
        assert uid['measured_power'] == -9 and uid['measured_power_at'] == '0 m'  # Eddystone's is at 0 m: -50 + 41
        table = on_a_terminal([str(beacond_path()), 'scan', '--device', f'tcp:127.0.0.1:{port2}', '--calibrate', '2'])
        assert re.search(r'ibeacon\s+E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\s+1\s+2\s+\d+\s+-50\.0\s+measured_power = -50', table), table
        r = run_cli('scan', '--device', f'tcp:127.0.0.1:{port2}', '--calibrate', '2', '--duration', '2')
        assert r.returncode == 64 and "give '--duration' or '--calibrate', not both" in r.stderr


def hci_le_advertising_report(address: str, data: bytes, rssi: int, random: bool = True) -> bytes:
    """The HCI event a gateway's raw socket delivers for one legacy non-connectable report (Core Vol 4 Part E
    §7.7.65.2), with the packet type byte in front."""
    body = bytes([0x02, 1, 0x03, 1 if random else 0]) + bytes(int(x, 16) for x in reversed(address.split(':')))
    body += bytes([len(data)]) + data + bytes([rssi & 0xFF])
    return bytes([0x04, 0x3E, len(body)]) + body


def test_gateway_parsers_decode_each_beacon_exactly_and_as_its_own_device(tmp_path, processes):
    from bleparser import BleParser
    from bluetooth_data_tools import parse_advertisement_data_tuple
    from home_assistant_bluetooth import BluetoothServiceInfo
    from ibeacon_ble import iBeaconParser
    from TheengsDecoder import decodeBLE
    from beacontools import parse_packet

    conf = tmp_path / 'beacond.conf'
    conf.write_text(IB + ALT + EDDY)
    sock = tmp_path / 'hci.sock'
    with Lab(f'unix-server:{sock}') as lab:
        processes('run', '-c', str(conf), '-d', f'unix:{sock}')
        heard_all(lab, [IB_BYTES, ALT_BYTES, EDDY_BYTES], timeout=10)
        reports = {r.data: r for r in list(lab.received)}
    ha = iBeaconParser()
    asyncio.run(ha.async_setup())
    devices = {}
    for frame in (IB_BYTES, ALT_BYTES, EDDY_BYTES):
        r = reports[frame]
        name, uuids, service_data, manufacturer_data, _ = parse_advertisement_data_tuple((r.data,))
        info = BluetoothServiceInfo(name=name or r.address, address=r.address, rssi=r.rssi, manufacturer_data=manufacturer_data,
                                    service_data=service_data, service_uuids=uuids, source='beacond-test')
        ble_monitor, _ = BleParser(discovery=True).parse_raw_data(hci_le_advertising_report(r.address, r.data, r.rssi)) \
            if frame != EDDY_BYTES else (None, None)
        if frame == IB_BYTES:
            b = ha.parse(info)
            assert (str(b.uuid).upper(), b.major, b.minor, b.power) == (APPLE_UUID, 1, 2, -59)
            devices[f'ha:{b.uuid}_{b.major}_{b.minor}_{r.address}'] = r.address
            assert (ble_monitor['type'], ble_monitor['uuid'], ble_monitor['major'], ble_monitor['minor'],
                    ble_monitor['measured power'], ble_monitor['mac']) == \
                ('iBeacon', APPLE_UUID.replace('-', '').lower(), 1, 2, -59, r.address.replace(':', ''))
            theengs = json.loads(decodeBLE(json.dumps({'id': r.address, 'rssi': r.rssi, 'manufacturerdata':
                                                       (0x004C).to_bytes(2, 'little').hex() + manufacturer_data[0x004C].hex()})))
            assert (theengs['model'], theengs['uuid'], theengs['major'], theengs['minor'], theengs['txpower'], theengs['id']) == \
                ('iBeacon', APPLE_UUID.replace('-', '').lower(), 1, 2, -59, r.address)
        elif frame == ALT_BYTES:
            assert ha.parse(info) is None  # HA's iBeacon integration does not take AltBeacon
            assert (ble_monitor['type'], ble_monitor['uuid'], ble_monitor['major'], ble_monitor['minor'],
                    ble_monitor['measured power'], ble_monitor['mac']) == \
                ('AltBeacon', APPLE_UUID.replace('-', '').lower(), 513, 1027, -61, r.address.replace(':', ''))
        else:
            feaa = '0000feaa-0000-1000-8000-00805f9b34fb'
            assert uuids == [feaa] and service_data[feaa] == EDDY_BYTES[11:]
            uid = parse_packet(r.data)
            assert (uid.namespace, uid.instance, uid.tx_power) == (NAMESPACE, INSTANCE, -20)
        devices[f'mac:{r.address}'] = r.address
    # Three beacons, three devices: every gateway that keys on the MAC sees three.
    macs = {v for k, v in devices.items() if k.startswith('mac:')}
    assert len(macs) == 3


def test_a_full_address_book_never_takes_the_address_of_a_beacon_on_the_air_here_or_on_another_device(tmp_path, processes, state_directory):
    """bug (review #43): at the address book's cap (4096 identities), a reload that added a beacon evicted the oldest
    entries not among the identities loaded then (the new one): those of beacons on the air. After a restart such a
    beacon came back from a new address, and gateways keyed on the old one lost it. Every identity configured now,
    on this device and on another beacond's sharing the state directory, is kept."""
    from test_beacons import enabled_sets
    ib_key = f'ibeacon {APPLE_UUID} 1 2'
    alt_key = f'altbeacon {APPLE_UUID} 513 1027'
    # The oldest two entries are the two beacons that will be on the air; then fillers up to the cap.
    lines = [f'C6:00:00:00:00:01 {ib_key}', f'C6:00:00:00:00:02 {alt_key}']
    lines += [f'D0:00:00:00:{i >> 8:02X}:{i & 0xFF:02X} ibeacon {APPLE_UUID} 7 {i}' for i in range(4096 - 2)]
    (state_directory / 'addresses').write_text('\n'.join(lines) + '\n')
    here, there = tmp_path / 'here.sock', tmp_path / 'there.sock'
    conf, other = tmp_path / 'beacond.conf', tmp_path / 'other.conf'
    conf.write_text(IB)
    other.write_text(ALT)
    with Lab(f'unix-server:{here}') as lab, Lab(f'unix-server:{there}') as lab2:
        processes('run', '-c', str(other), '-d', f'unix:{there}')
        wait_for(lambda: [s['random_address'] for s in enabled_sets(lab2).values()] == ['C6:00:00:00:00:02'], 10,
                 what="the other device's beacon from its kept address")
        processes('run', '-c', str(conf), '-d', f'unix:{here}', env={'RUNTIME_DIRECTORY': str(tmp_path / 'run')})
        wait_for(lambda: [s['random_address'] for s in enabled_sets(lab).values()] == ['C6:00:00:00:00:01'], 10,
                 what='the beacon from its kept address')
        # A reload that adds a beacon: the book is full, and one entry goes.
        conf.write_text(IB + EDDY)
        r = run_cli('reload', '--config', str(conf), env={**__import__('os').environ, 'RUNTIME_DIRECTORY': str(tmp_path / 'run')})
        assert r.returncode == 0, r.stderr
        kept = kept_addresses(state_directory)
        assert len(kept) == 4096
        assert kept[ib_key] == 'C6:00:00:00:00:01' and kept[alt_key] == 'C6:00:00:00:00:02', {k: kept.get(k) for k in (ib_key, alt_key)}
        assert f'eddystone-uid {NAMESPACE} {INSTANCE}' in kept
