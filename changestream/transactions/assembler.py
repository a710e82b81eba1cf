"""Assembling committed transactions of changes from a stream of decoded events.

The logic of the Transaction actor, kept free of actors so it can be tested on recorded
events. It groups events into transactions (MySQL's BEGIN ... COMMIT/XID and GTID groups,
MariaDB's BEGIN-less GTID groups), drops what was rolled back, makes each DDL statement a
transaction of its own, holds XA transactions from XA PREPARE until XA COMMIT (delivered) or
XA ROLLBACK (dropped), stamps every change with its transaction, and spills the changes of
big transactions to disk so memory stays bounded.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from changestream.decoding.ddl import parse_ddl
from changestream.decoding.events import (
    FL_STANDALONE,
    Event,
    FormatDescriptionEvent,
    GtidEvent,
    IncidentEvent,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RowsEvent,
    RowsQueryEvent,
    TransactionPayloadEvent,
    XaPrepareEvent,
    XidEvent,
)
from changestream.decoding.rows import ABSENT
from changestream.model.changes import (
    Change,
    Position,
    TransactionInfo,
    TransactionPart,
    binlog_order,
)
from changestream.model.gtid import GtidProgress, MariadbGtidState, MysqlGtidSet
from changestream.schema.definition import definition_after
from changestream.transactions.filters import ChangeFilter
from changestream.transactions.row_shapes import SchemaShape, ShapeCache
from changestream.transactions.spill import SpillFile

log = logging.getLogger("changestream")

TransactionalCheck = Callable[[str, str], bool | None]
"""``(database, table) -> is the table transactional`` (``None`` when unknown)."""

_XA_END = re.compile(r"^\s*XA\s+(COMMIT|ROLLBACK)\s+(.*?)(\s+ONE\s+PHASE)?\s*;?\s*$", re.I | re.S)
_SKIPPED_STATEMENTS = ("SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT", "XA START", "XA BEGIN",
                       "XA END")


def _normal_xid(text: str) -> str:
    return re.sub(r"\s+", "", text)


@functools.lru_cache(maxsize=64)
def utc_time(seconds: float) -> dt.datetime:
    """The UTC time ``seconds`` after the epoch (an event's or GTID's commit time)."""
    # Cached: the commit events of a busy second share their timestamp (and the records'
    # encoder then formats the shared datetime once).
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


@dataclass(slots=True)
class _Group:
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


@dataclass(slots=True)
class _Finished:
    """A group that ended: its changes to deliver (if any) and what it does to the position."""

    info: TransactionInfo | None
    group: _Group | None
    gtid: str | None
    file: str
    end: int
    xa_held: tuple[str, str] | None = None
    xa_resolved: str | None = None


class TransactionAssembler:
    """Feeds on decoded events; ``drain()`` gives the committed transactions in parts.

    ``gtid_set`` is the GTID set/state before the first event (else it is taken from the
    first PREVIOUS_GTIDS / GTID_LIST event). Transactions with more than
    ``max_buffered_changes`` changes go to a spill file in ``spill_dir``.
    """

    def __init__(self, *, gtid_set: GtidProgress | None = None,
                 change_filter: ChangeFilter | None = None,
                 max_buffered_changes: int = 20_000, spill_dir: str | None = None,
                 is_transactional: TransactionalCheck | None = None,
                 pending_xa: dict[str, list[Change]] | None = None,
                 include_sql: bool = True):
        self.gtid_set = gtid_set
        self.include_sql = include_sql
        self.filter = None if change_filter is None or change_filter.everything \
            else change_filter
        self.max_buffered_changes = max_buffered_changes
        self.spill_dir = spill_dir
        self.is_transactional = is_transactional
        self.flavor: str | None = None
        self.file = ""
        self._file_path: str | None = None
        self._payload_end = 0  # end of the TRANSACTION_PAYLOAD whose inner events are fed
        self._group: _Group | None = None
        self._held_xa: dict[str, tuple[_Group, str]] = {}
        self._pending_positions: dict[str, str] = {}
        self._finished: deque[_Finished] = deque()
        self._shapes = ShapeCache(self.filter)
        self._delivered_boundary: tuple[str, int] | None = None
        self.start_boundary: tuple[str, int] | None = None  # where reading began, if known
        self.snapshot: dict[str, Any] | None = None  # a snapshot's progress, for positions
        # Tables whose rows in transactions that begin before a binlog position are left
        # out: a snapshot read them whole at that position (tables without a key).
        self.read_until: dict[tuple[str, str], tuple[str, int, int]] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            RowsEvent: self._rows,
            QueryEvent: self._query,
            XidEvent: self._xid,
            GtidEvent: self._gtid,
            MariadbGtidEvent: self._mariadb_gtid,
            XaPrepareEvent: self._xa_prepare,
            RowsQueryEvent: self._rows_query,
            TransactionPayloadEvent: self._payload,
            FormatDescriptionEvent: self._format_description,
            PreviousGtidsEvent: self._previous_gtids,
            MariadbGtidListEvent: self._gtid_list,
            IncidentEvent: self._incident,
        }

    # -- input ---------------------------------------------------------------------------

    @property
    def inside_transaction(self) -> bool:
        return self._group is not None

    def feed(self, event: Event) -> None:
        """Take the next event of the stream."""
        handler = self._handlers.get(type(event))
        file = event.header.file
        if file and file is not self._file_path:
            # Positions and records name binlog files as the server does (no folder), so
            # a live source and a file source give the same ones.
            self._file_path = file
            self.file = file.rsplit("/", 1)[-1]
        if handler is not None:
            handler(event)

    def reset_open_transaction(self) -> None:
        """Forget a transaction cut short (the source reconnects and reads it again)."""
        if self._group is not None:
            self._group.discard()
        self._group = None

    def has_held(self, xid: str) -> bool:
        """Whether the XA transaction ``xid`` is prepared and held here."""
        return xid in self._held_xa

    def adopt_held(self, xid: str, other: TransactionAssembler) -> None:
        """Take over the prepared XA transaction ``xid`` that ``other`` read (a restart
        reads each transaction still prepared at the saved position again)."""
        self._held_xa[xid] = other._held_xa.pop(xid)
        self._pending_positions[xid] = self._held_xa[xid][1]

    # -- groups --------------------------------------------------------------------------

    def _open(self, event: Event, **fields: Any) -> _Group:
        if self._group is not None:
            h = self._group
            log.warning("transaction starting at %s offset %d has no end before the next one "
                        "at offset %d; its %d changes are not delivered", h.file, h.start,
                        event.header.offset, h.size)
            h.discard()
        self._group = _Group(self.file, event.header.offset, event.header.server_id, **fields)
        return self._group

    def _group_for(self, event: Event) -> _Group:
        return self._group if self._group is not None else self._open(event, began=True)

    def _info(self, group: _Group, end: int, xid: int | str | None,
              commit_ts: dt.datetime | None, gtid: str | None = None) -> TransactionInfo:
        gtid = gtid if gtid is not None else group.gtid
        tid = gtid or f"{group.server_id}-{group.file}-{group.start}"
        return TransactionInfo(tid, gtid, xid, commit_ts or group.commit_ts, group.size,
                               group.server_id, group.file, group.start, end)

    def _end_of(self, event: Event) -> int:
        """Where a transaction ending with ``event`` ends: after it, or after the compressed
        TRANSACTION_PAYLOAD it came in."""
        h = event.header
        return h.end if h.payload_index is None else self._payload_end

    def _commit(self, event: Event, xid: int | str | None = None) -> None:
        group = self._group
        assert group is not None
        self._group = None
        h = event.header
        end = self._end_of(event)
        if group.changes or (group.spill is not None and group.spill.count):
            commit_ts = group.commit_ts or utc_time(h.timestamp)
            info = self._info(group, end, xid, commit_ts)
            self._finished.append(_Finished(info, group, group.gtid, self.file, end))
        else:
            self._finished.append(_Finished(None, None, group.gtid, self.file, end))

    def _finish_empty(self, event: Event, gtid: str | None) -> None:
        self._group = None
        self._finished.append(_Finished(None, None, gtid, self.file, self._end_of(event)))

    def _rollback(self, event: Event) -> None:
        group = self._group
        assert group is not None
        kept = [c for c in group.changes if self._survives_rollback(c)] if group.changes else []
        if group.spill is not None and kept != group.changes:
            log.warning("rolled-back transaction at %s offset %d was spilled to disk; its "
                        "non-transactional changes are not delivered", group.file, group.start)
        group.discard()
        group.changes = kept
        if kept:
            self._commit(event)
        else:
            self._finish_empty(event, group.gtid)

    def _survives_rollback(self, change: Change) -> bool:
        """A change to a non-transactional table happened even though the rest rolled back."""
        if self.is_transactional is None or change.database is None or change.table is None:
            return False
        return self.is_transactional(change.database, change.table) is False

    # -- event handlers ------------------------------------------------------------------

    def _format_description(self, event: FormatDescriptionEvent) -> None:
        self.flavor = "mariadb" if event.is_mariadb else "mysql"

    def _previous_gtids(self, event: PreviousGtidsEvent) -> None:
        if self.gtid_set is None and not self._finished and self._delivered_boundary is None:
            self.gtid_set = MysqlGtidSet(event.gtid_set)

    def _gtid_list(self, event: MariadbGtidListEvent) -> None:
        if self.gtid_set is None and not self._finished and self._delivered_boundary is None:
            self.gtid_set = MariadbGtidState(event.gtid_state)

    def _incident(self, event: IncidentEvent) -> None:
        log.warning("INCIDENT event in the binlog (%s at offset %d): %s; the server may have "
                    "lost changes here", event.header.file, event.header.offset, event.message)

    def _gtid(self, event: GtidEvent) -> None:
        ts = event.original_commit_ts or event.immediate_commit_ts
        self._open(event, gtid=event.gtid,
                   commit_ts=utc_time(ts / 1e6) if ts else None)

    def _mariadb_gtid(self, event: MariadbGtidEvent) -> None:
        h = event.header
        standalone = bool(event.flags2 & FL_STANDALONE)
        gtid = f"{event.domain_id}-{h.server_id}-{event.seq_no}"
        if self._group is not None or event.xid is not None:
            self._open(event, gtid=gtid, began=not standalone, standalone=standalone,
                       xa_id=str(event.xid) if event.xid is not None else None)
            return
        self._group = _Group(self.file, h.offset, h.server_id, gtid, None, not standalone,
                             standalone)

    def _rows_query(self, event: RowsQueryEvent) -> None:
        if self._group is not None and self.include_sql:
            self._group.sql = event.query

    def _payload(self, event: TransactionPayloadEvent) -> None:
        self._payload_end = event.header.end
        for inner in event.events:
            self.feed(inner)

    def _xid(self, event: XidEvent) -> None:
        if self._group is None:
            log.warning("XID event without a transaction at %s offset %d (the stream started "
                        "inside a transaction?)", event.header.file, event.header.offset)
            return
        self._commit(event, event.xid)

    def _xa_prepare(self, event: XaPrepareEvent) -> None:
        if self._group is None:
            return
        xid = str(event.xid)
        if event.one_phase:
            self._commit(event, xid)
        else:
            self._hold(event, xid)

    def _hold(self, event: Event, xid: str) -> None:
        group = self._group
        assert group is not None
        self._group = None
        where = f"{group.file}:{group.start}"
        self._held_xa[xid] = (group, where)
        self._finished.append(_Finished(None, None, group.gtid, self.file, self._end_of(event),
                                        xa_held=(xid, where)))

    def _query(self, event: QueryEvent) -> None:
        query = event.query
        head = query[:24].lstrip().upper()
        group = self._group
        if head.startswith("BEGIN"):
            if group is None or group.began:
                group = self._open(event)
            group.began = True
            return
        if head.startswith("COMMIT"):
            if group is not None:
                self._commit(event)
            return
        if head.startswith("ROLLBACK") and not head.startswith("ROLLBACK TO"):
            if group is not None:
                self._rollback(event)
            return
        if head.startswith("XA "):
            self._xa_statement(event, head)
            return
        if group is not None and group.began and not group.standalone:
            if not head.startswith(_SKIPPED_STATEMENTS):
                log.warning("statement inside a transaction is not decoded (only row-based "
                            "changes are): %.80s (%s at offset %d)", query,
                            event.header.file, event.header.offset)
            return
        self._statement(event)

    def _xa_statement(self, event: QueryEvent, head: str) -> None:
        group = self._group
        if head.startswith(("XA START", "XA BEGIN", "XA END")):
            if head.startswith(("XA START", "XA BEGIN")) and (group is None or not group.began):
                group = group or self._open(event)
                group.began = True
            return
        if head.startswith("XA PREPARE"):  # MariaDB ends the prepared group with it
            if group is not None:
                xid = group.xa_id or _normal_xid(event.query.strip()[len("XA PREPARE"):])
                self._hold(event, xid)
            return
        m = _XA_END.match(event.query)
        if m is None:
            return
        verb, xid, one_phase = m.group(1).upper(), _normal_xid(m.group(2)), m.group(3)
        if group is not None and group.xa_id:
            xid = group.xa_id
        if one_phase and group is not None and group.size:
            self._commit(event, xid)
            return
        held = self._held_xa.pop(xid, None)
        gtid = group.gtid if group is not None else None
        if held is None:
            log.warning("XA %s of %s, which was not prepared after the start position (%s at "
                        "offset %d): nothing to deliver", verb, xid, event.header.file,
                        event.header.offset)
            self._finish_empty(event, gtid)
            return
        prepared, _where = held
        if verb == "ROLLBACK" or not prepared.size:
            prepared.discard()
            self._group = None
            self._finished.append(_Finished(None, None, gtid, self.file, self._end_of(event),
                                            xa_resolved=xid))
            return
        commit_ts = (group.commit_ts if group is not None else None) or utc_time(
            event.header.timestamp)
        if gtid is not None:
            prepared.gtid = gtid
        self._group = None
        info = self._info(prepared, self._end_of(event), xid, commit_ts, gtid)
        self._finished.append(_Finished(info, prepared, gtid, self.file, self._end_of(event),
                                        xa_resolved=xid))

    def _statement(self, event: QueryEvent) -> None:
        """A statement that is a transaction by itself: DDL, or administration (no change)."""
        group = self._group or self._open(event)
        ddl = parse_ddl(event.query, event.database)
        if ddl is not None and (self.filter is None or self.filter.ddl(ddl, event.database)):
            table = ddl.tables[0] if ddl.tables else None
            database = (table.database if table else ddl.database) or event.database or None
            name = table.table if table else None
            group.changes.append(Change(
                "ddl", database, name, None, None, None, event.query,
                self.file, event.header.offset, 0,
                schema=definition_after(event.schema_change, database, name),
                session_database=event.database or None))
            self._commit(event)
        else:
            self._finish_empty(event, group.gtid)

    def _rows(self, event: RowsEvent) -> None:
        schema = event.schema
        database, table = schema.database, schema.table
        if self.filter is not None and not self.filter.table(database, table):
            return
        group = self._group_for(event)
        until = self.read_until.get((database, table)) if self.read_until else None
        if until is not None and binlog_order(group.file, group.start) < until:
            return  # the snapshot of the table holds this transaction's rows already
        shape = self._shapes.shape(schema)
        ncols = len(shape.names)
        full = len(event.present) == ncols and (
            event.present_after is None or len(event.present_after) == ncols)
        sql = group.sql
        out = group.changes
        if full and shape.direct:
            self._direct_rows(event, shape, sql, out)
        else:
            self._image_rows(event, shape, full, sql, out)
        if len(out) >= self.max_buffered_changes:
            if group.spill is None:
                group.spill = SpillFile(self.spill_dir)
                log.info("transaction at %s offset %d passed %d changes: spilling to disk",
                         group.file, group.start, self.max_buffered_changes)
            group.spill.write(out)
            group.changes = []

    def _direct_rows(self, event: RowsEvent, shape: SchemaShape, sql: str | None,
                     out: list[Change]) -> None:
        """The changes of a rows event whose images log every column, none left out: the
        images and keys come straight from the values."""
        schema = event.schema
        database, table = schema.database, schema.table
        names = shape.names
        file, pos = self.file, event.header.offset
        kind = event.kind
        append = out.append
        key = shape.direct_key
        if kind == "insert" or kind == "delete":
            insert = kind == "insert"
            if key is not None and len(key) == 1:
                (name, index), = key
                for i, values in enumerate(event.rows):
                    image = dict(zip(names, values))
                    pk = {name: values[index]}
                    if insert:
                        append(Change(kind, database, table, None, image, pk, sql, file, pos,
                                      i, 0, False, schema))
                    else:
                        append(Change(kind, database, table, image, None, pk, sql, file, pos,
                                      i, 0, False, schema))
                return
            for i, values in enumerate(event.rows):
                image = dict(zip(names, values))
                pk = {n: values[j] for n, j in key} if key is not None else None
                if insert:
                    append(Change(kind, database, table, None, image, pk, sql, file, pos, i,
                                  0, False, schema))
                else:
                    append(Change(kind, database, table, image, None, pk, sql, file, pos, i,
                                  0, False, schema))
            return
        for i, (old, new) in enumerate(event.rows):
            pk = {n: new[j] for n, j in key} if key is not None else None
            append(Change("update", database, table, dict(zip(names, old)),
                          dict(zip(names, new)), pk, sql, file, pos, i, 0, False, schema))

    def _image_rows(self, event: RowsEvent, shape: SchemaShape, full: bool,
                    sql: str | None, out: list[Change]) -> None:
        """The changes of a rows event in general: columns not logged (``ABSENT``) or left
        out by the filter."""
        schema = event.schema
        database, table = schema.database, schema.table
        names, pk_names, excluded = shape.names, shape.pk_names, shape.excluded
        file, pos = self.file, event.header.offset
        kind = event.kind

        def image(values: list[Any]) -> dict[str, Any]:
            if full:
                d = dict(zip(names, values))
            else:
                d = {n: v for n, v in zip(names, values) if v is not ABSENT}
            for name in excluded:
                d.pop(name, None)
            return d

        def key(d: dict[str, Any]) -> dict[str, Any] | None:
            if pk_names is None:
                return None
            return {n: d.get(n) for n in pk_names}

        if kind == "insert":
            for i, values in enumerate(event.rows):
                after = image(values)
                out.append(Change("insert", database, table, None, after, key(after), sql,
                                  file, pos, i, schema=schema))
        elif kind == "delete":
            for i, values in enumerate(event.rows):
                before = image(values)
                out.append(Change("delete", database, table, before, None, key(before), sql,
                                  file, pos, i, schema=schema))
        else:
            for i, (old, new) in enumerate(event.rows):
                before, after = image(old), image(new)
                # The after image's key, where it logs the key columns; an image that logs
                # only what changed (binlog_row_image=MINIMAL) leaves them to the before image.
                pk = None if pk_names is None else {
                    n: after[n] if n in after else before.get(n) for n in pk_names}
                out.append(Change("update", database, table, before, after, pk, sql, file,
                                  pos, i, schema=schema))

    # -- output --------------------------------------------------------------------------

    def drain(self, max_changes: int = 10_000) -> Iterator[tuple[list[TransactionPart],
                                                                Position | None]]:
        """The transactions finished so far, as messages of at most about ``max_changes``
        changes each, with the position after the last transaction completed in each (or
        ``None`` when a message ends inside a big transaction)."""
        parts: list[TransactionPart] = []
        count = 0
        boundary_moved = False
        finished = self._finished
        while finished:
            done = finished.popleft()
            if done.info is not None and done.group is not None:
                for part in self._parts(done, max_changes):
                    if parts and count + len(part.changes) > max_changes:
                        yield parts, self.position() if boundary_moved else None
                        parts, count, boundary_moved = [], 0, False
                    parts.append(part)
                    count += len(part.changes)
            self._advance(done)
            boundary_moved = True
        if parts or boundary_moved:
            yield parts, self.position() if boundary_moved else None

    def drain_whole(self) -> Iterator[tuple[list[TransactionPart], str | None, str, int]]:
        """Each transaction finished so far, in one go: its parts (none when nothing of it
        is delivered), its GTID, and the file and offset where it ends. For decode workers,
        which assemble plain DML transactions; the router's own assembler then only notes
        them with :meth:`note_delivered`."""
        finished = self._finished
        while finished:
            done = finished.popleft()
            parts: list[TransactionPart] = []
            if done.info is not None and done.group is not None:
                parts = list(self._parts(done, 1 << 62))
            yield parts, done.gtid, done.file, done.end

    def note_delivered(self, gtids: list[str], file: str, end: int) -> None:
        """Transactions that were assembled elsewhere (by a decode worker) are delivered:
        move the GTID set past ``gtids`` and the resume point to ``file``/``end``."""
        if self.gtid_set is not None:
            self.gtid_set.add_all(gtids)
        self._delivered_boundary = (file, end)

    def _parts(self, done: _Finished, max_changes: int) -> Iterator[TransactionPart]:
        """A finished transaction's changes, numbered and stamped, in parts of at most
        ``max_changes``; the last part is ``complete`` and says where the transaction ends."""
        info, group = done.info, done.group
        assert info is not None and group is not None
        end = Position(done.file, done.end)
        changes = group.changes
        if group.spill is None and len(changes) <= max_changes:
            # The whole transaction in one part (most are): no chunking, no spill file.
            for seq, change in enumerate(changes):
                change.seq = seq
                change.transaction = info
            if changes:
                changes[-1].last = True
            group.changes = []
            yield TransactionPart(info, changes, True, end)
            return
        total = group.size
        seq = 0
        chunks: Iterator[list[Change]]
        if group.spill is not None:
            if changes:
                group.spill.write(changes)
                group.changes = []
            chunks = group.spill.read()
        else:
            chunks = iter([changes])
        try:
            for chunk in chunks:
                for start in range(0, len(chunk), max_changes):
                    piece = chunk[start:start + max_changes] if len(chunk) > max_changes \
                        else chunk
                    for change in piece:
                        change.seq = seq
                        change.transaction = info
                        seq += 1
                    complete = seq == total
                    if complete:
                        piece[-1].last = True
                    yield TransactionPart(info, piece, complete, end if complete else None)
        finally:
            group.discard()

    def _advance(self, done: _Finished) -> None:
        if done.gtid is not None and self.gtid_set is not None:
            self.gtid_set.add(done.gtid)
        if done.xa_held is not None:
            self._pending_positions[done.xa_held[0]] = done.xa_held[1]
        if done.xa_resolved is not None:
            self._pending_positions.pop(done.xa_resolved, None)
        self._delivered_boundary = (done.file, done.end)

    def position(self) -> Position:
        """Where to resume after everything delivered so far."""
        boundary = self._delivered_boundary or self.start_boundary
        assert boundary is not None
        file, pos = boundary
        return Position(file, pos, self.gtid_set.render() if self.gtid_set else None,
                        self.flavor, dict(self._pending_positions),
                        snapshot=self.snapshot)
