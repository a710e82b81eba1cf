"""The sink adapter interface: how committed changes leave the router.

An adapter is any object with these three methods; it knows nothing of actors. The router
calls ``open`` once, then ``write`` for each batch in order, then ``close``: one call at a
time, but ``write`` from another thread than ``open`` and ``close``. ``write``
returns only when the batch is durable: the router saves the position after it only then,
so a crash never skips a batch that was not written. A batch can come again after a crash
(the last one written before it) unless the adapter stores positions itself: an adapter
that commits the batch's position atomically with its data returns the last one from
``open``, and the router resumes there (exactly once). An adapter whose output can be cut
back (a file) gets exactly once with the router's position file instead: see
``durable_state``/``restore`` below.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from changestream.model.changes import Batch, Position


@runtime_checkable
class SinkAdapter(Protocol):
    """What the router needs of a sink."""

    def open(self) -> Position | None:
        """Prepare to write; return the position stored with the data, if the sink keeps
        one (else ``None``)."""
        ...

    def write(self, batch: Batch) -> None:
        """Make ``batch`` durable, or raise. Called again with the same batch on failure."""
        ...

    def close(self) -> None:
        """Release what ``open`` took. Called once, also after a failure."""
        ...


# An adapter may also have an ``encoded_format`` attribute ("changestream" or "original"):
# it then also receives changestream.model.changes.EncodedRun parts, records already encoded in
# that format by decode workers, and writes their bytes as they are. The Spark sink's is
# "arrow": its EncodedRuns hold the Arrow frames of changestream.sinks.spark.frames.encode_runs.
#
# An adapter may also have a ``batch_changes`` attribute (a positive int): the micro-batch
# size it gets unless the router's batch settings give one (see BatchSettings.for_sink).
#
# An adapter that keeps its own position may also offer ``history_storage()`` (called after
# ``open``): a changestream.schema.store.HistoryStorage where the schema history's states
# are kept beside that position. The positions of its batches then name the state at them
# (``Position.schema_history``), stored there before the batch is written.
#
# An adapter may also offer ``durable_state() -> dict`` and ``restore(state: dict | None)``
# (both or neither): ``durable_state`` describes what it has made durable so far (the JSON-
# lines file: its path and length); the router saves it with every position
# (``Position.sink``) and, on the first start, before the first batch. On a restart the
# router calls ``restore`` with the state saved last, before ``open``; the adapter then
# drops what it wrote after that state (batches the position file never acknowledged, which
# the router delivers again). ``restore(None)``: nothing was saved.
