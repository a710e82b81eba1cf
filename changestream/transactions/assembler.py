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
import logging
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from changestream.decoding.ddl import DdlStatement, parse_ddl
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
from changestream.decoding.statements import (
    BEGIN,
    COMMIT,
    ROLLBACK,
    SKIPPED,
    XA_END,
    XA_PREPARE,
    XA_RESOLVE,
    XA_START,
    statement_kind,
)
from changestream.model.changes import (
    Change,
    Position,
    TransactionInfo,
    TransactionPart,
    binlog_name,
    binlog_order,
)
from changestream.model.gtid import GtidProgress, MariadbGtidState, MysqlGtidSet
from changestream.schema.definition import definition_after
from changestream.schema.refill import statement_refill_reason
from changestream.transactions.filters import ChangeFilter
from changestream.transactions.groups import (
    Finished,
    Group,
    gtid_commit_time,
    transaction_id,
    utc_time,
)
from changestream.transactions.parts import transaction_parts
from changestream.transactions.resume_point import ResumePoint
from changestream.transactions.row_changes import direct_row_changes, image_row_changes
from changestream.transactions.row_shapes import ShapeCache
from changestream.transactions.spill import SpillFile
from changestream.transactions.xa_groups import XaGroups

log = logging.getLogger("changestream")

TransactionalCheck = Callable[[str, str], bool | None]
"""``(database, table) -> is the table transactional`` (``None`` when unknown)."""

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
        self.resume = ResumePoint(gtid_set)
        self.include_sql = include_sql
        self.filter = None if change_filter is None or change_filter.everything \
            else change_filter
        self.max_buffered_changes = max_buffered_changes
        self.spill_dir = spill_dir
        self.is_transactional = is_transactional
        self.file = ""
        self._file_path: str | None = None
        self._payload_end = 0  # end of the TRANSACTION_PAYLOAD whose inner events are fed
        self._group: Group | None = None
        self.xa = XaGroups(self)  # prepared XA transactions, held until resolved
        self._finished: deque[Finished] = deque()
        self._shapes = ShapeCache(self.filter)
        # Tables whose rows in transactions that begin before a binlog position are left
        # out: a snapshot read them whole at that position (tables without a key).
        self.read_until: dict[tuple[str, str], tuple[str, int, int]] = {}
        #: Told (database, table, why, "file:offset") of a DDL that gave a table's rows
        #: values no row event carries, before that DDL's transaction is done.
        self.on_refill: Callable[[str, str, str, str], None] | None = None
        self._handlers: dict[type, Callable[[Any], None]] = {
            RowsEvent: self._rows,
            QueryEvent: self._query,
            XidEvent: self._xid,
            GtidEvent: self._gtid,
            MariadbGtidEvent: self._mariadb_gtid,
            XaPrepareEvent: self.xa.prepare,
            RowsQueryEvent: self._rows_query,
            TransactionPayloadEvent: self._payload,
            FormatDescriptionEvent: self._format_description,
            PreviousGtidsEvent: self._previous_gtids,
            MariadbGtidListEvent: self._gtid_list,
            IncidentEvent: self._incident,
        }

    # -- input ---------------------------------------------------------------------------

    def set_filter(self, change_filter: ChangeFilter | None) -> None:
        """Deliver by ``change_filter`` from the next transaction on (tables added or paused
        while running); called between transactions."""
        self.filter = None if change_filter is None or change_filter.everything \
            else change_filter
        self._shapes = ShapeCache(self.filter)

    @property
    def inside_transaction(self) -> bool:
        return self._group is not None

    def feed(self, event: Event) -> None:
        """Take the next event of the stream."""
        handler = self._handlers.get(type(event))
        file = event.header.file
        if file and file is not self._file_path:
            # Positions and records name binlog files as the server does (no folder, no
            # .gz of an archived copy), so a live source and a file source give the same.
            self._file_path = file
            self.file = binlog_name(file)
        if handler is not None:
            handler(event)

    def reset_open_transaction(self) -> None:
        """Forget a transaction cut short (the source reconnects and reads it again)."""
        if self._group is not None:
            self._group.discard()
        self._group = None

    # -- groups --------------------------------------------------------------------------

    def _open(self, event: Event, **fields: Any) -> Group:
        if self._group is not None:
            h = self._group
            log.warning("transaction starting at %s offset %d has no end before the next one "
                        "at offset %d; its %d changes are not delivered", h.file, h.start,
                        event.header.offset, h.size)
            h.discard()
        self._group = Group(self.file, event.header.offset, event.header.server_id, **fields)
        return self._group

    def _group_for(self, event: Event) -> Group:
        return self._group if self._group is not None else self._open(event, began=True)

    def _info(self, group: Group, end: int, xid: int | str | None,
              commit_ts: dt.datetime | None, gtid: str | None = None) -> TransactionInfo:
        gtid = gtid if gtid is not None else group.gtid
        tid = transaction_id(gtid, group.server_id, group.file, group.start)
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
            self._finished.append(Finished(info, group, group.gtid, self.file, end))
        else:
            self._finished.append(Finished(None, None, group.gtid, self.file, end))

    def _finish_empty(self, event: Event, gtid: str | None) -> None:
        self._group = None
        self._finished.append(Finished(None, None, gtid, self.file, self._end_of(event)))

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

    @property
    def _no_gtids_yet(self) -> bool:
        """Whether no GTID set/state is known yet (the first file's one is taken)."""
        return self.resume.gtid_set is None and not self._finished and \
            self.resume.delivered is None

    def _format_description(self, event: FormatDescriptionEvent) -> None:
        self.resume.flavor = "mariadb" if event.is_mariadb else "mysql"
        self._past_rotation(event)

    def _past_rotation(self, event: FormatDescriptionEvent) -> None:
        """A new binlog file began between transactions: the resume point moves to its
        start, so a quiet stream's position does not stay in a file the server may purge.
        Only from a known boundary in an earlier file (a start by GTID alone has none)."""
        boundary = self.resume.delivered or self.resume.start
        if self._group is not None or boundary is None or event.header.log_pos == 0:
            return
        if binlog_order(self.file, 4) > binlog_order(*boundary):
            self._finished.append(Finished(None, None, None, self.file, 4))

    def _previous_gtids(self, event: PreviousGtidsEvent) -> None:
        if self._no_gtids_yet:
            self.resume.gtid_set = MysqlGtidSet(event.gtid_set)

    def _gtid_list(self, event: MariadbGtidListEvent) -> None:
        if self._no_gtids_yet:
            self.resume.gtid_set = MariadbGtidState(event.gtid_state)

    def _incident(self, event: IncidentEvent) -> None:
        log.warning("INCIDENT event in the binlog (%s at offset %d): %s; the server may have "
                    "lost changes here", event.header.file, event.header.offset, event.message)

    def _gtid(self, event: GtidEvent) -> None:
        self._open(event, gtid=event.gtid, commit_ts=gtid_commit_time(
            event.original_commit_ts, event.immediate_commit_ts))

    def _mariadb_gtid(self, event: MariadbGtidEvent) -> None:
        h = event.header
        standalone = bool(event.flags2 & FL_STANDALONE)
        gtid = event.gtid
        if self._group is not None or event.xid is not None:
            self._open(event, gtid=gtid, began=not standalone, standalone=standalone,
                       xa_id=str(event.xid) if event.xid is not None else None)
            return
        self._group = Group(self.file, h.offset, h.server_id, gtid, None, not standalone,
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

    def _query(self, event: QueryEvent) -> None:
        kind = statement_kind(event.query)
        group = self._group
        if kind == BEGIN:
            if group is None or group.began:
                group = self._open(event)
            group.began = True
        elif kind == COMMIT:
            if group is not None:
                self._commit(event)
        elif kind == ROLLBACK:
            if group is not None:
                self._rollback(event)
        elif kind in (XA_START, XA_END, XA_PREPARE, XA_RESOLVE):
            self.xa.statement(event, kind)
        elif group is not None and group.began and not group.standalone:
            if kind != SKIPPED:
                log.warning("statement inside a transaction is not decoded (only row-based "
                            "changes are): %.80s (%s at offset %d)", event.query,
                            event.header.file, event.header.offset)
        else:
            self._statement(event)

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
            if self.on_refill is not None:
                self._refills(event, ddl, database, name)
            self._commit(event)
        else:
            self._finish_empty(event, group.gtid)

    def _refills(self, event: QueryEvent, ddl: DdlStatement, database: str | None,
                 table: str | None) -> None:
        """Tell ``on_refill`` of the tables in scope whose rows DDL ``event`` changed
        without row events: as the schema history saw it, else from the statement."""
        assert self.on_refill is not None
        where = f"{self.file}:{event.header.offset}"
        if event.schema_change is not None:
            refills = dict(event.schema_change.refills)
        elif ddl.kind == "alter_table" and database and table:
            reason = statement_refill_reason(event.query, self.resume.flavor or "mysql")
            refills = {(database, table): reason} if reason else {}
        else:
            return
        for (db, name), reason in refills.items():
            if self.filter is None or self.filter.table(db, name):
                self.on_refill(db, name, reason, where)

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
            direct_row_changes(event, shape, sql, self.file, out)
        else:
            image_row_changes(event, shape, full, sql, self.file, out)
        if len(out) >= self.max_buffered_changes:
            if group.spill is None:
                group.spill = SpillFile(self.spill_dir)
                log.info("transaction at %s offset %d passed %d changes: spilling to disk",
                         group.file, group.start, self.max_buffered_changes)
            group.spill.write(out)
            group.changes = []

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
                for part in transaction_parts(done, max_changes):
                    if parts and count + len(part.changes) > max_changes:
                        yield parts, self.position() if boundary_moved else None
                        parts, count, boundary_moved = [], 0, False
                    parts.append(part)
                    count += len(part.changes)
            self.resume.advance(done)
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
                parts = list(transaction_parts(done, 1 << 62))
            yield parts, done.gtid, done.file, done.end

    def note_delivered(self, gtids: list[str], file: str, end: int) -> None:
        """Transactions that were assembled elsewhere (by a decode worker) are delivered:
        move the GTID set past ``gtids`` and the resume point to ``file``/``end``."""
        self.resume.delivered_elsewhere(gtids, file, end)

    def position(self) -> Position:
        """Where to resume after everything delivered so far."""
        return self.resume.position()
