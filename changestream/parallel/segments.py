"""Which transactions decode workers take, and the segments they are handed in.

A worker's transaction needs only its own events: a GTID event (MariaDB: not standalone,
not XA), MySQL's BEGIN, TABLE_MAPs, rows events and annotations, XID or COMMIT, and it is
not big (MySQL's compressed ones too: :mod:`changestream.parallel.payloads`).
They are recognised from a few bytes of each event without decoding it (decoding here would
cost as much as in a worker), but for TABLE_MAPs that do not log their columns' names:
those are decoded here, in binlog order, and the schemas resolved for them go with the
segment. Anything else is decoded here, in binlog order, as without
workers, from the first event that shows a transaction is not a worker's; so is every
transaction that begins before the workers are ready (``DecodeWorkers.ready``: while they
start, the router does not wait for their imports), up to a segment's bytes."""

from __future__ import annotations

import array
import struct
from collections.abc import Iterator
from typing import Any, Protocol

import zstandard

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import CHECKSUM_CRC32, HEADER_SIZE, EventDecoder
from changestream.decoding.events import Event, TableMapEvent
from changestream.decoding.query_kind import query_kind
from changestream.decoding.statements import BEGIN, COMMIT
from changestream.decoding.table_map import TableMapFormatError, identity_start, parse_table_map
from changestream.decoding.table_schema import TableSchema, may_hold_address
from changestream.model.errors import SourceError
from changestream.native import compiled
from changestream.parallel.decode_workers import RawEventData, Segment, SegmentTicket
from changestream.parallel.payloads import plain_payload_size
from changestream.sources.raw import RawEvent
from changestream.transactions.plain import opens_plain_group

_ROW_TYPES = frozenset({*et.ROWS_KINDS, et.ROWS_QUERY, et.MARIADB_ANNOTATE_ROWS})
_HEARTBEATS = frozenset({et.HEARTBEAT, et.HEARTBEAT_V2})
_ANNOTATIONS = frozenset({et.ROWS_QUERY, et.MARIADB_ANNOTATE_ROWS})
# The compiled check of a compressed transaction (where libzstd's header was there to build
# it), and the event types it lets through as they are: rows events and annotations.
_PAYLOADS = compiled("changestream.native.zstd_frames")
_ROW_FLAGS = bytes(1 if code in _ROW_TYPES else 0 for code in range(256))
_WALK = compiled("changestream.parallel._plain_walk")


class RawSource(Protocol):
    """Raw events, and ``None`` whenever the source is idle."""

    def raw_stream(self) -> Iterator[RawEvent | None]: ...


class RawBatchSource(Protocol):
    """Raw events in lists as they were read (many at once: the segmenter's compiled walk
    takes a list's common case in one call), and ``None`` whenever the source is idle."""

    def raw_batches(self) -> Iterator[list[RawEvent] | None]: ...


def _batches(source: RawSource | RawBatchSource) -> Iterator[list[RawEvent] | None]:
    if hasattr(source, "raw_batches"):
        return source.raw_batches()
    # One at a time: such a source may act as each event is taken (a unit's names).
    return (None if raw is None else [raw] for raw in source.raw_stream())


class _PythonWalk:
    """What :class:`changestream.parallel._plain_walk.PlainWalk` holds, without it: the
    loop takes every event itself."""

    def __init__(self, decoder: EventDecoder, names_logged: dict[bytes, bool | None],
                 kept: Any, annotations: bool, transaction_bytes: int, segment_events: int,
                 segment_bytes: int):
        self.names_logged = names_logged
        self.kept = kept
        self.kept_version: Any = -1
        # Schemas resolved here for TABLE_MAPs that do not log them whole (None: a table
        # nobody reads), valid for the decoder's table_maps_epoch and table filter.
        self.resolved: dict[bytes, TableSchema | None] = {}
        self.epoch = -1
        self.filter: Any = None
        self.pending_schemas: dict[bytes, TableSchema] = {}  # the next segment's
        self.current: list[RawEvent] = []  # the open transaction a worker may take
        self.size = 0
        self.pending: list[RawEvent] = []  # the next segment's events
        self.pending_bytes = 0
        self.due = False


class SegmentTaker(Protocol):
    """Where the segmenter hands segments: the decode worker processes
    (:class:`DecodeWorkers`), or one worker in the reader's own process
    (:class:`changestream.parallel.inline_workers.InlineWorkers`)."""

    ready: bool

    def submit(self, segment: Segment, end: tuple[str, int]) -> SegmentTicket: ...


class Segmenter:
    """Turns raw events into what the listener routes: decoded events, ``None`` when the
    source is idle, and the tickets of segments handed to ``workers``, all in binlog order."""

    def __init__(self, decoder: EventDecoder, workers: SegmentTaker, *,
                 segment_events: int = 2_000, segment_bytes: int = 512 << 10,
                 transaction_bytes: int = 4 << 20, kept_here: Any = None,
                 annotations: bool = True):
        self.decoder = decoder
        # Whether the statement annotations (ANNOTATE_ROWS, ROWS_QUERY) of a worker's
        # transactions are read (``include_sql``); when not, they are left out of segments,
        # as a MariaDB server asked not to send them leaves them out of the stream.
        self.annotations = annotations
        # A snapshot's coordinator: the tables it tracks (``tracked``, changing ``version``)
        # are decoded here, where their keys are noted.
        self.kept_here = kept_here
        self.workers = workers
        self.segment_events = segment_events
        self.segment_bytes = segment_bytes
        self.transaction_bytes = transaction_bytes
        self._format_description: RawEventData | None = None
        self._pending_payloads = False  # some pending transaction came compressed
        self._names_logged: dict[bytes, bool | None] = {}
        # The open transaction, the pending segment, and which version of kept_here's
        # tables _names_logged is for: shared with the compiled walk.
        self._walk = (_WALK.PlainWalk if _WALK is not None else _PythonWalk)(
            decoder, self._names_logged, kept_here, annotations, transaction_bytes,
            segment_events, segment_bytes)
        self._layout_of: Any = None  # the FORMAT_DESCRIPTION _layout_cache is of
        self._layout_cache = (0, 0, 0)
        # Bytes decoded here while the workers start: up to a segment's worth (a first
        # record soon, without holding a big backlog's rows in this process), then the
        # workers are waited for.
        self._before_ready = segment_bytes
        self._zstd = zstandard.ZstdDecompressor()

    def events(self, source: RawSource | RawBatchSource
               ) -> Iterator[Event | SegmentTicket | None]:
        """Route ``source``'s events (see the class docstring)."""
        decode = self.decoder.decode
        annotations = self.annotations
        w = self._walk
        walk = getattr(w, "walk", None)  # none without the compiled walk
        try:
            for batch in _batches(source):
                if batch is None:
                    if w.pending:
                        yield self._submit()
                    yield None
                    continue
                i, n = 0, len(batch)
                while i < n:
                    if walk is not None:
                        tail, query_post, table_map_post = self._layout()
                        i = walk(batch, i, tail, query_post, table_map_post,
                                 self.workers.ready or self._before_ready <= 0)
                        if w.due:
                            yield self._submit()
                            continue
                        if i == n:
                            break
                    raw = batch[i]
                    i += 1
                    yield from self._route(raw, decode, annotations)
        except SourceError:
            # Whole transactions read before the source failed are still delivered.
            if w.pending:
                yield self._submit()
            raise
        if w.pending:
            yield self._submit()
        if w.current:  # the source ended inside a transaction: as without workers
            for held in w.current:
                yield decode(held.data, held.file, held.offset)

    def _route(self, raw: RawEvent, decode: Any, annotations: bool
               ) -> Iterator[Event | SegmentTicket]:
        """One event the compiled walk did not take (every event without it)."""
        w = self._walk
        data = raw.data
        code = data[4]
        current = w.current
        if current:
            if code in _ANNOTATIONS and not annotations:
                return  # read by no one: not copied and sent to a worker
            if code in _ROW_TYPES or (code == et.TABLE_MAP and self._worker_table(raw)):
                current.append(raw)
                w.size += len(data)
                if w.size <= self.transaction_bytes:
                    return
            elif code == et.QUERY and len(current) == 1 and \
                    current[0].data[4] != et.MARIADB_GTID and \
                    self._query_kind(data) == BEGIN:
                current.append(raw)
                w.size += len(data)
                return
            elif (closing := self._closing_size(raw, len(current))) is not None:
                current.append(raw)
                if w.pending and w.pending[0].file != raw.file:
                    yield self._submit()
                self._close(current, w.size + closing)
                w.current = []
                if len(w.pending) >= self.segment_events or \
                        w.pending_bytes >= self.segment_bytes:
                    yield self._submit()
                return
            elif code in _HEARTBEATS:
                return
            else:
                current.append(raw)
            # Not a worker's after all: everything of it is decoded here.
            if w.pending:
                yield self._submit()
            w.current = []
            for held in current:
                yield decode(held.data, held.file, held.offset)
            return
        if opens_plain_group(data) and (self.workers.ready or self._before_ready <= 0):
            w.current = [raw]
            w.size = len(data)
            return
        if code == et.FORMAT_DESCRIPTION:
            self._format_description = (raw.file, raw.offset, data)
        if w.pending and code not in _HEARTBEATS:
            yield self._submit()
        if self._before_ready > 0:
            self._before_ready -= len(data)
        yield decode(data, raw.file, raw.offset)

    def _close(self, transaction: list[RawEvent], size: int) -> None:
        self._walk.pending.extend(transaction)
        self._walk.pending_bytes += size
        self._pending_payloads |= transaction[-1].data[4] == et.TRANSACTION_PAYLOAD

    def _closing_size(self, raw: RawEvent, held: int) -> int | None:
        """The size ``raw`` adds to a worker's transaction when it ends one (``held``: the
        events before it): XID, COMMIT, or the TRANSACTION_PAYLOAD of a compressed one,
        which counts as its unpacked size (what the worker holds and writes records of);
        ``None`` for any other event."""
        data = raw.data
        code = data[4]
        if code == et.XID or (code == et.QUERY and self._query_kind(data) == COMMIT):
            return len(data)
        if code == et.TRANSACTION_PAYLOAD and held == 1:
            return self._plain_payload(raw)
        return None

    def _plain_payload(self, raw: RawEvent) -> int | None:
        """The unpacked size of a TRANSACTION_PAYLOAD right after a MySQL GTID event when it
        holds a plain transaction a worker may take (see
        :mod:`changestream.parallel.payloads`), else ``None``."""
        data = raw.data
        body = data[HEADER_SIZE:self._body_end(data)]
        if _PAYLOADS is not None:
            size = _PAYLOADS.plain_payload_size(
                body, self._inner_kind, _ROW_FLAGS, self._layout()[1], self.transaction_bytes)
        else:
            size = plain_payload_size(body, raw.file, raw.offset, self._zstd,
                                      self._inner_kind)
        return size if size is not None and size <= self.transaction_bytes else None

    def _inner_kind(self, data: bytes) -> str | None:
        """What an event inside a TRANSACTION_PAYLOAD (no checksum) is to a worker's
        transaction (:data:`changestream.parallel.payloads.InnerKind`)."""
        code = data[4]
        if code == et.TABLE_MAP:
            # Compressed: a TABLE_MAP that does not log its names is decoded here.
            return "row" if self._logged(data, len(data)) else None
        if code in _ROW_TYPES:
            return "row"
        if code == et.XID:
            return "commit"
        if code == et.QUERY:
            kind = self._query_kind(data, len(data))
            return "begin" if kind == BEGIN else "commit" if kind == COMMIT else None
        return None

    def _submit(self) -> SegmentTicket:
        assert self._format_description is not None, "events before FORMAT_DESCRIPTION"
        w = self._walk
        pending = w.pending
        last = pending[-1]
        segment = Segment(self._format_description, pending[0].file,
                          b"".join([r.data for r in pending]),
                          array.array("q", [r.offset for r in pending]),
                          self._pending_payloads, w.pending_schemas or None)
        w.pending_schemas = {}
        w.pending = []
        w.pending_bytes = 0
        self._pending_payloads = False
        return self.workers.submit(segment, (last.file, last.offset + len(last.data)))

    def _layout(self) -> tuple[int, int, int]:
        """The checksum's size and the QUERY and TABLE_MAP post-header lengths of the
        current FORMAT_DESCRIPTION (looked up again only when it changes)."""
        fde = self.decoder.format_description
        if fde is not self._layout_of:
            self._layout_of = fde
            decoder = self.decoder
            self._layout_cache = (4 if decoder.checksum_alg == CHECKSUM_CRC32 else 0,
                                  decoder.post_header_length(et.QUERY),
                                  decoder.post_header_length(et.TABLE_MAP))
        return self._layout_cache

    def _body_end(self, data: bytes) -> int:
        return len(data) - self._layout()[0]

    def _query_kind(self, data: bytes, body_end: int | None = None) -> str:
        """What a QUERY event's statement is to its transaction (``body_end``: where its
        body ends, when not before a checksum the file's events have)."""
        tail, post, _ = self._layout()
        return query_kind(data, post, len(data) - tail if body_end is None else body_end)

    def _worker_table(self, raw: RawEvent) -> bool:
        """Whether a worker may take the rows after a TABLE_MAP. A TABLE_MAP that does not
        log everything a worker needs (its columns' names: ``binlog_row_metadata`` is not
        FULL, as MySQL's and MariaDB's defaults; a column that may be MariaDB's UUID/INET
        type) is decoded here, where its schema is resolved in binlog order (ColumnInfo:
        the schema history or ``information_schema``), and that schema goes with the
        segment. No for a table a snapshot tracks or a TABLE_MAP that cannot be read
        (decoded here, where the error names the place)."""
        data = raw.data
        key = self._key(data)
        logged = self._logged(data, key=key)
        if logged is not None:
            return logged
        decoder = self.decoder
        w = self._walk
        if decoder.table_maps_epoch != w.epoch or decoder.table_filter is not w.filter:
            w.resolved.clear()  # a DDL or a new table filter since they were resolved
            w.epoch, w.filter = decoder.table_maps_epoch, decoder.table_filter
        if key in w.resolved:
            schema = w.resolved[key]
        else:
            event = decoder.decode(data, raw.file, raw.offset)  # its errors as without workers
            if not isinstance(event, TableMapEvent):
                return False
            table = event.schema
            wanted = decoder.table_filter is None or decoder.table_filter(table.database,
                                                                         table.table)
            schema = table if wanted else None  # a table nobody reads needs no names
            if len(w.resolved) > 4096:
                w.resolved.clear()
            w.resolved[key] = schema
        if schema is not None:
            w.pending_schemas[key] = schema
        return True

    def _key(self, data: bytes, body_end: int | None = None) -> bytes:
        """A TABLE_MAP's bytes but for the table id (as the decoder caches schemas)."""
        tail, _, post = self._layout()
        end = len(data) - tail if body_end is None else body_end
        return data[HEADER_SIZE + identity_start(post):end]

    def _logged(self, data: bytes, body_end: int | None = None, key: bytes | None = None
                ) -> bool | None:
        """Whether a TABLE_MAP logs everything a worker needs (its columns' names, and no
        column that may be MariaDB's UUID/INET6/INET4): ``None`` when it does not, ``False``
        for a table a snapshot tracks or one that cannot be read; cached by its bytes but
        for the table id."""
        tail, _, post = self._layout()
        end = len(data) - tail if body_end is None else body_end
        if key is None:  # the caller may have it already
            key = self._key(data, body_end)
        kept = self.kept_here
        if kept is not None and kept.version != self._walk.kept_version:
            self._names_logged.clear()
            self._walk.kept_version = kept.version
        if key in self._names_logged:
            return self._names_logged[key]
        known: bool | None
        try:
            fde = self.decoder.format_description
            mariadb = fde is not None and fde.is_mariadb
            schema = parse_table_map(data[HEADER_SIZE:end], post, mariadb)[2]
            if kept is not None and (schema.database, schema.table) in kept.tracked:
                known = False
            elif schema.names_logged and not (mariadb and may_hold_address(schema)):
                known = True
            else:
                known = None
        except (TableMapFormatError, IndexError, struct.error, ValueError):
            known = False  # decoded here, where the error names the place
        if len(self._names_logged) > 4096:
            self._names_logged.clear()
        self._names_logged[key] = known
        return known
