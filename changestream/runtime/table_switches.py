"""Tables added or paused while running, asked for by the router and waiting for the
stream's next transaction boundary, where the listener puts them in."""

from __future__ import annotations

import threading
from collections.abc import Callable

from changestream.actors.messages import TablesSwitch


class PendingSwitches:
    """Switches asked for (from any thread), taken by the listener in the order asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[tuple[TablesSwitch, Callable[[], None] | None]] = []

    def put(self, switch: TablesSwitch, then: Callable[[], None] | None) -> None:
        with self._lock:
            self._queue.append((switch, then))

    def take(self) -> list[tuple[TablesSwitch, Callable[[], None] | None]]:
        with self._lock:
            taken, self._queue = self._queue, []
        return taken

    def __bool__(self) -> bool:
        return bool(self._queue)  # a read of one reference: no lock needed
