"""The callback sink: hands each batch to a Python function of the user's."""

from __future__ import annotations

from collections.abc import Callable

from changestream.model.changes import Batch, Position


class CallbackSink:
    """Calls ``function(batch)`` for every batch; the batch counts as durable when the
    function returns (an exception makes the router retry it)."""

    def __init__(self, function: Callable[[Batch], object]):
        self.function = function

    def open(self) -> Position | None:
        return None

    def write(self, batch: Batch) -> None:
        self.function(batch)

    def close(self) -> None:
        pass
