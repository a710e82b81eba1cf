"""What a :class:`~changestream.runtime.listener.Listener` is built from: what it reads
(:class:`Reading`), where its batches go (:class:`Downstream`) and how it batches and
reconnects (:class:`ListenerSettings`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pykka

from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import Event
from changestream.delivery.flow import Credits
from changestream.model.record import record
from changestream.observe.stats import RouterStats
from changestream.parallel.decode_workers import DecodeWorkers
from changestream.schema.column_info import ColumnInfo
from changestream.snapshot.coordinator import SnapshotCoordinator
from changestream.sources.failover import ServerSet
from changestream.sources.live import StartPosition


class Source(Protocol):
    """What the listener reads: decoded events, ``None`` when nothing is available now."""

    @property
    def decoder(self) -> EventDecoder | None: ...

    def stream(self) -> Iterator[Event | None]: ...

    def stop(self) -> None: ...


SourceFactory = Callable[[StartPosition | None, EventDecoder], Source]
"""``(where to resume, or None for the configured start, decoder) -> source``."""


@record
class ListenerSettings:
    """How the listener batches (``batch_events`` events or ``batch_bytes`` bytes at a
    transaction boundary) and how long it reconnects to a ``live`` server."""

    batch_events: int = 2_000
    batch_bytes: int = 1 << 20
    reconnect_seconds: float = 300.0
    live: bool = True


@record
class Downstream:
    """Where the listener's batches go (the Transaction actor, a credit taken per batch)
    and how it reports (the router's stats, its stop event, its error callback)."""

    transaction: pykka.ActorRef[Any]
    credits: Credits
    stats: RouterStats
    stopping: threading.Event
    on_error: Callable[[BaseException], None]


@record
class Reading:
    """What the listener reads and decodes with: the source (``open_source``), column
    names (``column_info``), the decode workers, the tables whose rows are decoded
    (``table_filter``, None: all), a snapshot's coordinator, when following ends
    (``done_when_idle``), and the source's set of servers with the GTIDs before the first
    event (failover)."""

    open_source: SourceFactory
    column_info: ColumnInfo
    workers: DecodeWorkers | None = None
    table_filter: Callable[[str, str], bool] | None = None
    snapshot: SnapshotCoordinator | None = None
    done_when_idle: Callable[[], bool] | None = None
    servers: ServerSet | None = None
    start_gtids: str | None = None
