"""Feeds advertising reports to Home Assistant's own iBeacon Tracker coordinator and prints the devices it creates.

Runs under Home Assistant's venv (Tests/Integration/ha/requirements.txt), not the test venv. Reads JSON on
stdin: {"allow_nameless_uuids": [...], "reports": [{"address", "address_type", "rssi", "data": hex}, ...]}, the reports
in the order a scanner delivers them (an advertisement, then its scan response). Prints {"new": [{"unique_id",
"name"}, ...]}: each SIGNAL_IBEACON_DEVICE_NEW the coordinator sent, which is what makes a device and its entities.

What is Home Assistant's here: the core, the bluetooth integration's manager (habluetooth) and its remote-scanner
merging of an advertisement with its scan response, bluetooth-data-tools' parsing, and the ibeacon coordinator with its
rules (the name rule, the allow-list, MAX_IDS, MAX_IDS_PER_UUID). What is ours: the few lines an ESPHome Bluetooth
proxy's scanner runs for each raw report (bleak_esphome's ESPHomeScanner.async_on_raw_advertisements: parse the
report's data, hand it to BaseHaRemoteScanner._async_on_advertisement with the address type), and the bring-up of
the registries that Home Assistant's bootstrap would do.
"""
from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
import time

from bluetooth_data_tools import parse_advertisement_data_tuple
from habluetooth import BaseHaRemoteScanner
from homeassistant.core import HomeAssistant  # first: the core module before the loader (their import cycle)
from homeassistant import loader
from homeassistant.config_entries import ConfigEntries, ConfigEntry
from homeassistant.helpers import area_registry, device_registry, entity_registry, issue_registry
from homeassistant.helpers.dispatcher import async_dispatcher_connect


async def main(given: dict) -> dict:
    with tempfile.TemporaryDirectory() as config_dir:
        hass = HomeAssistant(config_dir)
        loader.async_setup(hass)
        hass.config_entries = ConfigEntries(hass, {})
        for registry in (area_registry, device_registry, entity_registry, issue_registry):
            await registry.async_load(hass)
        from homeassistant.components import bluetooth, usb
        from homeassistant.components.ibeacon.const import CONF_ALLOW_NAMELESS_UUIDS, SIGNAL_IBEACON_DEVICE_NEW
        from homeassistant.components.ibeacon.coordinator import IBeaconCoordinator
        assert await usb.async_setup(hass, {}) and await bluetooth.async_setup(hass, {})
        entry = ConfigEntry(version=1, minor_version=1, domain='ibeacon', title='iBeacon Tracker', data={},
                            source='user', options={CONF_ALLOW_NAMELESS_UUIDS: given.get('allow_nameless_uuids', [])})
        new: list[dict] = []
        async_dispatcher_connect(hass, SIGNAL_IBEACON_DEVICE_NEW,
                                 lambda unique_id, name, _adv: new.append({'unique_id': unique_id, 'name': name}))
        coordinator = IBeaconCoordinator(hass, entry, device_registry.async_get(hass))
        await coordinator.async_start()
        proxy = BaseHaRemoteScanner('AA:BB:CC:DD:EE:01', 'beacond-test proxy', None, False)
        unregister = bluetooth.async_register_scanner(hass, proxy)
        proxy.async_setup()
        for r in given['reports']:
            proxy._async_on_advertisement(r['address'], r['rssi'],
                                          *parse_advertisement_data_tuple((bytes.fromhex(r['data']),)),
                                          {'address_type': r['address_type']}, time.monotonic())
            await asyncio.sleep(0)
        await asyncio.sleep(0.1)
        unregister()
        await hass.async_stop()
        return {'new': new}


if __name__ == '__main__':
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    print(json.dumps(asyncio.run(main(json.load(sys.stdin)))))
