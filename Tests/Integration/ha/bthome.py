"""Feeds advertising reports to Home Assistant's own BTHome integration and prints the device and entities it makes.

Runs under Home Assistant's venv (Tests/Integration/ha/requirements.txt, with bthome-ble 3.8.0 as HA 2024.3.3 pins it),
not the test venv. Reads JSON on stdin: {"address", "bindkey" (32 hex digits or null), "wrong_bindkey" (or null),
"first": [report, ...], "later": [report, ...]}, each report {"address", "address_type", "rssi", "data": hex}. The
`first` reports arrive before the device is added, the `later` ones after it.

What is Home Assistant's here: the core, the bluetooth manager (habluetooth) with an ESPHome-style remote scanner
(as in coordinator.py), the BTHome integration's config flow from a bluetooth discovery (the step HA's discovery
starts; called directly, since the harness never starts hass, as HA's own tests do), its config entry set-up with the
sensor and binary_sensor platforms, and bthome-ble 3.8.0 under it. Prints {"flow": [step ids and errors],
"entry": {"title", "unique_id", "data"}, "device": {"name", "model", "sw_version"}, "entities": [{"unique_id",
"entity_id", "name", "disabled", "state", "device_class"}]}.
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
from homeassistant import bootstrap, loader
from homeassistant.config_entries import ConfigEntries
from homeassistant.helpers import device_registry, entity_registry


def feed(proxy, reports) -> None:
    for r in reports:
        proxy._async_on_advertisement(r['address'], r['rssi'], *parse_advertisement_data_tuple((bytes.fromhex(r['data']),)),
                                      {'address_type': r['address_type']}, time.monotonic())


async def start(config_dir: str):
    """Home Assistant with its bluetooth integration and an ESPHome-style proxy: (hass, proxy, unregister)."""
    hass = HomeAssistant(config_dir)
    hass.config.skip_pip = True
    loader.async_setup(hass)
    hass.config_entries = ConfigEntries(hass, {})
    # What bootstrap does before any integration: translations, entity and template helpers, the registries, the
    # config entries' store.
    await bootstrap.async_load_base_functionality(hass)
    from homeassistant.components import bluetooth, usb
    assert await usb.async_setup(hass, {}) and await bluetooth.async_setup(hass, {})
    # Set up by hand, as coordinator.py does, without the http server and websocket API usb would pull in: the
    # integrations' dependency (bluetooth_adapters, on bluetooth) then finds them set up.
    hass.config.components.update({'usb', 'bluetooth'})
    proxy = BaseHaRemoteScanner('AA:BB:CC:DD:EE:01', 'beacond-test proxy', None, False)
    unregister = bluetooth.async_register_scanner(hass, proxy)
    proxy.async_setup()
    return hass, proxy, unregister


async def main(given: dict) -> dict:
    from homeassistant.components import bluetooth
    with tempfile.TemporaryDirectory() as config_dir:
        hass, proxy, unregister = await start(config_dir)
        feed(proxy, given['first'])
        await asyncio.sleep(0.1)
        out: dict = {'flow': []}
        info = bluetooth.async_last_service_info(hass, given['address'], connectable=False)
        assert info is not None, 'the bluetooth manager kept no advertisement from ' + given['address']
        result = await hass.config_entries.flow.async_init('bthome', context={'source': 'bluetooth'}, data=info)
        for _ in range(4):
            out['flow'].append({'type': str(result['type']), 'step_id': result.get('step_id'), 'errors': result.get('errors'),
                                'reason': result.get('reason')})
            if result.get('step_id') == 'get_encryption_key':
                key = given.get('wrong_bindkey') if not result.get('errors') and given.get('wrong_bindkey') else given.get('bindkey')
                result = await hass.config_entries.flow.async_configure(result['flow_id'], {'bindkey': key or ''})
            elif result.get('step_id') == 'bluetooth_confirm':
                result = await hass.config_entries.flow.async_configure(result['flow_id'], {})
            else:
                break
        await hass.async_block_till_done()
        entries = hass.config_entries.async_entries('bthome')
        if entries:
            entry = entries[0]
            out['entry'] = {'title': entry.title, 'unique_id': entry.unique_id, 'data': dict(entry.data), 'state': str(entry.state)}
            feed(proxy, given['later'])
            await asyncio.sleep(0.1)
            await hass.async_block_till_done()
            devices = device_registry.async_entries_for_config_entry(device_registry.async_get(hass), entry.entry_id)
            out['device'] = [{'name': d.name, 'model': d.model, 'sw_version': d.sw_version,
                              'connections': sorted(list(c) for c in d.connections)} for d in devices]
            ents = entity_registry.async_entries_for_config_entry(entity_registry.async_get(hass), entry.entry_id)
            out['entities'] = []
            for e in sorted(ents, key=lambda e: e.unique_id):
                state = hass.states.get(e.entity_id)
                out['entities'].append({'unique_id': e.unique_id, 'entity_id': e.entity_id, 'disabled': e.disabled_by is not None,
                                        'device_class': e.device_class or e.original_device_class,
                                        'state': state.state if state else None,
                                        'name': state.attributes.get('friendly_name') if state else e.original_name})
            await hass.config_entries.async_unload(entry.entry_id)
        unregister()
        await hass.async_stop()
        return out


if __name__ == '__main__':
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    print(json.dumps(asyncio.run(main(json.load(sys.stdin)))))
