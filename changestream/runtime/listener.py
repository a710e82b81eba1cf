"""The listener: reads the binlog source and routes its events, in batches, to the actors.

TABLE_MAP and schema-changing QUERY events go to ColumnInfo in this thread, in binlog order
(no lock or round trip needed); GTID, QUERY, annotations, rows events, XID, XA_PREPARE and
TRANSACTION_PAYLOAD events go to the Transaction actor. It runs in a thread of its own
(reading blocks), sends a batch at ``batch_events`` events or ``batch_bytes`` bytes at a
transaction boundary (in a big transaction at ``batch_bytes``) or when the source has
nothing more right now, and waits for a credit before each send. A live server that goes
away is reconnected at the last boundary read; the actor drops the half-read transaction.
With a set of servers (``servers``) the listener moves to another one when that server does
not answer, once everything read is delivered, and reads on from it by GTID."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pykka

from changestream.actors.messages import (
    CaughtUp,
    EndOfStream,
    EventBatch,
    ResetOpenTransaction,
    TablesSwitch,
)
from changestream.decoding import event_types as et
from changestream.decoding.boundary import BoundaryType, ParserState, TransactionBoundaryParser
from changestream.decoding.ddl import parse_ddl
from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import Event, EventHeader, QueryEvent
from changestream.delivery.flow import StoppedError
from changestream.model.errors import ConnectionLostError, SourceError
from changestream.parallel.decode_workers import SegmentTicket
from changestream.parallel.segments import Segmenter
from changestream.runtime.listener_failover import ListenerFailover
from changestream.runtime.listener_setup import Downstream, ListenerSettings, Reading, Source
from changestream.runtime.table_switches import PendingSwitches
from changestream.snapshot.coordinator import ChunkOffer
from changestream.sources.live import StartPosition

log = logging.getLogger("changestream")

# Event types the Transaction actor needs (TABLE_MAP is not among them: its schema travels
# inside each rows event).
TRANSACTION_EVENTS = frozenset({
    et.GTID, et.ANONYMOUS_GTID, et.GTID_TAGGED, et.MARIADB_GTID, et.QUERY,
    et.MARIADB_QUERY_COMPRESSED, et.ROWS_QUERY, et.MARIADB_ANNOTATE_ROWS, et.XID,
    et.XA_PREPARE, et.TRANSACTION_PAYLOAD, et.FORMAT_DESCRIPTION, et.PREVIOUS_GTIDS,
    et.MARIADB_GTID_LIST, et.INCIDENT, *et.ROWS_KINDS,
})


# Inside a DML transaction these never change the boundary parser's state (STATEMENT in
# DML stays DML), so the listener skips the parser for them: most events are these.
_ROW_STATEMENTS = frozenset({et.TABLE_MAP, et.ROWS_QUERY, et.MARIADB_ANNOTATE_ROWS,
                             *et.ROWS_KINDS})


StreamItem = Event | SegmentTicket | ChunkOffer | TablesSwitch


class Listener:
    """Reads a source in a thread and routes its events (see the module docstring)."""

    def __init__(self, reading: Reading, downstream: Downstream,
                 settings: ListenerSettings | None = None):
        settings = settings or ListenerSettings()
        self.open_source = reading.open_source
        self.column_info = reading.column_info
        self.transaction = downstream.transaction
        self.credits = downstream.credits
        self.stats = downstream.stats.reading  # this thread's own counters
        self.stopping = stopping = downstream.stopping
        self.on_error = downstream.on_error
        self.batch_events = settings.batch_events
        self.batch_bytes = settings.batch_bytes
        self.reconnect_seconds = settings.reconnect_seconds
        self.live = settings.live
        self.workers = reading.workers
        self.table_filter = table_filter = reading.table_filter  # rows decoded (None: all)
        self._decode_filter = table_filter  # the same, as tables added or paused change it
        self._idle_told = False  # CaughtUp sent since the last batch
        self._switches = PendingSwitches()
        # A snapshot's chunks go into the stream where it has read to the end of their window.
        self.snapshot = reading.snapshot
        # Following a server only until this says so when nothing more is to read now (a
        # snapshot under ``until caught-up``).
        self.done_when_idle = reading.done_when_idle
        servers = reading.servers
        self.failover = ListenerFailover(
            servers, reading.start_gtids, downstream.stats.delivery, stopping) \
            if servers is not None and servers.several else None
        self.boundary: tuple[str, int] | None = None
        # Whether the stream's position is known before its first transaction boundary
        # (a start by GTID alone is not): only then can a chunk go in before one.
        self.start_known = True
        self._ever_connected = False
        self._source: Source | None = None
        self._thread = threading.Thread(target=self._run, name="changestream-listener",
                                        daemon=True)
        # Pausing: the reader waits at a transaction boundary while paused (the router asks)
        # or held (a snapshot asks), woken by any change of those, a stop, or a chunk
        # offered (which goes in while it waits).
        self._gate = threading.Condition()
        self._paused = False
        self._hold = False
        self._nudged = False
        self._holding = threading.Event()  # set while stopped at a transaction boundary

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def stop(self) -> None:
        self._open_gate()
        source = self._source
        if source is not None:
            source.stop()

    def wake(self) -> None:
        """Have a read that waits for events report itself idle now (the listener then
        looks at what the router has for the stream: a snapshot chunk, or its end)."""
        source = self._source
        inner = getattr(source, "source", source)
        wake = getattr(inner, "wake", None)
        if callable(wake):
            wake()
        with self._gate:
            self._nudged = True
            self._gate.notify_all()

    def switch_tables(self, switch: TablesSwitch, then: Callable[[], None] | None = None
                      ) -> None:
        """Have ``switch`` (tables added or paused) take effect at the stream's next
        transaction boundary; ``then`` runs, in the listener's thread, once it has."""
        self._switches.put(switch, then)
        self.wake()

    def _send_switches(self, batch: list[StreamItem], last: EventHeader | None) -> None:
        """Send ``batch`` with the switches asked for placed at its end (a transaction
        boundary): the decode workers and this thread's decoder read by their filter from
        the next transaction on."""
        thens = []
        for switch, then in self._switches.take():
            change_filter = switch.change_filter
            if self.workers is not None:
                self.workers.set_filter(change_filter)
            self._decode_filter = None if change_filter.everything else change_filter.table
            decoder = self._source.decoder if self._source is not None else None
            if decoder is not None:  # this thread's decoder, from the next event on
                decoder.table_filter = self._decode_filter
            batch.append(switch)
            if then is not None:
                thens.append(then)
        self._send(batch, last)
        for then in thens:
            then()

    def pause(self) -> None:
        with self._gate:
            self._paused = True

    def resume(self) -> None:
        with self._gate:
            self._paused = False
            self._gate.notify_all()

    def _open_gate(self) -> None:
        with self._gate:
            self._nudged = True
            self._gate.notify_all()

    @property
    def paused(self) -> bool:
        return self._paused

    def _run(self) -> None:
        reason = "end of source"
        try:
            self._read_with_reconnects()
        except StoppedError:
            reason = "stopped"
        except Exception as exc:
            reason = "error"
            self.on_error(exc)
        finally:
            self.stats.connected = False
            with contextlib.suppress(pykka.ActorDeadError):
                self.transaction.tell(EndOfStream(reason))

    def _read_with_reconnects(self) -> None:
        lost_since: float | None = None
        delay = 0.5
        while not self.stopping.is_set():
            decoder = EventDecoder(schema_resolver=self.column_info.resolve,
                                   table_filter=self._decode_filter)
            resume = None if lost_since is None else (
                self.failover.resume_at(self.boundary) if self.failover is not None else
                StartPosition("file", file=self.boundary[0], pos=self.boundary[1])
                if self.boundary is not None else None)
            try:
                self._source = self.open_source(resume, decoder)
                self._read(self._source)
                return
            except ConnectionLostError as exc:
                # Only a connection that worked is worth waiting for: a server that cannot
                # be reached at the start is a configuration problem to report at once.
                if self.stopping.is_set() or not self.live or not self._ever_connected:
                    raise
                now = time.monotonic()
                lost_since = lost_since or now
                if now - lost_since > self.reconnect_seconds:
                    raise SourceError(f"{exc}; gave up reconnecting after "
                                      f"{self.reconnect_seconds:.0f}s") from None
                if self.failover is not None and self.failover.moved_on(exc, self.boundary):
                    self.boundary = None  # on another server: read on by GTID
                    self.stats.reconnects += 1
                    continue
                log.warning("%s; reconnecting in %.1fs at %s", exc, delay,
                            f"{self.boundary[0]}:{self.boundary[1]}" if self.boundary
                            else "the start")
                self.stats.reconnects += 1
                self.stats.connected = False
                self.stopping.wait(delay)
                delay = min(delay * 2, 10.0)
            finally:
                self._source = None

    def _read(self, source: Source) -> None:
        parser = TransactionBoundaryParser()
        batch: list[StreamItem] = []
        at_boundary = 0  # how much of ``batch`` ends at a transaction boundary
        batch_bytes = 0
        decoder = source.decoder
        stats = self.stats
        wanted = TRANSACTION_EVENTS
        inside = False
        h: EventHeader | None = None  # the last event read
        events: Iterator[Event | SegmentTicket | None] = source.stream()
        if self.workers is not None and decoder is not None:
            events = Segmenter(decoder, self.workers, kept_here=self.snapshot,
                               annotations=self.workers.settings.include_sql).events(
                source)  # type: ignore[arg-type]
        snapshot = self.snapshot
        try:
            for event in events:
                if self._paused and not inside:
                    # Paused: nothing read after this boundary goes on until resumed.
                    if batch:
                        self._send(batch, h)
                        batch, at_boundary, batch_bytes = [], 0, 0
                    self._wait_if_paused()
                if not stats.connected:
                    stats.connected = self._ever_connected = True
                if isinstance(event, SegmentTicket):
                    # Sent at once: the next hand-over to this ticket's worker may wait for
                    # its result, which the Transaction actor takes when it gets the ticket.
                    batch.append(event)
                    stats.worker_segments += 1
                    stats.events_read += event.events - 1  # the batch counts it as one
                    self.boundary = event.end
                    if self._switches:
                        self._send_switches(batch, None)
                    else:
                        self._send(batch, None)
                    stats.read_file, stats.read_pos = event.end
                    stats.caught_up = False
                    if event.timestamp:
                        stats.last_event_ts = event.timestamp
                    h = None  # read up to the ticket's end, past the last event decoded here
                    batch, at_boundary, batch_bytes = [], 0, 0
                    self._wait_if_paused()
                    continue
                if event is None:
                    if batch:
                        self._send(batch, h)
                        batch, at_boundary, batch_bytes = [], 0, 0
                    elif h is not None:
                        self._note_read(h)
                    if self._switches and not inside:
                        self._send_switches([], None)
                    stats.caught_up = True
                    if not self._idle_told:  # the stages after it learn it in order
                        self._idle_told = True
                        self.transaction.tell(CaughtUp())
                    if snapshot is not None and not inside and self._placeable():
                        offers: list[StreamItem] = [
                            *snapshot.due(stats.read_file, stats.read_pos)]
                        if offers:
                            self._send(offers, None)
                    if self.done_when_idle is not None and not inside and \
                            self.done_when_idle():
                        return
                    if self.failover is not None and not inside:
                        self.failover.check_demoted()
                    self._wait_if_paused()
                    continue
                h = event.header
                code = h.type_code
                if code in _ROW_STATEMENTS and parser.state is ParserState.DML:
                    boundary = BoundaryType.STATEMENT  # what feed() would say, cheaper
                else:
                    boundary = parser.feed(event)
                    if code == et.ROTATE and h.artificial:  # where the server sends from
                        stats.read_file = event.next_file  # type: ignore[attr-defined]
                        stats.read_pos = event.position  # type: ignore[attr-defined]
                if code == et.QUERY and boundary is BoundaryType.STATEMENT:
                    self._schema_change(event, decoder)  # type: ignore[arg-type]
                if code in wanted:
                    batch.append(event)
                    batch_bytes += h.size
                inside = parser.inside_transaction
                if not inside and boundary is not BoundaryType.IGNORE and \
                        boundary is not BoundaryType.GTID:
                    self.boundary = (h.file or "", h.end)
                    if snapshot is not None and snapshot.waiting:
                        batch.extend(snapshot.due(h.file, h.end))
                    at_boundary = len(batch)
                    if self._switches:
                        self._send_switches(batch, h)
                        batch, at_boundary, batch_bytes = [], 0, 0
                    elif len(batch) >= self.batch_events or batch_bytes >= self.batch_bytes:
                        self._send(batch, h)
                        batch, at_boundary, batch_bytes = [], 0, 0
                        self._wait_if_paused()
                elif batch_bytes >= self.batch_bytes:
                    # Inside a big transaction: pass it on in pieces (the Transaction actor
                    # spills it) rather than hold all its decoded rows here.
                    self._send(batch, h)
                    batch, at_boundary, batch_bytes = [], 0, 0
        except SourceError:
            if batch[:at_boundary]:
                self._send(batch[:at_boundary], None)
            if inside or at_boundary < len(batch):
                self.transaction.tell(ResetOpenTransaction())
            raise
        if batch:
            self._send(batch, h)

    def _schema_change(self, event: QueryEvent, decoder: EventDecoder | None) -> None:
        ddl = parse_ddl(event.query, event.database)
        if ddl is None:
            return
        self.column_info.apply_ddl(ddl, event)
        if decoder is not None:
            decoder.forget_table_maps()

    def _note_read(self, h: EventHeader) -> None:
        """Where reading has got to (for status): updated per batch, not per event. Not
        from what a server sends when a connection starts (its fake ROTATE, the binlog's
        FORMAT_DESCRIPTION again): those are not where reading has got to."""
        stats = self.stats
        stats.caught_up = False
        if h.artificial or (h.log_pos == 0 and h.type_code == et.FORMAT_DESCRIPTION):
            return
        if h.timestamp and h.type_code != et.HEARTBEAT:
            stats.last_event_ts = h.timestamp
        stats.read_file, stats.read_pos = h.file, h.end

    def _send(self, batch: list[StreamItem], last: EventHeader | None) -> None:
        self._idle_told = False
        if last is not None:
            self._note_read(last)
        self.credits.take()
        self.stats.events_read += len(batch)
        self.transaction.tell(EventBatch(batch))

    def hold(self, timeout: float = 60.0) -> tuple[str, int] | None:
        """Pause at the next transaction boundary and wait until it is reached: where the
        stream stands (the snapshot of a table without a key goes in there)."""
        with self._gate:
            self._hold = True
        self.wake()
        if not self._holding.wait(timeout):
            self.release()
            return None
        return self._stands()

    def release(self) -> None:
        """Read on after :meth:`hold` (a pause asked for through the router stays)."""
        with self._gate:
            self._hold = False
            self._gate.notify_all()

    def _placeable(self) -> bool:
        return self.boundary is not None or self.start_known

    def _stands(self) -> tuple[str, int]:
        """The last transaction boundary read (where reading began, before any)."""
        return self.boundary or (self.stats.read_file or "", self.stats.read_pos or 0)

    def _wait_if_paused(self) -> None:
        if self._paused or self._hold:
            self._holding.set()
            try:
                while True:
                    # A chunk offered while waiting goes in here (the stream stands still).
                    snapshot = self.snapshot
                    if snapshot is not None and self._placeable():
                        due: list[StreamItem] = [*snapshot.due(*self._stands())]
                        if due:
                            self._send(due, None)
                    if self._switches:  # tables switched while paused: from here on
                        self._send_switches([], None)
                    with self._gate:
                        while (self._paused or self._hold) and not self._nudged and \
                                not self.stopping.is_set():
                            self._gate.wait()
                        self._nudged = False
                        if not (self._paused or self._hold) or self.stopping.is_set():
                            break
            finally:
                self._holding.clear()
        if self.stopping.is_set():
            raise StoppedError
