"""Counters the router keeps for its status, metrics and tests."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from changestream.model.changes import Position
from changestream.observe.metrics import RouterMetrics


@dataclass(slots=True)
class RouterStats:
    """What the router has read and delivered so far (updated by its stages)."""

    started: float = field(default_factory=time.time)
    connected: bool = False
    events_read: int = 0
    worker_segments: int = 0  # segments of transactions handed to decode workers
    read_file: str | None = None
    read_pos: int = 0
    last_event_ts: int = 0
    caught_up: bool = False
    transactions_delivered: int = 0
    changes_delivered: int = 0
    batches_delivered: int = 0
    batch_retries: int = 0
    reconnects: int = 0
    refills: int = 0  # tables read again after a DDL (changestream.schema.refill)
    refills_skipped: int = 0  # such DDL whose table was not read again
    delivered: Position | None = None
    last_commit_ts: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Histograms and per-table counters, observed per batch (Prometheus, see metrics.py).
    metrics: RouterMetrics = field(default_factory=RouterMetrics, repr=False)

    def seconds_behind(self) -> float | None:
        """How far the reader is behind the server: 0 once it has read everything the
        server has sent, else the age of the last event read (``None`` before any)."""
        if self.caught_up:
            return 0.0
        if not self.last_event_ts:
            return None
        return max(0.0, time.time() - self.last_event_ts)
