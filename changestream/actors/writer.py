"""The Writer actor: writes the Sink actor's batches through the sink adapter, one at a time
and in order, retrying a failed one, then saves each batch's position; it tells the Sink
actor when each is done (:class:`Written`), so the next batch fills while one is written."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import pykka

from changestream.delivery.adapter import CutsBack, SinkAdapter, capabilities_of
from changestream.delivery.position_store import PositionStore
from changestream.model.changes import Batch, EncodedRun, Position, TransactionPart
from changestream.model.errors import SinkError, SinkStoppedError
from changestream.model.record import record
from changestream.observe.metrics import count_tables
from changestream.observe.stats import DeliveryCounters

if TYPE_CHECKING:
    from changestream.schema.opener import HistoryOpener

    from .sink import BatchSettings

log = logging.getLogger("changestream")


@record
class WriteBatch:
    """A batch's parts and the position after it (``None``: it ends inside a transaction),
    from the Sink actor ``reply_to``."""

    parts: list[TransactionPart | EncodedRun]
    position: Position | None
    reply_to: Any  # a pykka.ActorRef


@record
class Written:
    """The Writer actor has finished a batch (``error``: what stopped it)."""

    error: BaseException | None = None


class WriterActor(pykka.ThreadingActor):
    """Writes batches through ``adapter`` and saves their positions in ``store`` (see the
    module docstring); ``batch_id`` numbers the next batch."""

    def __init__(self, adapter: SinkAdapter, store: PositionStore | None,
                 settings: BatchSettings, counters: DeliveryCounters,
                 on_error: Callable[[BaseException], None], first_batch_id: int = 1,
                 history: HistoryOpener | None = None,
                 fence: Callable[[], AbstractContextManager[Any]] | None = None):
        super().__init__()
        # Held around each batch's writing and commit: a standby router's lease
        # (changestream.runtime.standby), which raises when another router took it over.
        self.fence = fence or contextlib.nullcontext
        self.adapter = adapter
        self.store = store
        self.settings = settings
        self.counters = counters
        self.on_error = on_error
        self.batch_id = first_batch_id
        self.history = history  # stamps positions for a sink that keeps the history
        self._durable_state: Callable[[], dict[str, Any] | None] | None = \
            cast(CutsBack, adapter).durable_state if capabilities_of(adapter).durable_state \
            else None

    def on_receive(self, message: Any) -> None:
        if not isinstance(message, WriteBatch):
            return
        error: BaseException | None = None
        try:
            with self.fence():
                self._deliver(message.parts, message.position)
        except BaseException as exc:  # the Sink actor raises it: the router stops
            error = exc
        try:
            message.reply_to.tell(Written(error))
        except pykka.ActorDeadError:
            if error is not None:
                self.on_error(error)
        if error is not None:
            self.stop()

    def on_failure(self, exception_type: type[BaseException] | None,
                   exception_value: BaseException | None,
                   traceback: TracebackType | None) -> None:
        if exception_value is not None:
            self.on_error(exception_value)

    def _deliver(self, parts: list[TransactionPart | EncodedRun],
                 position: Position | None) -> None:
        """Write one batch through the adapter, then save its position."""
        if parts:
            if position is not None and self.history is not None:
                position = self.history.stamp(position)
            batch = Batch(self.batch_id, parts, position)
            began = time.monotonic()
            self._write(batch)
            if position is not None and self.history is not None:
                self.history.stored(position)
            took = time.monotonic() - began
            self.batch_id += 1
            commit = next((p.last_commit_ts for p in reversed(parts) if p.last_commit_ts),
                          None)
            committed = commit.timestamp() if commit is not None else None
            counters = self.counters
            with counters.lock:
                counters.batches_delivered += 1
                counters.changes_delivered += batch.changes
                counters.transactions_delivered += sum(p.transactions for p in parts)
                if committed is not None:
                    counters.last_commit_ts = committed
            counters.metrics.batch_delivered(
                took, None if committed is None else time.time() - committed,
                count_tables(parts))
        if position is not None:
            if self._durable_state is not None:
                position = replace(position, sink=self._durable_state())
            if self.store is not None:
                self.store.save(position, self.batch_id - 1)
            with self.counters.lock:
                self.counters.delivered = position

    def _write(self, batch: Batch) -> None:
        s = self.settings
        delay = s.retry_backoff_seconds
        for attempt in range(s.retries + 1):
            try:
                self.adapter.write(batch)
                return
            except SinkStoppedError:
                raise
            except Exception as exc:
                if attempt == s.retries:
                    where = f" (position {batch.position})" if batch.position else ""
                    raise SinkError(f"batch {batch.id} of {batch.changes} changes failed "
                                    f"{s.retries + 1} times{where}, last: {exc}; the "
                                    "position was not advanced") from exc
                log.warning("batch %d failed (%s); retrying in %.1fs", batch.id, exc, delay)
                with self.counters.lock:
                    self.counters.batch_retries += 1
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
