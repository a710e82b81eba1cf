"""A router's snapshots: the one its start calls for (``snapshot.mode``, or one under way in
the saved position), those asked for while it runs, and their status."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pymysql

from changestream.delivery.adapter import SinkAdapter, capabilities_of
from changestream.model.changes import Position, binlog_order
from changestream.model.errors import ConfigError
from changestream.observe.stats import RouterStats
from changestream.runtime.listener import Listener
from changestream.runtime.settings import RouterSettings
from changestream.schema.catalog import quote
from changestream.snapshot.coordinator import SnapshotCoordinator
from changestream.snapshot.encodings import chunk_encoding
from changestream.snapshot.planning import (
    WITHHELD,
    file_purged,
    keyless_tables,
    new_snapshot,
    snapshot_id,
)
from changestream.snapshot.progress import SnapshotProgress
from changestream.snapshot.reader import ChunkReader
from changestream.snapshot.runner import SnapshotRunner
from changestream.sources.source_url import SourceSpec
from changestream.sources.tls import open_connection
from changestream.transactions.assembler import TransactionAssembler

log = logging.getLogger("changestream")


class SnapshotBusyError(ConfigError):
    """A snapshot was asked for while another one runs."""


def _busy() -> SnapshotBusyError:
    return SnapshotBusyError("snapshot: one is under way; ask again when it is done (see "
                             "/status)")


class RouterSnapshots:
    """The snapshots of one router run (see the module docstring)."""

    def __init__(self, settings: RouterSettings, spec: SourceSpec, sink: SinkAdapter,
                 connect: Callable[[], pymysql.Connection[Any]],
                 table_filter: Callable[[], Callable[[str, str], bool] | None],
                 stats: RouterStats, stopping: threading.Event,
                 fail: Callable[[BaseException], None]):
        self.settings = settings
        self.spec = spec
        self.sink = sink
        self.connect = connect
        self.table_filter = table_filter
        self.stats = stats
        self.stopping = stopping
        self.fail = fail
        self.coordinator: SnapshotCoordinator | None = None
        self.runner: SnapshotRunner | None = None
        self.listener: Listener | None = None
        self._finished: dict[str, Any] | None = None  # a finished one's progress
        self._assembler: TransactionAssembler | None = None
        self._runner_lock = threading.Lock()  # a runner started once the listener is there
        self._start_when_attached = False

    @property
    def mode(self) -> str:
        return self.settings.snapshot.resolved(self.spec.kind == "server",
                                               bool(self.settings.start))

    def plan(self, resume: Position | None) -> tuple[SnapshotProgress | None,
                                                     Position | None]:
        """The snapshot to run (one under way in the position, or a new one the mode asks
        for) and where to resume (``None`` after a purged position with ``when-needed``:
        the new snapshot's stream starts at the head)."""
        mode = self.mode
        done_chunks = 0
        if resume is not None and resume.snapshot:
            progress = SnapshotProgress.from_dict(resume.snapshot)
            if not progress.finished:
                # Whatever the mode: it says which snapshots start, and this one (asked
                # for, or started by an earlier mode) is under way.
                if self.spec.kind == "server":
                    return progress, resume
                log.warning("binlog files: the snapshot under way in the saved position "
                            "(of a server) is left unfinished")
            self._finished = resume.snapshot
            done_chunks = progress.chunks
        if mode == "never":
            return None, resume
        if resume is not None:
            if mode == "when-needed" and resume.file and file_purged(self.connect,
                                                                     resume.file):
                log.warning("the saved position %s is no longer on the server (purged): "
                            "snapshot.mode when-needed takes a new snapshot", resume)
                resume = None
            else:
                return None, resume
        progress = replace(new_snapshot(self.connect, self.table_filter(),
                                        self.settings.snapshot.tables), chunks=done_chunks)
        log.info("snapshot %s: %d tables, about %d rows", progress.id, len(progress.tables),
                 progress.total_rows)
        return progress, resume

    def prepare(self, progress: SnapshotProgress | None,
                assembler: TransactionAssembler) -> SnapshotCoordinator | None:
        """The coordinator the stream meets the snapshot through (``None`` for files), with
        ``assembler`` set up for it (and for refills: see :meth:`refill`)."""
        self._assembler = assembler
        assembler.on_refill = self.refill
        if progress is not None:
            self.coordinator = SnapshotCoordinator(progress)
            assembler.resume.snapshot = progress.as_dict()
            # Tables without a key are read whole: until then their changes are withheld
            # (decoded here, not by workers), as the snapshot will hold them.
            for database, table in keyless_tables(self.connect, progress.tables):
                self.coordinator.track(database, table, ())
                assembler.read_until[(database, table)] = WITHHELD
        else:  # a finished snapshot's count of chunks stays in the positions (their order)
            assembler.resume.snapshot = self._finished
            if self.spec.kind == "server":  # idle, for snapshots asked for while running
                self.coordinator = SnapshotCoordinator(None)
        # Tables read whole: their rows of transactions before the read are in the snapshot.
        saved = progress or (SnapshotProgress.from_dict(self._finished)
                             if self._finished else None)
        for name, file, pos in saved.read_until if saved is not None else ():
            database, _, table = name.partition(".")
            assembler.read_until[(database, table)] = binlog_order(file, pos)
            if self.coordinator is not None:
                self.coordinator.keep_here_until(database, table, binlog_order(file, pos))
        return self.coordinator

    def attach(self, listener: Listener, start: bool) -> None:
        """The stream's listener, running; ``start``: the snapshot planned starts now."""
        if self.coordinator is not None:
            self.coordinator.waker = listener.wake
            if start:
                self.coordinator.running = True
        with self._runner_lock:
            self.listener = listener
            if start or self._start_when_attached:
                self._start_runner()

    def _start_runner(self) -> None:
        """Start a runner for the coordinator's progress (which the caller claimed)."""
        assert self.coordinator is not None and self.listener is not None
        self.runner = SnapshotRunner(
            self._chunk_reader, self.coordinator,
            self._stream_position,
            self.stopping, self.fail, self.listener.hold, self.listener.release,
            readers=self.settings.snapshot.readers)
        self.runner.start()

    def _stream_position(self) -> tuple[str, int] | None:
        """Where the stream has read to (``None``: nowhere yet)."""
        reading = self.stats.reading
        file = reading.read_file
        return (file, reading.read_pos) if file else None

    def request(self, tables: list[str], where: str | None = None, *, start: bool = True
                ) -> dict[str, Any]:
        """A snapshot of the tables matching ``tables`` (``db.table`` patterns, in the
        filter's scope), only their rows ``where`` (an SQL condition) holds for when given,
        while the router runs; progress shows in :meth:`status`. Tables without a key are
        snapshotted only at the start (``snapshot.mode``). With ``start`` false its runner
        waits for :meth:`start_requested` (tables added while running: read once the stream
        delivers them). Raises :class:`ConfigError` for a request it cannot take
        (:class:`SnapshotBusyError` while one runs)."""
        coordinator = self.coordinator
        if coordinator is None or self.listener is None or self.stopping.is_set():
            raise ConfigError("snapshot: the router is not running from a server")
        if coordinator.running:
            raise _busy()
        if not tables:
            raise ConfigError("snapshot: name the tables (db.table patterns)")
        progress = new_snapshot(self.connect, self.table_filter(), tuple(tables))
        if not progress.tables:
            raise ConfigError(f"snapshot: no table in scope matches {', '.join(tables)}")
        if where:
            self._check_where(progress.tables, where)
            progress = replace(progress, where={t: where for t in progress.tables})
        keyless = keyless_tables(self.connect, progress.tables)
        if keyless:
            names = ", ".join(f"{d}.{t}" for d, t in sorted(keyless))
            raise ConfigError(f"snapshot: {names} ha{'s' if len(keyless) == 1 else 've'} no "
                              "primary key or NOT NULL unique key; such tables are "
                              "snapshotted only when the router starts (snapshot.mode)")
        done = coordinator.progress.chunks if coordinator.progress is not None else int(
            (self._finished or {}).get("chunks") or 0)
        if not coordinator.begin(replace(progress, chunks=done)):
            raise _busy()
        log.info("snapshot %s asked for: %s%s", progress.id, ", ".join(progress.tables),
                 f" where {where}" if where else "")
        if start:
            self.start_requested()
        return {"snapshot": progress.id, "tables": list(progress.tables),
                "rows_estimated": progress.total_rows, "where": where}

    def start_requested(self) -> None:
        """Start reading the snapshot :meth:`request` took up."""
        with self._runner_lock:
            self._start_runner()

    def _check_where(self, tables: tuple[str, ...], where: str) -> None:
        """Raise :class:`ConfigError` with the server's words when ``where`` is no condition
        on each of ``tables``."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                for name in tables:
                    database, _, table = name.partition(".")
                    try:
                        cur.execute(f"SELECT 1 FROM {quote(database)}.{quote(table)} "
                                    f"WHERE ({where}) LIMIT 0")
                    except pymysql.MySQLError as exc:
                        raise ConfigError(f"snapshot: where {where!r} on {name}: "
                                          f"{exc.args[-1]}") from None
        finally:
            conn.close()

    def refill(self, database: str, table: str, reason: str, where: str) -> None:
        """The DDL at ``where`` gave the rows of ``database.table`` values no row event
        carries (``reason``): read the table again, in the snapshot under way or a new one,
        unless ``snapshot.refill`` is off or it cannot be read while running. Called by the
        assembler (the Transaction actor's thread) before the DDL's transaction is done, so
        that its position, and every one after, carries the table to read: a restart goes
        on with it."""
        name = f"{database}.{table}"
        why = self._no_refill(database, table)
        if why is not None:
            log.warning("the DDL at %s gave the rows %s held values no row event carries "
                        "(%s); %s: sinks keep the values they had (NULL in a new column)",
                        where, name, reason, why)
            self.stats.refill.refills_skipped += 1
            return
        coordinator, assembler = self.coordinator, self._assembler
        assert coordinator is not None and assembler is not None
        finished = SnapshotProgress.from_dict(self._finished) if self._finished else None
        progress, start = coordinator.extend(name, snapshot_id(), finished)
        assembler.resume.snapshot = progress.as_dict()
        log.warning("the DDL at %s gave the rows %s held values no row event carries (%s): "
                    "reading the table again (snapshot %s)", where, name, reason, progress.id)
        self.stats.refill.refills += 1
        if start:
            with self._runner_lock:
                if self.listener is None:
                    self._start_when_attached = True
                else:
                    self._start_runner()

    def _no_refill(self, database: str, table: str) -> str | None:
        """Why table ``database.table`` is not read again after a DDL (``None``: it is)."""
        if not self.settings.snapshot.refill:
            return "snapshot.refill is off"
        if self.coordinator is None or self.spec.kind != "server":
            return "binlog files hold no table to read again"
        if keyless_tables(self.connect, (f"{database}.{table}",)):
            return ("it has no primary key or NOT NULL unique key, and such a table is read "
                    "again only by a snapshot when the router starts")
        return None

    def _chunk_reader(self) -> ChunkReader:
        connection = self.spec.connection
        change_filter = self.settings.filter
        return ChunkReader(
            lambda **extra: open_connection(connect_timeout=10, **{**connection, **extra}),
            self.settings.snapshot.chunk_rows,
            # Records written here straight from the server's text for sinks that take
            # them encoded (JSON lines, the Spark sink's Arrow frames).
            encoding=chunk_encoding(capabilities_of(self.sink).encoded_format),
            excluded=None if change_filter.everything else change_filter.excluded_columns)

    def done(self) -> bool:
        """Whether the snapshot that ran is done and its last chunk delivered."""
        runner, coordinator = self.runner, self.coordinator
        if runner is None or coordinator is None or not runner.finished.is_set():
            return False
        offer = coordinator.offer
        return offer is None or offer.delivered.is_set()

    def status(self) -> dict[str, Any] | None:
        """The snapshot's progress (``None``: none ran): tables done and to do, chunks and
        rows delivered, the server's estimate of all rows."""
        coordinator = self.coordinator
        if coordinator is None or coordinator.progress is None:
            return None
        p = coordinator.progress
        return {"id": p.id, "finished": p.finished, "tables_done": len(p.done_tables),
                "tables_total": len(p.done_tables) + len(p.tables),
                "current_table": p.tables[0] if p.tables else None, "chunks": p.chunks,
                "rows": p.rows, "rows_estimated": p.total_rows}

    def stop(self) -> None:
        if self.runner is not None:
            self.stopping.set()
            if self.coordinator is not None:
                self.coordinator.abandon()
            self.runner.join(30)
