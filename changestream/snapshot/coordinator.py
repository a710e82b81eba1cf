"""Where the snapshot meets the stream: a :class:`SnapshotCoordinator` shared by three threads.

- the snapshot runner tracks a table (noting the keys of every change assembled for it from
  then on), reads a chunk, offers it with the binlog position after the read (the end of
  its window) and waits until it is delivered;
- the listener hands the chunk on in its event stream once it has read to the window's end;
- the Transaction actor drops the chunk's rows whose keys a change noted (that change is as
  new or newer), delivers the rest as ``snapshot`` changes and saves the progress.
The tracked tables' transactions stay off decode workers (docs/snapshots.md)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import field, replace
from typing import Any

from changestream.decoding.ddl import parse_ddl
from changestream.model.changes import (
    Change,
    EncodedRun,
    Position,
    TransactionInfo,
    TransactionPart,
    binlog_order,
)
from changestream.model.record import record
from changestream.snapshot.encodings import SNAPSHOT_OP
from changestream.snapshot.progress import SnapshotProgress
from changestream.snapshot.reader import ReadChunk, TablePlan
from changestream.snapshot.result_set import ChunkRows
from changestream.snapshot.window import ChangedKeys


@record
class WholePiece:
    """Where a piece of a table read whole (no key) stands in the one transaction the
    table is delivered as: the number of its first row, how many rows the table has, and
    whether it is the last piece (only that one completes the transaction and moves the
    snapshot's progress on)."""

    first: int
    rows: int
    last: bool


@record
class ChunkOffer:
    """A chunk read, on its way into the stream."""

    plan: TablePlan | None  # None: the table is gone (the chunk is empty)
    chunk: ReadChunk
    # A table read whole (no key): its rows in transactions that begin before this binlog
    # position are in the chunk, and are left out of the stream.
    read_until: tuple[str, int] | None = None
    rejected: bool = False  # not delivered: a DDL of the table came (read it again)
    # No rows: the snapshot's start, so that the positions saved from then on carry it
    # (a snapshot asked for is taken up again by a router restarted before its first chunk).
    start: bool = False
    piece: WholePiece | None = None  # a piece of a table read whole
    handed: bool = False
    abandoned: bool = False  # the router stopped before the stream took it
    delivered: threading.Event = field(default_factory=threading.Event)


class SnapshotCoordinator:
    """See the module docstring. ``progress`` is the snapshot's, as delivered so far."""

    def __init__(self, progress: SnapshotProgress | None):
        self.progress = progress  # None: no snapshot yet (one may be asked for)
        self.tracked: dict[tuple[str, str], ChangedKeys] = {}
        self.version = 0  # changes whenever the tracked tables do
        # Tables read whole before a restart, kept here (tracked) until the stream is past
        # the binlog order their snapshot was read at: a decode worker would not leave out
        # their rows of the transactions before it.
        self.kept_until: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.offer: ChunkOffer | None = None  # the last one put
        self._offered: deque[ChunkOffer] = deque()  # put and perhaps not yet delivered
        self._waiting: deque[ChunkOffer] = deque()  # put and not yet handed on, in order
        self.waker: Callable[[], None] | None = None  # wakes a listener waiting for events
        self.running = False  # a runner reads the progress's tables
        self._lock = threading.Lock()

    def wake(self) -> None:
        """Have the listener look again (a chunk was offered, or the snapshot ended)."""
        if self.waker is not None:
            self.waker()

    # -- who runs it ---------------------------------------------------------------------

    def begin(self, progress: SnapshotProgress) -> bool:
        """Take up snapshot ``progress`` (asked for while running); ``False`` when one is
        under way (nothing changed)."""
        with self._lock:
            if self.running:
                return False
            self.progress, self.running = progress, True
            return True

    def extend(self, name: str, snapshot_id: str, finished: SnapshotProgress | None = None
               ) -> tuple[SnapshotProgress, bool]:
        """Have table ``name`` (``db.table``) read (again): appended to the snapshot under
        way, also when it is the table being read (its rows delivered so far may be from
        before the change that calls for it), else as a new snapshot ``snapshot_id``
        (after ``finished``, the last one done, when this run took none).
        Returns the progress and whether a runner must start for it."""
        with self._lock:
            p = self.progress
            if p is not None and not p.finished:
                queued = name in p.tables[1:] or (p.tables[0] == name and p.after is None)
                # read whole: a condition asked for it before goes
                where = {t: w for t, w in p.where.items() if t != name}
                self.progress = replace(p, where=where) if queued else \
                    replace(p, tables=(*p.tables, name), where=where)
            else:
                # Chunks keep counting on (they order positions at one binlog offset); the
                # binlog orders of tables read whole stay with the positions.
                p = p or finished
                self.progress = SnapshotProgress(
                    snapshot_id, (name,), chunks=p.chunks if p is not None else 0,
                    read_until=p.read_until if p is not None else ())
            start = not self.running
            self.running = True
            return self.progress, start

    def next_table(self) -> str | None:
        """The table the runner reads next; ``None`` when the snapshot is done (the runner
        ends: a table asked for after that starts another)."""
        with self._lock:
            p = self.progress
            if p is None or p.finished:
                self.running = False
                return None
            return p.tables[0]

    # -- the runner ----------------------------------------------------------------------

    def track(self, database: str, table: str, key: tuple[str, ...]) -> None:
        with self._lock:
            self.tracked = {**self.tracked, (database, table): ChangedKeys(key)}
            self.version += 1

    def untrack(self, database: str, table: str) -> None:
        with self._lock:
            self.tracked = {k: v for k, v in self.tracked.items() if k != (database, table)}
            self.version += 1

    def keep_here_until(self, database: str, table: str, order: tuple[Any, ...]) -> None:
        """Have the stream decode ``database.table`` here until it is past ``order``."""
        self.track(database, table, ())
        with self._lock:
            self.kept_until = {**self.kept_until, (database, table): order}

    def passed(self, order: tuple[Any, ...]) -> None:
        """The stream has delivered everything before ``order``: tables kept here until
        then go back to the decode workers."""
        done = [name for name, until in self.kept_until.items() if until <= order]
        if not done:
            return
        with self._lock:
            self.kept_until = {k: v for k, v in self.kept_until.items() if k not in done}
        for database, table in done:
            self.untrack(database, table)

    def abandon(self) -> None:
        """The router stops: a runner waiting for its offers is let go (not delivered)."""
        with self._lock:
            offers = list(self._offered)
        for offer in offers:
            if not offer.delivered.is_set():
                offer.abandoned = True
                offer.delivered.set()

    def put(self, offer: ChunkOffer) -> None:
        """Offer a chunk to the listener, after those offered before it (the stream takes
        them in the order they were put)."""
        with self._lock:
            while self._offered and self._offered[0].delivered.is_set():
                self._offered.popleft()
            self._offered.append(offer)
            self._waiting.append(offer)
            self.offer = offer
        self.wake()

    # -- the listener --------------------------------------------------------------------

    @property
    def waiting(self) -> bool:
        """Whether a chunk offered is not yet handed on."""
        return bool(self._waiting)

    def due(self, file: str | None, pos: int | None) -> list[ChunkOffer]:
        """The chunks offered, in order, whose windows the stream has read to the end of
        (``file``/``pos``: what it has read to, at a transaction boundary): each once, and
        none after the first whose window it has not (each chunk its own watermark)."""
        if not self._waiting or not file or pos is None:
            return []
        at = binlog_order(file, pos)
        due = []
        with self._lock:
            while self._waiting and binlog_order(*self._waiting[0].chunk.high) <= at:
                offer = self._waiting.popleft()
                offer.handed = True
                due.append(offer)
        return due

    # -- the Transaction actor -----------------------------------------------------------

    def note(self, parts: list[TransactionPart]) -> None:
        """The keys the changes of ``parts`` touch, and their DDL, for the tracked tables."""
        tracked = self.tracked
        for part in parts:
            for change in part.changes:
                if change.op == "ddl":
                    self._note_ddl(change)
                    continue
                window = tracked.get((change.database or "", change.table or ""))
                if window is not None:
                    window.note(change.before, change.after)

    def _note_ddl(self, change: Change) -> None:
        ddl = parse_ddl(change.sql or "", change.session_database)
        if ddl is None:
            return
        at = binlog_order(change.file, change.pos)
        for (database, table), window in self.tracked.items():
            if any((t.database or change.session_database) == database and t.table == table
                   for t in ddl.tables) or (not ddl.tables and ddl.database == database):
                window.last_ddl = at

    def deliver(self, offer: ChunkOffer, stream: Position,
                position_after: Callable[[SnapshotProgress], Position],
                ) -> tuple[list[TransactionPart | EncodedRun], Position | None] | None:
        """The chunk's rows no noted change touched, as ``snapshot`` changes where the
        stream is (``stream``), and the position after them (``position_after`` makes it
        from the progress after the chunk; ``None`` after a piece of a table read whole
        but its last: its transaction goes on); ``None`` when a DDL of the table came
        after the chunk's plan was made (its rows may not have the table's shape here: the
        runner reads it again)."""
        plan, chunk, piece = offer.plan, offer.chunk, offer.piece
        progress = self.progress
        assert progress is not None
        if offer.start:
            return [], position_after(progress)
        if plan is None:
            self.progress = progress.chunk_done(None, 0, True)
            return [], position_after(self.progress)
        if offer.read_until is not None:
            progress = replace(progress, read_until=(
                *progress.read_until, (plan.name, *offer.read_until)))
        position = stream
        window = self.tracked.get((plan.database, plan.table)) if plan.key else None
        if window is not None and window.last_ddl is not None and \
                window.last_ddl >= plan.planned_at:
            return None
        rows: ChunkRows
        if plan.encoding is not None:  # the encoding takes the (key, row) pairs
            rows = window.kept(chunk.rows) if window is not None and window.keys else \
                chunk.rows
        else:
            rows = window.unchanged(chunk.rows) if window is not None else \
                [row for _, row in chunk.rows]
        first, size, ends = (piece.first, piece.rows, piece.last) if piece is not None \
            else (0, len(rows), True)
        info = TransactionInfo(f"snapshot-{progress.id}-{progress.chunks + 1}", None, None,
                               chunk.read_at, size, 0, position.file, position.pos,
                               position.pos)
        after = None
        if ends:
            self.progress = progress.chunk_done(chunk.last_key, first + len(rows), chunk.done)
            after = position_after(self.progress)
        if not rows:
            return [], after
        if plan.encoding is not None:
            return [EncodedRun(plan.encoding.records(plan.database, plan.table, plan.schema,
                                                     rows, info, after, first=first),
                               len(rows), int(ends), chunk.read_at, after, ends,
                               tables={(plan.database, plan.table, SNAPSHOT_OP): len(rows)})
                    ], after
        pk = [n for n in (plan.schema.column_names[i] for i in plan.schema.primary_key or ())
              if n not in plan.excluded]
        changes = []
        last = size - 1
        for seq, row in enumerate(rows, first):
            changes.append(Change(
                SNAPSHOT_OP, plan.database, plan.table, None, row,
                {k: row[k] for k in pk} if pk else None, None, position.file, position.pos,
                seq, seq, seq == last, plan.schema, info))
        return [TransactionPart(info, changes, ends, after)], after
