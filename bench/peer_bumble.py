"""Bench peer: what a Python user would write with Bumble's own host API to advertise the same iBeacon.

    python bench/peer_bumble.py TRANSPORT HEXDATA     e.g. tcp-client:127.0.0.1:9000 0201061aff…
Advertises (non-connectable, 100 ms, public address) until killed.
"""
import asyncio
import sys

from bumble import hci
from bumble.device import AdvertisingType, Device
from bumble.transport import open_transport


async def main(spec: str, data: bytes) -> None:
    async with await open_transport(spec) as transport:
        device = Device.with_hci('bench-peer', hci.Address('F0:F1:F2:F3:F4:F5'), transport.source, transport.sink)
        await device.power_on()
        await device.start_advertising(advertising_type=AdvertisingType.UNDIRECTED, advertising_data=data,
                                       own_address_type=hci.OwnAddressType.PUBLIC,
                                       advertising_interval_min=100, advertising_interval_max=100)
        await asyncio.get_running_loop().create_future()


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1], bytes.fromhex(sys.argv[2])))
