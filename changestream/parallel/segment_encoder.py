"""A decode worker's fast path for changestream's records: plain DML transactions from a
segment's bytes to records, compiled (:mod:`changestream.parallel._segment_rows`). It makes
none of the general path's event and change objects; it takes the common case only, and for
anything else (or where it was not built, or ``CHANGESTREAM_PURE_PYTHON=1``) the worker runs
the general path, the one Python walk, which gives the same records or the error."""

from __future__ import annotations

import datetime as dt
from typing import Any

from changestream.decoding.event_decoder import EventDecoder
from changestream.model.record import record
from changestream.native import compiled
from changestream.transactions.filters import ChangeFilter


@record
class EncodedTransaction:
    """A transaction a worker encoded: how many records it has (they follow those of the
    transaction before it), its GTID, its commit time, and where it ends in its file."""

    changes: int
    gtid: str | None
    commit_ts: dt.datetime | None
    end: int


def segment_encoder(decoder: EventDecoder, change_filter: ChangeFilter | None,
                    include_sql: bool) -> Any | None:
    """The compiled encoder where it was built and not turned off, else ``None`` (the
    general path encodes every segment)."""
    module = compiled("changestream.parallel._segment_rows")
    return None if module is None else module.SegmentEncoder(decoder, change_filter,
                                                              include_sql)
