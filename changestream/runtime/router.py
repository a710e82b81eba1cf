"""The Router: wires a source, the actors and a sink adapter together, and runs them.

This is the one place where the core meets ``actors/`` (see ARCHITECTURE.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pykka
import pymysql
from prometheus_client import CollectorRegistry

from changestream.actors.messages import Tick
from changestream.actors.sink import BatchSettings, SinkActor
from changestream.actors.transaction import TransactionActor
from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import (
    Event,
    GtidEvent,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    PreviousGtidsEvent,
)
from changestream.delivery.adapter import SinkAdapter
from changestream.delivery.flow import Credits
from changestream.delivery.plugins import make_sink
from changestream.delivery.position_store import PositionStore
from changestream.model.changes import Position
from changestream.model.errors import ConfigError, SourceError
from changestream.model.gtid import (
    GtidProgress,
    MariadbGtidState,
    MysqlGtidSet,
    is_mariadb_gtid,
    parse_gtid_progress,
)
from changestream.parallel.decode_workers import DecodeWorkers, WorkerSettings
from changestream.runtime.config import Config
from changestream.runtime.listener import Listener, Source
from changestream.runtime.preflight import Finding, run_preflight
from changestream.runtime.stats import RouterStats
from changestream.schema.column_info import ColumnInfo, information_schema_lookup
from changestream.schema.file_opener import FileHistoryOpener
from changestream.schema.opener import HistoryOpener
from changestream.schema.startup import HistorySettings
from changestream.snapshot.coordinator import SnapshotCoordinator
from changestream.snapshot.planning import (
    WITHHELD,
    SnapshotSettings,
    file_purged,
    keyless_tables,
    new_snapshot,
)
from changestream.snapshot.progress import SnapshotProgress
from changestream.snapshot.reader import ChunkReader
from changestream.snapshot.runner import SnapshotRunner
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource, StartPosition
from changestream.sources.raw import RawEvent
from changestream.sources.source_url import SourceSpec, parse_source_url
from changestream.sources.tls import tls_context
from changestream.transactions.assembler import TransactionAssembler
from changestream.transactions.filters import ChangeFilter

log = logging.getLogger("changestream")


class SnapshotBusyError(ConfigError):
    """A snapshot was asked for while another one runs."""


@dataclass(slots=True)
class RouterSettings:
    """Everything the router needs besides its sink adapter (see config/ for each key)."""

    source: str
    start: str = ""  # "": unset (the head after a snapshot, else "earliest")
    until: str | None = None
    position_file: str | None = None
    position_override: str | None = None
    password: str | None = None
    server_id: int = 0x3EADBEEF
    heartbeat_seconds: float = 5.0
    reconnect_seconds: float = 300.0
    batch: BatchSettings = field(default_factory=BatchSettings)
    filter: ChangeFilter = field(default_factory=ChangeFilter)
    max_buffered_changes: int = 20_000
    spill_dir: str | None = None
    include_sql: bool = False
    decode_workers: int = -1
    batch_events: int = 2_000
    message_changes: int = 5_000
    in_flight: int = 4
    schema_from_server: bool = True
    schema: HistorySettings = field(default_factory=HistorySettings)
    verify_checksums: bool = True
    tls: ssl.SSLContext | None = None
    snapshot: SnapshotSettings = field(default_factory=SnapshotSettings)

    @classmethod
    def from_config(cls, config: Config) -> RouterSettings:
        """The router's settings from a loaded :class:`~changestream.runtime.config.Config`."""
        s, b = config.source, config.batch
        return cls(
            source=s.url, start=config.start.at, until=config.start.until or None,
            position_file=config.start.position_file or None,
            position_override=config.start.position_override or None,
            password=config.password(), server_id=s.server_id,
            heartbeat_seconds=s.heartbeat_seconds, reconnect_seconds=s.reconnect_seconds,
            batch=BatchSettings(max_changes=b.max_changes or None, max_bytes=b.max_bytes,
                                max_seconds=b.max_seconds, retries=b.retries,
                                retry_backoff=b.retry_backoff_seconds),
            filter=ChangeFilter(config.filter.include, config.filter.exclude,
                                config.filter.exclude_columns),
            max_buffered_changes=config.transactions.max_buffered_changes,
            spill_dir=config.transactions.spill_dir or None,
            include_sql=config.transactions.include_sql,
            decode_workers=s.decode_workers,
            schema_from_server=s.schema_from_server,
            schema=HistorySettings(config.schema.history,
                                   config.schema.shadow_server or None,
                                   skip=tuple(config.schema.skip)),
            verify_checksums=s.verify_checksums,
            tls=tls_context(s.tls),
            snapshot=SnapshotSettings(config.snapshot.mode or None, config.snapshot.chunk_rows,
                                      tuple(config.snapshot.tables)))

    def __post_init__(self) -> None:
        if self.until not in (None, "caught-up"):
            raise ConfigError(f"until: {self.until!r} is not 'caught-up'")
        try:
            StartPosition.parse(self.start or "earliest")
        except ValueError as exc:
            raise ConfigError(f"start: {exc}") from None


def _sink_options(config: Config) -> dict[str, Any]:
    """Keyword arguments for the configured sink's factory."""
    options = dict(config.sink.options)
    if config.sink.spec.split(":")[0] in ("jsonl", "stdout"):
        options.setdefault("format", config.sink.format)
    return options


def _later(a: Position | None, b: Position | None) -> Position | None:
    """The later of two positions of the same binlog (by file sequence number, offset)."""
    if a is None or b is None:
        return a or b
    return a if a.order >= b.order else b


class _Stream:
    """A source as the listener reads it: events, then ``None`` whenever it is idle."""

    def __init__(self, source: FileSource | LiveSource, decoder: EventDecoder):
        self.source = source
        self.decoder = decoder

    def stream(self) -> Iterator[Event | None]:
        return self.source.stream()

    def raw_stream(self) -> Iterator[RawEvent | None]:
        return self.source.raw_events(idle=True)

    def stop(self) -> None:
        self.source.stop()


class Router:
    """Runs the change stream from the configured source into ``sink``.

    ``config`` is a :class:`~changestream.runtime.config.Config` (from ``load_config``) or
    :class:`RouterSettings`; ``sink`` defaults to the one the configuration names.
    ``run()`` blocks until the source ends (``until="caught-up"``), ``stop()`` is called,
    or something fails (then it raises the error). ``start()`` runs it in a thread.
    """

    def __init__(self, config: Config | RouterSettings, sink: SinkAdapter | None = None):
        if isinstance(config, Config):
            settings = RouterSettings.from_config(config)
            if sink is None:
                sink = make_sink(config.sink.spec, **_sink_options(config))
        else:
            settings = config
        if sink is None:
            raise ConfigError("no sink: pass sink=... or a Config that names one")
        self.settings = settings
        self.sink = sink
        self.spec: SourceSpec = parse_source_url(settings.source, password=settings.password)
        if settings.tls is not None and self.spec.kind == "server":
            self.spec.connection["ssl"] = settings.tls
        self.store = PositionStore(settings.position_file) if settings.position_file else None
        self.stats = RouterStats()
        self.stats.metrics.expose_status(self.status)
        self._stopping = threading.Event()
        self._aborted = threading.Event()
        self._finished = threading.Event()
        self._error: BaseException | None = None
        self._listener: Listener | None = None
        self._thread: threading.Thread | None = None
        self._actors: list[pykka.ActorRef[Any]] = []
        self._credits: list[Credits] = []
        self._workers: DecodeWorkers | None = None
        self._history: HistoryOpener | FileHistoryOpener | None = None
        self._saved: Position | None = None  # what the position file held at the start
        self._sink_position: Position | None = None  # what the sink's open() returned
        self._snapshot: SnapshotCoordinator | None = None
        self._finished_snapshot: dict[str, Any] | None = None
        self._snapshot_runner: SnapshotRunner | None = None

    # -- control ---------------------------------------------------------------------------

    def start(self) -> None:
        """Run in a background thread; errors surface from :meth:`wait` or :meth:`stop`."""
        self._thread = threading.Thread(target=self._run_captured, name="changestream-router",
                                        daemon=True)
        self._thread.start()

    def _run_captured(self) -> None:
        try:
            self.run()
        except BaseException as exc:
            self._error = self._error or exc

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a started router to end; raise its error, if any. True when it ended."""
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        if self._error is not None:
            raise self._error
        return True

    def stop(self) -> None:
        """Stop reading at the next transaction boundary, deliver what is in flight, save the
        position, and end."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.stop()

    def pause(self) -> None:
        if self._listener is not None:
            self._listener.pause()

    def resume(self) -> None:
        if self._listener is not None:
            self._listener.resume()

    @property
    def paused(self) -> bool:
        return self._listener is not None and self._listener.paused

    def preflight(self) -> list[Finding]:
        """Check the server's settings for change data capture (nothing to check for files);
        raise :class:`~changestream.runtime.preflight.PreflightError` saying what to change."""
        if self.spec.kind != "server":
            return []
        conn = self._connect()
        try:
            return run_preflight(conn, schema_from_server=self.settings.schema_from_server,
                                 history=self.settings.schema.mode,
                                 shadow_server=self.settings.schema.shadow_server)
        finally:
            conn.close()

    def status(self) -> dict[str, Any]:
        """Where the router is: connection, positions, lag, counts and queue depths."""
        st = self.stats
        with st.lock:
            delivered = st.delivered
            return {
                "source": self.spec.describe(),
                "connected": st.connected,
                "paused": self.paused,
                "source_position": {"file": st.read_file, "pos": st.read_pos}
                if st.read_file else None,
                "delivered_position": delivered.as_dict() if delivered else None,
                "seconds_behind": st.seconds_behind(),
                "transactions_delivered": st.transactions_delivered,
                "changes_delivered": st.changes_delivered,
                "batches_delivered": st.batches_delivered,
                "batch_retries": st.batch_retries,
                "reconnects": st.reconnects,
                "events_read": st.events_read,
                "worker_segments": st.worker_segments,
                "queue_depths": self.queue_depths(),
                "uptime_seconds": round(time.time() - st.started, 3),
                "schema_history": self._history_status(),
                "snapshot": self._snapshot_status(),
            }

    def _snapshot_status(self) -> dict[str, Any] | None:
        """The snapshot's progress (``None``: none ran): tables done and to do, chunks and
        rows delivered, the server's estimate of all rows."""
        coordinator = self._snapshot
        if coordinator is None or coordinator.progress is None:
            return None
        p = coordinator.progress
        return {"id": p.id, "finished": p.finished, "tables_done": len(p.done_tables),
                "tables_total": len(p.done_tables) + len(p.tables),
                "current_table": p.tables[0] if p.tables else None, "chunks": p.chunks,
                "rows": p.rows, "rows_estimated": p.total_rows}

    def _history_status(self) -> dict[str, Any] | None:
        tracker = self._history.tracker if self._history is not None else None
        if tracker is None:
            return None
        history = tracker.history
        return {"origin": history.origin, "tables": len(history.current.tables),
                "ddl_applied": history.ddl_applied, "ddl_not_delivered": history.pending}

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """This router's Prometheus metrics (a registry of its own, not the global one), as
        ``GET /metrics`` serves them: ``prometheus_client.generate_latest(registry)``."""
        return self.stats.metrics.registry

    def queue_depths(self) -> dict[str, int]:
        names = ("listener_to_transaction", "transaction_to_sink")
        return {n: c.in_flight for n, c in zip(names, self._credits)}

    # -- running ---------------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._aborted.set()
        self._stopping.set()
        if self._listener is not None:
            self._listener.stop()

    def run(self) -> None:
        """Run until the end (see the class docstring); raise what made it fail."""
        sink_position = self.sink.open()
        try:
            saved = self.store.load() if self.store else None
            self._saved = saved
            self._sink_position = sink_position
            override = self._override()
            resume = override or _later(saved, sink_position)
            if resume is not None:
                log.info("resuming at %s", resume)
            self._run(resume)
        finally:
            self._shutdown()
            try:
                self.sink.close()
            except Exception as exc:
                log.warning("closing the sink failed: %s", exc)
        if self._error is not None:
            raise self._error

    def _override(self) -> Position | None:
        text = self.settings.position_override
        if not text:
            return None
        if text.startswith("gtid:"):
            gtids = text[5:]
            return Position("", 4, gtids, "mariadb" if is_mariadb_gtid(gtids) else "mysql")
        try:
            start = StartPosition.parse(text)
        except ValueError as exc:
            raise ConfigError(f"position override: {exc}") from None
        if start.kind != "file" or start.file is None:
            raise ConfigError("position override: give FILE:POS or gtid:SET")
        return Position(start.file, start.pos)

    def _run(self, resume: Position | None) -> None:
        s = self.settings
        progress, resume = self._snapshot_plan(resume)
        if progress is None and self._snapshot_mode == "initial-only":
            log.info("snapshot.mode initial-only: the snapshot is done; nothing to read")
            return
        gtid_base, start = self._start_point(resume)
        where = f"{start.file}:{start.pos}" if start.kind == "file" else (
            f"gtid {start.gtid}" if start.kind == "gtid" else start.kind)
        log.info("reading %s from %s into %s", self.spec.describe(), where,
                 type(self.sink).__name__)
        credits_in = Credits(s.in_flight, self._aborted)
        credits_out = Credits(s.in_flight, self._aborted)
        self._credits = [credits_in, credits_out]
        column_info = self._column_info(resume, start)
        assembler = TransactionAssembler(
            gtid_set=gtid_base, change_filter=s.filter,
            max_buffered_changes=s.max_buffered_changes, spill_dir=s.spill_dir,
            is_transactional=self._engine_lookup(), include_sql=s.include_sql)
        if start.kind == "file" and start.file:
            assembler.start_boundary = (start.file, start.pos)
        elif resume is not None and resume.file:  # resumed by GTID: it was there
            assembler.start_boundary = (resume.file, resume.pos)
        if progress is not None:
            self._snapshot = SnapshotCoordinator(progress)
            assembler.snapshot = progress.as_dict()
            # Tables without a key are read whole: until then their changes are withheld
            # (decoded here, not by workers), as the snapshot will hold them.
            for database, table in keyless_tables(self._connect, progress.tables):
                self._snapshot.track(database, table, ())
                assembler.read_until[(database, table)] = WITHHELD
        else:  # a finished snapshot's count of chunks stays in the positions (their order)
            assembler.snapshot = self._finished_snapshot
            if self.spec.kind == "server":  # idle, for snapshots asked for while running
                self._snapshot = SnapshotCoordinator(None)
        batch = s.batch.for_sink(self.sink)
        assert batch.max_changes is not None
        sink_ref = SinkActor.start(self.sink, self.store, batch, credits_out, self.stats,
                                   self._fail, self._finished,
                                   (self.store.last_batch_id + 1) if self.store else 1,
                                   self._history)
        # Messages no bigger than a batch, so batches are cut close to their size limit.
        message_changes = max(1, min(s.message_changes, batch.max_changes))
        self._workers = self._decode_workers()
        transaction_ref = TransactionActor.start(assembler, sink_ref, credits_in, credits_out,
                                                 self._fail, message_changes, self._workers,
                                                 self._snapshot)
        self._actors = [transaction_ref, sink_ref]
        live = self.spec.kind == "server"

        snapshot = self._snapshot
        # Under a snapshot the stream follows the server until the snapshot is done, also
        # with ``until`` (and ``initial-only`` ends there).
        follow = None if progress is None else (
            True if s.until is not None or self._snapshot_mode == "initial-only" else None)
        done_when_idle = None
        if progress is not None and follow:
            done_when_idle = self._snapshot_done

        def open_source(at: tuple[str, int] | None, decoder: EventDecoder) -> Source:
            begin = StartPosition("file", file=at[0], pos=at[1]) if at else start
            return _Stream(self._source(begin, decoder, follow=follow), decoder)

        self._listener = Listener(open_source, column_info, transaction_ref, credits_in,
                                  self.stats, self._stopping, self._fail,
                                  batch_events=s.batch_events,
                                  reconnect_seconds=s.reconnect_seconds, live=live,
                                  workers=self._workers, table_filter=self._table_filter(),
                                  snapshot=snapshot, done_when_idle=done_when_idle)
        self._listener.start_known = assembler.start_boundary is not None
        if resume is not None and resume.pending_xa:
            self._reload_prepared_xa(resume, assembler, column_info)
        self._listener.start()
        if snapshot is not None:
            snapshot.waker = self._listener.wake
        if progress is not None:
            self._start_snapshot_runner()
        ticker = threading.Thread(target=self._tick, args=(sink_ref,), daemon=True,
                                  name="changestream-ticker")
        ticker.start()
        while not (self._finished.wait(0.2) or self._aborted.is_set()):
            pass
        if self._aborted.is_set():
            self._listener.stop()
        self._listener.join(10)
        st = self.stats
        log.info("stopped: %d transactions, %d changes delivered in %d batches; position %s",
                 st.transactions_delivered, st.changes_delivered, st.batches_delivered,
                 st.delivered or "unchanged")

    def _tick(self, sink_ref: pykka.ActorRef[Any]) -> None:
        interval = max(0.02, min(self.settings.batch.max_seconds / 2, 0.25))
        while not (self._finished.is_set() or self._aborted.is_set()):
            try:
                sink_ref.tell(Tick())
            except pykka.ActorDeadError:
                return
            self._finished.wait(interval)

    def _shutdown(self) -> None:
        if self._snapshot_runner is not None:
            self._stopping.set()
            self._snapshot_runner.join(30)
        if self._listener is not None:
            self._listener.stop()
        for ref in self._actors:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                ref.stop(timeout=30)
        self._actors = []
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        if self._history is not None:
            self._history.close()

    # -- snapshots ---------------------------------------------------------------------

    @property
    def _snapshot_mode(self) -> str:
        return self.settings.snapshot.resolved(self.spec.kind == "server",
                                               bool(self.settings.start))

    def _snapshot_plan(self, resume: Position | None) -> tuple[SnapshotProgress | None,
                                                              Position | None]:
        """The snapshot to run (one under way in the position, or a new one the mode asks
        for) and where to resume (``None`` after a purged position with ``when-needed``:
        the new snapshot's stream starts at the head)."""
        mode = self._snapshot_mode
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
            self._finished_snapshot = resume.snapshot
            done_chunks = progress.chunks
        if mode == "never":
            return None, resume
        if resume is not None:
            if mode == "when-needed" and resume.file and file_purged(self._connect,
                                                                     resume.file):
                log.warning("the saved position %s is no longer on the server (purged): "
                            "snapshot.mode when-needed takes a new snapshot", resume)
                resume = None
            else:
                return None, resume
        progress = replace(new_snapshot(self._connect, self._table_filter(),
                                        self.settings.snapshot.tables), chunks=done_chunks)
        log.info("snapshot %s: %d tables, about %d rows", progress.id, len(progress.tables),
                 progress.total_rows)
        return progress, resume

    def _start_snapshot_runner(self) -> None:
        assert self._snapshot is not None and self._listener is not None
        self._snapshot_runner = SnapshotRunner(
            self._chunk_reader, self._snapshot,
            lambda: (self.stats.read_file, self.stats.read_pos),
            self._stopping, self._fail, self._listener.hold, self._listener.release)
        self._snapshot_runner.start()

    def request_snapshot(self, tables: list[str]) -> dict[str, Any]:
        """Snapshot the tables matching ``tables`` (``db.table`` patterns, in the filter's
        scope) while the router runs, e.g. after adding them to the include list or to
        repair their mirrors; progress shows in :meth:`status`. Tables without a key are
        snapshotted only at the start (``snapshot.mode``). Raises :class:`ConfigError`
        for a request it cannot take (another snapshot running, no such table)."""
        coordinator, listener = self._snapshot, self._listener
        if coordinator is None or listener is None or self._stopping.is_set():
            raise ConfigError("snapshot: the router is not running from a server")
        runner = self._snapshot_runner
        if runner is not None and not runner.finished.is_set():
            raise SnapshotBusyError("snapshot: one is under way; ask again when it is done "
                                    "(see /status)")
        if not tables:
            raise ConfigError("snapshot: name the tables (db.table patterns)")
        progress = new_snapshot(self._connect, self._table_filter(), tuple(tables))
        if not progress.tables:
            raise ConfigError(f"snapshot: no table in scope matches {', '.join(tables)}")
        keyless = keyless_tables(self._connect, progress.tables)
        if keyless:
            names = ", ".join(f"{d}.{t}" for d, t in sorted(keyless))
            raise ConfigError(f"snapshot: {names} ha{'s' if len(keyless) == 1 else 've'} no "
                              "primary key or NOT NULL unique key; such tables are "
                              "snapshotted only when the router starts (snapshot.mode)")
        done = coordinator.progress.chunks if coordinator.progress is not None else int(
            (self._finished_snapshot or {}).get("chunks") or 0)
        coordinator.progress = replace(progress, chunks=done)
        log.info("snapshot %s asked for: %s", progress.id, ", ".join(progress.tables))
        self._start_snapshot_runner()
        return {"snapshot": progress.id, "tables": list(progress.tables),
                "rows_estimated": progress.total_rows}

    def _chunk_reader(self) -> ChunkReader:
        connection = self.spec.connection
        change_filter = self.settings.filter
        return ChunkReader(
            lambda **extra: pymysql.connect(connect_timeout=10, **{**connection, **extra}),
            self.settings.snapshot.chunk_rows,
            # Records written here straight from the server's text for sinks that take
            # them encoded in changestream's format (JSON lines).
            encoded=getattr(self.sink, "encoded_format", None) == "changestream",
            excluded=None if change_filter.everything else change_filter.excluded_columns)

    def _snapshot_done(self) -> bool:
        runner, coordinator = self._snapshot_runner, self._snapshot
        if runner is None or coordinator is None or not runner.finished.is_set():
            return False
        offer = coordinator.offer
        return offer is None or offer.delivered.is_set()

    def _decode_workers(self) -> DecodeWorkers | None:
        """Worker processes for plain DML transactions, when the sink takes encoded records
        (``decode_workers``: how many; -1: one per CPU, none on a single CPU)."""
        s = self.settings
        record_format = getattr(self.sink, "encoded_format", None)
        cpus = os.cpu_count() or 1
        count = s.decode_workers if s.decode_workers >= 0 else (cpus if cpus > 1 else 0)
        if not record_format or count == 0:
            return None
        log.info("decoding plain DML transactions in %d worker processes", count)
        return DecodeWorkers(count, WorkerSettings(
            None if s.filter.everything else s.filter, s.include_sql, record_format,
            s.verify_checksums, s.max_buffered_changes, s.spill_dir))

    # -- sources ---------------------------------------------------------------------------

    def _start_point(self, resume: Position | None) -> tuple[GtidProgress | None,
                                                              StartPosition]:
        """The GTID set/state before the first event and where the source starts."""
        if resume is not None:
            gtid = (parse_gtid_progress(resume.gtid_set, resume.flavor == "mariadb")
                    if resume.gtid_set is not None else None)
            # A server resumes by GTID where it can (MySQL's sets survive failover; an
            # override may give only a GTID), otherwise by file and offset.
            by_gtid = resume.gtid_set is not None and (not resume.file or (
                bool(resume.gtid_set) and resume.flavor == "mysql"))
            if self.spec.kind == "server" and by_gtid:
                return gtid, StartPosition("gtid", gtid=resume.gtid_set)
            return gtid, StartPosition("file", file=resume.file, pos=resume.pos)
        start = StartPosition.parse(self.settings.start or (
            "latest" if self._snapshot_mode != "never" else "earliest"))
        if start.kind == "file" and self.spec.kind == "server":
            assert start.file is not None
            return self._gtids_before(start.file, start.pos), start
        if start.kind == "gtid":
            assert start.gtid is not None
            return parse_gtid_progress(start.gtid), start
        if start.kind == "latest" and self.spec.kind == "server":
            return self._latest()
        if start.kind == "latest":
            raise ConfigError("start: 'latest' needs a server source (for files give FILE:POS)")
        return None, start

    def _latest(self) -> tuple[GtidProgress | None, StartPosition]:
        """The server's current binlog position and GTID set/state, read together."""
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
                try:
                    cur.execute("SHOW BINARY LOG STATUS")
                except pymysql.err.MySQLError:
                    cur.execute("SHOW MASTER STATUS")
                row = cur.fetchone()
                if row is None:
                    raise SourceError("the server reports no binlog position: is log_bin on?")
                file, pos = str(row[0]), int(row[1])
                if mariadb:
                    cur.execute("SELECT @@global.gtid_binlog_pos")
                    gtids = str(cur.fetchone()[0] or "")
                else:
                    gtids = str(row[4] if len(row) > 4 and row[4] else "")
        finally:
            conn.close()
        start = StartPosition("file", file=file, pos=pos)
        if not mariadb and gtids:
            # MySQL adds a GTID to Executed_Gtid_Set only after the transaction is in the
            # binlog: under load the set read with a position can miss one before it, and a
            # restart by GTID would read that transaction again. The set at the position,
            # from the binlog itself, has no such hole.
            return self._gtids_before(file, pos), start
        return parse_gtid_progress(gtids, mariadb), start

    def _gtids_before(self, file: str, pos: int) -> GtidProgress | None:
        """The GTID set/state at ``file:pos``: the file's PREVIOUS_GTIDS (MySQL) or
        GTID_LIST (MariaDB) plus every GTID between its start and ``pos``. Only the GTID
        events are decoded. ``None`` when the server logs no GTIDs."""
        wanted = {et.FORMAT_DESCRIPTION, et.PREVIOUS_GTIDS, et.MARIADB_GTID_LIST, et.GTID,
                  et.GTID_TAGGED, et.MARIADB_GTID}
        source = LiveSource(self.spec.connection, StartPosition("file", file=file, pos=4),
                            server_id=self.settings.server_id, blocking=False)
        progress: GtidProgress | None = None
        try:
            for raw in source.raw_events():
                assert raw is not None and source.decoder is not None
                if raw.offset >= pos and raw.data[4] != et.ROTATE:
                    break
                if raw.data[4] not in wanted:
                    continue
                event = source.decoder.decode(raw.data, raw.file, raw.offset)
                if isinstance(event, PreviousGtidsEvent):
                    progress = MysqlGtidSet(event.gtid_set)
                elif isinstance(event, MariadbGtidListEvent):
                    progress = MariadbGtidState(event.gtid_state)
                elif isinstance(event, GtidEvent | MariadbGtidEvent) and progress is not None \
                        and event.gtid is not None:
                    progress.add(event.gtid)
        finally:
            source.stop()
        return progress

    def _connect(self) -> pymysql.Connection[Any]:
        c = self.spec.connection
        try:
            return pymysql.connect(connect_timeout=10, **c)
        except pymysql.err.MySQLError as exc:
            raise SourceError(f"cannot connect to {c.get('host')}:{c.get('port')}: "
                              f"{exc.args[-1] if exc.args else exc}") from None

    def _source(self, start: StartPosition, decoder: EventDecoder, *,
                follow: bool | None = None) -> FileSource | LiveSource:
        """A source from ``start``; ``follow`` (default: unless ``until`` is set) waits for
        new events at the end instead of ending there."""
        s = self.settings
        if follow is None:
            follow = s.until is None
        if self.spec.kind == "files":
            if start.kind == "gtid":
                raise ConfigError("a file source starts at 'earliest' or FILE:POS, not a GTID")
            return FileSource(self.spec.paths,
                              start_file=start.file if start.kind == "file" else None,
                              start_pos=start.pos if start.kind == "file" else 4,
                              follow=follow, decoder=decoder)
        return LiveSource(self.spec.connection, start, server_id=s.server_id,
                          blocking=follow, heartbeat_seconds=s.heartbeat_seconds,
                          verify_checksums=s.verify_checksums, decoder=decoder,
                          annotations=s.include_sql)

    def _column_info(self, resume: Position | None, start: StartPosition) -> ColumnInfo:
        """Where rows events get their column names: the TABLE_MAP, else the schema history
        (for a server source: opened here or when first needed), else ``information_schema``
        (only with the history off)."""
        if self.spec.kind != "server":
            files = FileHistoryOpener(self.settings.schema, self.spec.paths, self.store,
                                      self.settings.filter.database, self._saved)
            self._history = files
            return files.column_info(start)
        # A sink that keeps its own position may keep the history beside it (Iceberg).
        offered = getattr(self.sink, "history_storage", None)
        sink_storage = offered() if callable(offered) else None
        self._history = HistoryOpener(
            self.settings.schema, self.spec.connection, self._connect, self.settings.server_id,
            self.settings.verify_checksums, self.store, self.settings.filter.database,
            self._sink_position if sink_storage is not None else self._saved,
            bool(getattr(self.sink, "wants_schema_history", False)), sink_storage)
        return self._history.column_info(resume, start, self._catalog_lookup)

    def _catalog_lookup(self) -> Any:
        if self.spec.kind != "server" or not self.settings.schema_from_server:
            return None
        return information_schema_lookup(self._connect)

    def _engine_lookup(self) -> Any:
        if self.spec.kind != "server":
            return None
        cache: dict[tuple[str, str], bool | None] = {}

        def transactional(database: str, table: str) -> bool | None:
            key = (database, table)
            if key not in cache:
                conn = self._connect()
                try:
                    with conn.cursor() as cur:
                        cur.execute("SELECT ENGINE FROM information_schema.TABLES WHERE "
                                    "TABLE_SCHEMA = %s AND TABLE_NAME = %s", key)
                        row = cur.fetchone()
                finally:
                    conn.close()
                engine = str(row[0]).lower() if row and row[0] else None
                cache[key] = None if engine is None else engine not in (
                    "myisam", "memory", "heap", "csv", "archive", "merge", "mrg_myisam",
                    "aria", "federated", "blackhole")
            return cache[key]

        return transactional

    def _table_filter(self) -> Callable[[str, str], bool] | None:
        """Whether a table's rows are decoded at all (``None``: every table's are)."""
        f = self.settings.filter
        return None if f is None or f.everything else f.table

    def _reload_prepared_xa(self, resume: Position, assembler: TransactionAssembler,
                            column_info: ColumnInfo) -> None:
        """Read again the XA transactions that were prepared but not resolved at ``resume``."""
        for xid, where in resume.pending_xa.items():
            file, _, pos = where.rpartition(":")
            decoder = EventDecoder(schema_resolver=column_info.resolve,
                                   table_filter=self._table_filter())
            reader = TransactionAssembler(
                change_filter=self.settings.filter,
                max_buffered_changes=self.settings.max_buffered_changes,
                spill_dir=self.settings.spill_dir, include_sql=self.settings.include_sql)
            source = self._source(StartPosition("file", file=file, pos=int(pos)), decoder,
                                  follow=False)
            try:
                for event in source:
                    reader.feed(event)
                    if reader.has_held(xid):
                        break
            finally:
                source.stop()
            if not reader.has_held(xid):
                log.warning("prepared XA transaction %s at %s could not be read again; its "
                            "XA COMMIT will deliver nothing", xid, where)
                continue
            assembler.adopt_held(xid, reader)
