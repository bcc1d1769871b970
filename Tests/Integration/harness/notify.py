"""A real AF_UNIX datagram socket to use as NOTIFY_SOCKET: records every sd_notify datagram with its arrival time."""
from __future__ import annotations

import os
import socket
import threading
import time

from harness.lab import wait_for


class NotifyListener:
    """A real AF_UNIX datagram socket used as NOTIFY_SOCKET; records every sd_notify message."""

    def __init__(self, directory) -> None:
        self.path = os.path.join(str(directory), 'notify.sock')
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.messages: list[tuple[float, str]] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            self.messages.append((time.monotonic(), data.decode()))

    def assignments(self) -> list[str]:
        """Every KEY=value line received so far, in order."""
        return [line for _, m in list(self.messages) for line in m.split('\n') if line]

    def wait_for(self, line_prefix: str, timeout: float = 10.0, after: int = 0) -> str:
        """Waits for an assignment starting with line_prefix among those after index `after`."""
        return wait_for(lambda: next((a for a in self.assignments()[after:] if a.startswith(line_prefix)), None),
                        timeout, what=f'sd_notify {line_prefix!r} (got {self.assignments()[after:]})')

    def first(self, line_prefix: str, after: float) -> float | None:
        """When the first datagram starting with line_prefix arrived at or after `after` (time.monotonic())."""
        return next((t for t, m in list(self.messages) if t >= after and m.startswith(line_prefix)), None)

    def close(self) -> None:
        self._stop = True
        self.sock.close()
