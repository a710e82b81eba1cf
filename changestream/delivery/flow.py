"""Backpressure between the router's stages: a fixed number of messages in flight.

A stage takes a credit before it sends a message downstream and the receiver gives it back
once the message is handled, so a slow sink slows the stages before it down to the reader
instead of letting a mailbox grow without bound. The listener, a thread, waits for a credit
(:class:`Credits`); an actor never waits: it sends while its :class:`CreditLine` has room
and goes on when the receiver's acknowledgement (a message) comes back.
"""

from __future__ import annotations

import threading


class StoppedError(Exception):
    """The router is stopping: the waiting stage gives up."""


class Credits:
    """At most ``limit`` messages in flight from a thread to an actor."""

    def __init__(self, limit: int):
        self.limit = limit
        self.in_flight = 0
        self._closed = False
        self._changed = threading.Condition()

    def take(self) -> None:
        """Wait for a credit; raises :class:`StoppedError` once :meth:`close` was called."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or self.in_flight < self.limit)
            if self._closed:
                raise StoppedError
            self.in_flight += 1

    def give_back(self) -> None:
        with self._changed:
            self.in_flight -= 1
            self._changed.notify()

    def close(self) -> None:
        """The router stops: a stage waiting for a credit, or asking for one, gives up."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


class CreditLine:
    """At most ``limit`` messages in flight from one actor to another, counted by the
    sending actor alone (the receiver acknowledges each with a message to it)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.in_flight = 0  # read by status from other threads: a gauge

    @property
    def has_room(self) -> bool:
        return self.in_flight < self.limit

    def sent(self) -> None:
        self.in_flight += 1

    def acknowledged(self) -> None:
        self.in_flight -= 1
