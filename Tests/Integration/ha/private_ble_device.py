"""Feeds advertising reports to Home Assistant's own Private BLE Device integration and prints what it tracks.

Runs under Home Assistant's venv, as bthome.py does (whose bring-up of HA, its bluetooth manager and an ESPHome-style
proxy it shares). Reads JSON on stdin: {"irk": the key as the user pastes it, "rotations": [[report, ...], ...]}, each
report {"address", "address_type", "rssi", "data": hex}. The first rotation's reports arrive before the user adds the
key (HA's config flow refuses a key it has not seen an address of), each later one after. Prints {"flow": [step ids
and errors], "entry": {"title", "unique_id"}, "devices": the entry's device count, "tracked": [{"state",
"current_address"} after each rotation]}.
"""
from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile

from bthome import feed, start
from homeassistant.helpers import device_registry, entity_registry


async def main(given: dict) -> dict:
    with tempfile.TemporaryDirectory() as config_dir:
        hass, proxy, unregister = await start(config_dir)
        out: dict = {'flow': [], 'tracked': []}
        rotations = given['rotations']
        feed(proxy, rotations[0])
        await asyncio.sleep(0.1)
        result = await hass.config_entries.flow.async_init('private_ble_device', context={'source': 'user'})
        out['flow'].append((result.get('step_id'), result.get('errors')))
        result = await hass.config_entries.flow.async_configure(result['flow_id'], {'irk': given['irk']})
        out['flow'].append((result.get('step_id'), result.get('errors'), result.get('reason')))
        await hass.async_block_till_done()
        entries = hass.config_entries.async_entries('private_ble_device')
        if entries:
            entry = entries[0]
            out['entry'] = {'title': entry.title, 'unique_id': entry.unique_id}
            ents = entity_registry.async_entries_for_config_entry(entity_registry.async_get(hass), entry.entry_id)
            tracker = next(e.entity_id for e in ents if e.domain == 'device_tracker')
            for n, reports in enumerate(rotations):
                if n:
                    feed(proxy, reports)
                await asyncio.sleep(0.1)
                await hass.async_block_till_done()
                state = hass.states.get(tracker)
                out['tracked'].append({'state': state.state, 'current_address': state.attributes.get('current_address')})
            out['devices'] = len(device_registry.async_entries_for_config_entry(device_registry.async_get(hass), entry.entry_id))
            await hass.config_entries.async_unload(entry.entry_id)
        unregister()
        await hass.async_stop()
        return out


if __name__ == '__main__':
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    print(json.dumps(asyncio.run(main(json.load(sys.stdin)))))
