"""Backpressure between the router's stages: a fixed number of messages in flight.

A stage takes a credit before it sends a message downstream and the receiver gives it back
once the message is handled, so a slow sink slows the stages before it down to the reader
instead of letting a mailbox grow without bound.
"""

from __future__ import annotations

import threading


class StoppedError(Exception):
    """The router is stopping: the waiting stage gives up."""


class Credits:
    """At most ``limit`` messages in flight between two stages."""

    def __init__(self, limit: int, stopping: threading.Event):
        self.limit = limit
        self._free = threading.Semaphore(limit)
        self._stopping = stopping
        self._lock = threading.Lock()
        self.in_flight = 0

    def take(self) -> None:
        """Wait for a credit; raises :class:`StoppedError` once the router is stopping."""
        while not self._free.acquire(timeout=0.2):
            if self._stopping.is_set():
                raise StoppedError
        with self._lock:
            self.in_flight += 1

    def give_back(self) -> None:
        with self._lock:
            self.in_flight -= 1
        self._free.release()
