"""A transaction while it is read (a group of events), and once it ended: what it delivers
and what it does to the position. Its id is its GTID, else ``server_id-file-offset`` of its
first event (the same on every replay)."""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import field

from changestream.model.changes import Change, TransactionInfo
from changestream.model.record import record
from changestream.transactions.spill import SpillFile


def transaction_id(gtid: str | None, server_id: int, file: str, start: int) -> str:
    """A transaction's id: its GTID, else where it begins."""
    return gtid or f"{server_id}-{file}-{start}"


@functools.lru_cache(maxsize=64)
def utc_time(seconds: float) -> dt.datetime:
    """The UTC time ``seconds`` after the epoch (an event's or GTID's commit time)."""
    # Cached: the commit events of a busy second share their timestamp (and the records'
    # encoder then formats the shared datetime once).
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def gtid_commit_time(original_commit_ts: int | None,
                     immediate_commit_ts: int | None) -> dt.datetime | None:
    """A MySQL GTID event's commit time (microseconds; the original commit's where it was
    replicated), ``None`` when it carries none (before 8.0.1)."""
    ts = original_commit_ts or immediate_commit_ts
    return utc_time(ts / 1e6) if ts else None


@record
class Group:
    """The transaction being read."""

    file: str
    start: int
    server_id: int
    gtid: str | None = None
    commit_ts: dt.datetime | None = None
    began: bool = False
    standalone: bool = False
    xa_id: str | None = None
    sql: str | None = None
    changes: list[Change] = field(default_factory=list)
    spill: SpillFile | None = None

    @property
    def size(self) -> int:
        return len(self.changes) + (self.spill.count if self.spill else 0)

    def discard(self) -> None:
        if self.spill is not None:
            self.spill.close()
            self.spill = None
        self.changes = []


@record
class Finished:
    """A group that ended: its changes to deliver (if any) and what it does to the position."""

    info: TransactionInfo | None
    group: Group | None
    gtid: str | None
    file: str
    end: int
    xa_held: tuple[str, str] | None = None
    xa_resolved: str | None = None
