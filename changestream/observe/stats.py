"""Counters the router's stages keep for its status, metrics and tests: each stage owns its
own and is the only one to write them."""

from __future__ import annotations

import threading
import time
from dataclasses import field

from changestream.model.changes import Position
from changestream.model.record import record
from changestream.observe.metrics import RouterMetrics


@record
class ReadCounters:
    """What the listener has read. Its thread alone writes them, each value whole; anyone
    may read them."""

    connected: bool = False
    events_read: int = 0
    worker_segments: int = 0  # segments of transactions handed to decode workers
    read_file: str | None = None
    read_pos: int = 0
    last_event_ts: int = 0
    caught_up: bool = False
    reconnects: int = 0

    def seconds_behind(self) -> float | None:
        """How far the reader is behind the server: 0 once it has read everything the
        server has sent, else the age of the last event read (``None`` before any)."""
        if self.caught_up:
            return 0.0
        if not self.last_event_ts:
            return None
        return max(0.0, time.time() - self.last_event_ts)


@record
class DeliveryCounters:
    """What the Writer actor has made durable. It alone writes them, under ``lock``, so a
    reader holding the lock sees a batch's counts and position together."""

    transactions_delivered: int = 0
    changes_delivered: int = 0
    batches_delivered: int = 0
    batch_retries: int = 0
    delivered: Position | None = None
    last_commit_ts: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Histograms and per-table counters, observed per batch (Prometheus, see metrics.py).
    metrics: RouterMetrics = field(default_factory=RouterMetrics, repr=False)

    def delivered_position(self) -> Position | None:
        """The position after the last batch made durable (``None`` before any)."""
        with self.lock:
            return self.delivered


@record
class RefillCounters:
    """Tables read again after a DDL (:mod:`changestream.schema.refill`), written by the
    router's snapshot room."""

    refills: int = 0
    refills_skipped: int = 0  # such DDL whose table was not read again


@record
class RouterStats:
    """The stages' counters side by side: ``reading`` (the listener), ``delivery`` (the
    Writer actor) and ``refill`` (the snapshots)."""

    started: float = field(default_factory=time.time)
    reading: ReadCounters = field(default_factory=ReadCounters)
    delivery: DeliveryCounters = field(default_factory=DeliveryCounters)
    refill: RefillCounters = field(default_factory=RefillCounters)

    @property
    def metrics(self) -> RouterMetrics:
        """The Prometheus metrics (observed by the Writer actor, read at a scrape)."""
        return self.delivery.metrics
