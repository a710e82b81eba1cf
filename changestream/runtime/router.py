"""The Router: wires a source, the actors and a sink adapter together, and runs them.

This is the one place where the core meets ``actors/`` (see docs/internals.md).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import pykka
import pymysql

from changestream.actors.sink import SinkActor
from changestream.actors.transaction import TransactionActor
from changestream.decoding.event_decoder import EventDecoder
from changestream.delivery.adapter import KeepsHistory, SinkAdapter, capabilities_of
from changestream.delivery.flow import CreditLine, Credits
from changestream.delivery.plugins import make_sink
from changestream.delivery.position_store import PositionStore, open_sink
from changestream.model.changes import Position
from changestream.model.errors import ConfigError
from changestream.observe.stats import RouterStats
from changestream.parallel.decode_workers import DecodeWorkers
from changestream.runtime.config import Config
from changestream.runtime.heartbeat import HeartbeatStatement
from changestream.runtime.listener import Listener
from changestream.runtime.listener_setup import Downstream, ListenerSettings, Reading, Source
from changestream.runtime.preflight import Finding, run_preflight
from changestream.runtime.router_snapshots import RouterSnapshots
from changestream.runtime.router_tables import RouterTables
from changestream.runtime.settings import RouterSettings, decode_workers_for, sink_options
from changestream.runtime.source_stream import SourceStream, open_source
from changestream.runtime.standby import StandbyRole, close_role, fence
from changestream.runtime.start_point import later, position_override, start_point
from changestream.runtime.status import history_status, stream_status
from changestream.runtime.xa_reload import reload_prepared_xa
from changestream.schema.column_info import ColumnInfo, information_schema_lookup
from changestream.schema.file_opener import FileHistoryOpener
from changestream.schema.opener import (
    HistoryOpener,
    HistorySource,
    history_settings,
    opens_at_start,
)
from changestream.schema.shadow import ShadowServer
from changestream.schema.shadow_prestart import ShadowPrestart
from changestream.sources import server
from changestream.sources.failover import ServerSet
from changestream.sources.live import StartPosition
from changestream.sources.source_url import SourceSpec, parse_source_url
from changestream.transactions.assembler import TransactionAssembler
from changestream.verify.start import start_schedule

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger("changestream")


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
                sink = make_sink(config.sink.spec, **sink_options(config))
        else:
            settings = config
        if sink is None:
            raise ConfigError("no sink: pass sink=... or a Config that names one")
        self.settings = settings
        self.sink = sink
        self._heartbeat: HeartbeatStatement | None = None
        self.spec: SourceSpec = parse_source_url(settings.source, password=settings.password)
        if self.spec.kind == "server":
            self.spec.connection.update(settings.tls)
        self.store = PositionStore(settings.position_file) if settings.position_file else None
        self.stats = RouterStats()
        self.stats.metrics.expose_status(self.status)
        self._stopping = threading.Event()
        self.standby = StandbyRole.of(settings, self._fail, self._stopping)  # None: writes
        self._servers = ServerSet(  # several servers: the one read, failover between them
            self.spec, settings.failover.wait_seconds, stopping=self._stopping,
            check_seconds=settings.failover.check_seconds) if len(self.spec.hosts) > 1 else None
        self._aborted = threading.Event()
        # Set when the Sink actor has delivered the end of the stream, or on a failure.
        self._ended = threading.Event()
        self._credits_in: Credits | None = None
        self._error: BaseException | None = None
        self._listener: Listener | None = None
        self._thread: threading.Thread | None = None
        self._actors: list[pykka.ActorRef[Any]] = []
        self._verify: Any = None  # a VerifySchedule while one runs
        self._credits: list[Credits | CreditLine] = []
        self._workers: DecodeWorkers | None = None
        self._history: HistoryOpener | FileHistoryOpener | None = None
        self._shadow_start: ShadowPrestart | None = None
        self._saved: Position | None = None  # what the position file held at the start
        self._sink_position: Position | None = None  # what the sink's open() returned
        self._tables = RouterTables(settings.filter, settings.schema.history)
        self._snapshots = RouterSnapshots(settings, self.spec, sink, self._connect,
                                          self._table_filter, self.stats, self._stopping,
                                          self._fail)

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

    def join(self, timeout: float | None = None) -> bool:
        """Wait for a started router to end, without raising its error (see :attr:`error`);
        True when it ended (or was never started)."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    @property
    def error(self) -> BaseException | None:
        """What made the router fail (``None``: nothing has)."""
        return self._error

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
        if self._servers is not None:
            self._servers.start(None)
        conn = self._connect()
        try:
            return run_preflight(conn, schema_from_server=self.settings.schema_from_server,
                                 history=self.settings.schema.history,
                                 shadow_server=self.settings.schema.shadow_server or None)
        finally:
            conn.close()

    def status(self) -> dict[str, Any]:
        """Where the router is: connection, positions, lag, counts and queue depths."""
        st = self.stats
        with st.delivery.lock:
            return {
                "source": self.spec.describe(),
                "server": self.spec.server if self.spec.kind == "server" else None,
                "connected": st.reading.connected,
                "paused": self.paused,
                **stream_status(st),
                "queue_depths": self.queue_depths(),
                "uptime_seconds": round(time.time() - st.started, 3),
                "schema_history": history_status(self._history),
                "snapshot": self._snapshots.status(),
                "tables": self._tables.status(),
                "verify": self._verify.status() if self._verify is not None else None,
                "standby": self.standby.status() if self.standby is not None else None,
            }

    @property
    def metrics_registry(self) -> CollectorRegistry:
        """This router's Prometheus metrics (a registry of its own, not the global one), as
        ``GET /metrics`` serves them: ``prometheus_client.generate_latest(registry)``."""
        return self.stats.metrics.registry

    def request_snapshot(self, tables: list[str], where: str | None = None
                         ) -> dict[str, Any]:
        """Snapshot the tables matching ``tables`` (``db.table`` patterns in the filter's
        scope; only the rows SQL condition ``where`` holds for, if given) while running
        (see :meth:`.router_snapshots.RouterSnapshots.request`; docs/snapshots.md)."""
        return self._snapshots.request(tables, where)

    def change_tables(self, action: str, tables: list[str], snapshot: bool = True
                      ) -> dict[str, Any]:
        """Add, pause or resume tables while running (:mod:`.router_tables`)."""
        return self._tables.change(action, tables, snapshot)

    def queue_depths(self) -> dict[str, int]:
        names = ("listener_to_transaction", "transaction_to_sink")
        return {n: c.in_flight for n, c in zip(names, self._credits)}

    # -- running ---------------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._aborted.set()
        self._stopping.set()
        self._ended.set()
        if self._credits_in is not None:
            self._credits_in.close()  # the listener, waiting to send, gives up
        if self._listener is not None:
            self._listener.stop()

    def run(self) -> None:
        """Run until the end (see the class docstring); raise what made it fail."""
        if self.standby is not None and not self.standby.take():
            return  # stopped while waiting for the lease
        saved = self.store.load() if self.store else None
        if self._servers is not None:
            self._servers.start(None)  # the schema history's start may ask it at once
        # The decode workers start first, while this process may still have one thread and
        # can fork them (parallel/processes.py); else each is a new interpreter with its
        # imports (a tenth of a second or more), which runs beside the sink's open (a Spark
        # sink's catalog calls) and the start point's lookups instead of after them.
        self._workers = decode_workers_for(self.settings, self.sink, self._message_changes())
        self._shadow_start = self._prestart_shadow(saved)
        opening = time.monotonic()
        try:
            sink_position = open_sink(self.sink, self.store, saved, fence(self.standby))
        except BaseException as exc:
            self._shutdown()
            close_role(self.standby, exc)
            raise
        log.info("%s opened in %.2f s", type(self.sink).__name__, time.monotonic() - opening)
        try:
            self._saved = saved
            self._sink_position = sink_position
            override = position_override(self.settings.position_override)
            resume = override or later(saved, sink_position)
            if resume is not None:
                log.info("resuming at %s", resume)
            if self._tables.resume_from(resume) is not self.settings.filter and self._workers:
                self._workers.set_filter(self._tables.filter)
            self._run(resume)
        finally:
            self._shutdown()
            try:
                self.sink.close()
            except Exception as exc:
                log.warning("closing the sink failed: %s", exc)
            self._error = close_role(self.standby, self._error)  # released at a clean stop
        if self._error is not None:
            raise self._error

    def _run(self, resume: Position | None) -> None:
        began = time.monotonic()
        s = self.settings
        snapshots = self._snapshots
        progress, resume = snapshots.plan(resume)
        if progress is None and snapshots.mode == "initial-only":
            log.info("snapshot.mode initial-only: the snapshot is done; nothing to read")
            return
        if self._servers is not None and resume is not None:  # one that has it all
            self._servers.start(resume.gtid_set or "")
        gtid_base, start = start_point(resume, s, self.spec, snapshots.mode, self._connect)
        where = f"{start.file}:{start.pos}" if start.kind == "file" else (
            f"gtid {start.gtid}" if start.kind == "gtid" else start.kind)
        log.info("reading %s from %s into %s", self.spec.describe(), where,
                 type(self.sink).__name__)
        credits_in = Credits(s.in_flight)
        credits_out = CreditLine(s.in_flight)
        self._credits = [credits_in, credits_out]
        self._credits_in = credits_in
        column_info = self._column_info(resume, start)
        assembler = TransactionAssembler(
            gtid_set=gtid_base, change_filter=self._tables.filter,
            max_buffered_changes=s.max_buffered_changes, spill_dir=s.spill_dir,
            is_transactional=self._engine_lookup(), include_sql=s.include_sql)
        if start.kind == "file" and start.file:
            assembler.resume.start = (start.file, start.pos)
        elif resume is not None and resume.file and self._servers is None:
            # Resumed by GTID: it was there (on this server; a set's may be another's).
            assembler.resume.start = (resume.file, resume.pos)
        snapshot = snapshots.prepare(progress, assembler)
        if resume is not None and resume.pending_xa:
            reload_prepared_xa(resume, assembler, column_info, s,
                               lambda begin, decoder, follow: open_source(
                                   self.spec, s, begin, decoder, follow),
                               self._table_filter())
        # The assembler is whole here: from now on only the Transaction actor touches it.
        start_known = assembler.resume.start is not None
        sink_ref = SinkActor.start(self.sink, self.store, s.batch,
                                   self.stats.delivery, self._fail, self._ended,
                                   (self.store.last_batch_id + 1) if self.store else 1,
                                   self._history, lambda: fence(self.standby))
        transaction_ref = TransactionActor.start(assembler, sink_ref, credits_in, credits_out,
                                                 self._fail, self._message_changes(),
                                                 self._workers, snapshot)
        self._actors = [transaction_ref, sink_ref]
        live = self.spec.kind == "server"

        # Under a snapshot the stream follows the server until the snapshot is done, also
        # with ``until`` (and ``initial-only`` ends there).
        follow = None if progress is None else (
            True if s.until is not None or snapshots.mode == "initial-only" else None)
        done_when_idle = snapshots.done if progress is not None and follow else None

        def listener_source(at: StartPosition | None, decoder: EventDecoder) -> Source:
            return SourceStream(open_source(self.spec, s, at or start, decoder, follow),
                                decoder)

        self._listener = Listener(
            Reading(listener_source, column_info, self._workers, self._table_filter(),
                    snapshot, done_when_idle, self._servers,
                    gtid_base.render() if gtid_base else None),
            Downstream(transaction_ref, credits_in, self.stats, self._stopping, self._fail),
            ListenerSettings(s.batch_events, reconnect_seconds=s.reconnect_seconds,
                             live=live))
        self._listener.start_known = start_known
        self._listener.start()
        snapshots.attach(self._listener, progress is not None)
        self._tables.attach(self._listener, snapshots if live else None)
        self._verify = start_schedule(self.settings, self.sink, live, self._table_filter(),
                                      self._connect)
        if live and self.settings.heartbeat.enabled:
            self._heartbeat = HeartbeatStatement(self.settings.heartbeat, self._connect)
            self._heartbeat.start()
        self._ended.wait()
        if self._aborted.is_set():
            self._listener.stop()
        self._listener.join(10)
        done = self.stats.delivery
        log.info("stopped: %d transactions, %d changes delivered in %d batches in %.2f s "
                 "(the sink's open not counted); position %s", done.transactions_delivered,
                 done.changes_delivered, done.batches_delivered, time.monotonic() - began,
                 done.delivered or "unchanged")

    def _message_changes(self) -> int:
        """Changes per message to the sink actor (and per decode worker answer): no more
        than a batch, so batches are cut close to their size limit."""
        batch = self.settings.batch.for_sink(self.sink)
        return max(1, min(self.settings.message_changes, batch.max_changes))

    def _shutdown(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        if self._verify is not None:
            self._verify.stop()
            self._verify = None
        self._snapshots.stop()
        if self._listener is not None:
            self._listener.stop()
        if self._credits_in is not None:
            self._credits_in.close()
        for ref in self._actors:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                ref.stop(timeout=30)
        self._actors = []
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        if self._history is not None:
            self._history.close()
        if self._shadow_start is not None:
            self._shadow_start.close()
            self._shadow_start = None

    # -- sources ---------------------------------------------------------------------------

    def _connect(self) -> pymysql.Connection[Any]:
        return server.connect(self.spec.connection)

    def _column_info(self, resume: Position | None, start: StartPosition) -> ColumnInfo:
        """Where rows events get their column names: the TABLE_MAP, else the schema history
        (for a server source: opened here or when first needed), else ``information_schema``
        (only with the history off)."""
        if self.spec.kind != "server":
            files = FileHistoryOpener(self.settings.schema, self.spec.paths, self.store,
                                      self._tables.filter.database, self._saved)
            self._history = files
            return files.column_info(start)
        # A sink that keeps its own position may keep the history beside it (Iceberg).
        sink_storage = cast(KeepsHistory, self.sink).history_storage() \
            if capabilities_of(self.sink).history_storage else None
        source = HistorySource(self.spec.connection, self._connect, self.settings.server_id,
                               self.settings.verify_checksums)
        self._history = HistoryOpener(
            self.settings.schema, source, self.store, self._tables.filter.database,
            self._sink_position if sink_storage is not None else self._saved,
            self._sink_wants_history(), sink_storage,
            self._shadow_start.server if self._shadow_start is not None else ShadowServer)
        return self._history.column_info(resume, start, self._catalog_lookup)

    def _sink_wants_history(self) -> bool:
        return capabilities_of(self.sink).wants_schema_history

    def _prestart_shadow(self, saved: Position | None) -> ShadowPrestart | None:
        """The schema history's shadow server, started beside the sink's open when the
        history will open at the start (see :mod:`changestream.schema.shadow_prestart`)."""
        settings = history_settings(self.settings.schema, self.store)
        if self.spec.kind != "server" or not opens_at_start(settings, saved,
                                                            self._sink_wants_history()):
            return None
        return ShadowPrestart(settings, self._connect)

    def _catalog_lookup(self) -> Any:
        if self.spec.kind != "server" or not self.settings.schema_from_server:
            return None
        return information_schema_lookup(self._connect)

    def _engine_lookup(self) -> Any:
        return server.engine_lookup(self._connect) if self.spec.kind == "server" else None

    def _table_filter(self) -> Callable[[str, str], bool] | None:
        """Whether a table's rows are decoded at all (``None``: every table's are)."""
        f = self._tables.filter
        return None if f is None or f.everything else f.table

