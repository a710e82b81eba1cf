"""XA transactions prepared but not resolved at the position a router resumes from: read
again from where they were prepared, so that their XA COMMIT delivers them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from changestream.decoding.event_decoder import EventDecoder
from changestream.model.changes import Position
from changestream.runtime.settings import RouterSettings
from changestream.schema.column_info import ColumnInfo
from changestream.sources.live import StartPosition
from changestream.transactions.assembler import TransactionAssembler

log = logging.getLogger("changestream")

# A source of events (iterable, with ``stop()``) from a start, with a decoder, and whether
# it follows the binlog's end.
SourceFactory = Callable[[StartPosition, EventDecoder, bool], Any]


def reload_prepared_xa(resume: Position, assembler: TransactionAssembler,
                       column_info: ColumnInfo, settings: RouterSettings,
                       open_source: SourceFactory,
                       table_filter: Callable[[str, str], bool] | None) -> None:
    """Read again the XA transactions that were prepared but not resolved at ``resume``."""
    for xid, where in resume.pending_xa.items():
        file, _, pos = where.rpartition(":")
        decoder = EventDecoder(schema_resolver=column_info.resolve,
                               table_filter=table_filter)
        reader = TransactionAssembler(
            change_filter=settings.filter,
            max_buffered_changes=settings.max_buffered_changes,
            spill_dir=settings.spill_dir, include_sql=settings.include_sql)
        source = open_source(StartPosition("file", file=file, pos=int(pos)), decoder, False)
        try:
            for event in source:
                reader.feed(event)
                if reader.xa.has_held(xid):
                    break
        finally:
            source.stop()
        if not reader.xa.has_held(xid):
            log.warning("prepared XA transaction %s at %s could not be read again; its "
                        "XA COMMIT will deliver nothing", xid, where)
            continue
        assembler.xa.adopt_held(xid, reader.xa)
