"""Decode workers: plain DML transactions decoded, assembled and encoded in other processes.

The router's threads share one interpreter lock. When the sink takes encoded records (it
declares an ``encoded_format``), the listener cuts the stream into segments of whole
transactions that need nothing but their own events (:mod:`changestream.parallel.segments`)
and hands them to worker processes, round robin. A worker writes a segment's records in
the sink's encoding (:mod:`changestream.parallel.encodings`): on its fast path, a walk of
the segment's bytes, or from the router's own decoder and assembler: the router's records
byte for byte (but for ``ts``). The Transaction actor
takes the results in binlog order (docs/internals.md, "Decode workers")."""

from __future__ import annotations

import array
import contextlib
import datetime as dt
import logging
import signal
import struct
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import zstandard

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import CHECKSUM_CRC32, EventDecoder
from changestream.decoding.events import EventHeader
from changestream.decoding.table_schema import TableSchema, may_hold_address
from changestream.model.changes import Change, TransactionPart, binlog_name
from changestream.model.errors import ChangestreamError, SourceError
from changestream.model.record import record
from changestream.parallel.channel import Channel, beside_the_pickle
from changestream.parallel.encodings import Payload, load_encoding
from changestream.parallel.payloads import unpacked_segment
from changestream.parallel.processes import HelperProcess, reap, start_python
from changestream.parallel.segment_encoder import EncodedTransaction
from changestream.transactions.assembler import TransactionAssembler
from changestream.transactions.filters import ChangeFilter

log = logging.getLogger("changestream")

_SIZE = struct.Struct("<I").unpack_from

WORKER_STARTED = "started"
"""A worker's first message: its imports are done and it takes segments."""

RawEventData = tuple[str, int, bytes]
"""``(file, offset, bytes)`` of one whole event."""


@record(frozen=True)
class WorkerSettings:
    """What a worker must know to assemble and encode as the router would."""

    change_filter: ChangeFilter | None
    include_sql: bool
    #: the sink's ``encoded_format``: a built-in record format or ``module:attribute`` of its
    #: :class:`~changestream.parallel.encodings.WorkerEncoding`
    record_format: str
    verify_checksums: bool
    max_buffered_changes: int
    spill_dir: str | None


@record
class Segment:
    """Whole transactions of one binlog ``file`` for a worker: their events one after the
    other in ``data``, each one's offset in the file, and the FORMAT_DESCRIPTION event of
    the file (a worker decodes it when it differs from the last one). Two bytes objects
    and an array: quick to send to another process. ``schemas``: the router's schemas for
    its TABLE_MAPs that do not log their columns' names (``binlog_row_metadata`` not FULL)
    or may hold MariaDB's UUID/INET types, by the TABLE_MAP's bytes but for the table id."""

    format_description: RawEventData
    file: str
    data: bytes
    offsets: array.array[int]
    payloads: bool = False  # some transaction came in a TRANSACTION_PAYLOAD
    schemas: dict[bytes, TableSchema] | None = None


@record(frozen=True)
class SegmentTicket:
    """A segment handed to worker ``worker``; its answer comes through
    :meth:`DecodeWorkers.answer_to`."""

    worker: int
    events: int
    end: tuple[str, int]  # file and offset after the segment's last transaction
    timestamp: int = 0  # of the segment's last event (for seconds behind the source)


@record
class WorkerRun:
    """Whole transactions a worker assembled, in order: their records, how many changes
    and transactions, the last commit time, every GTID (also of transactions with nothing
    to deliver), and where the last one ends."""

    records: bytes | memoryview  # a read-only memoryview when received from a worker
    changes: int
    transactions: int
    last_commit_ts: dt.datetime | None
    gtids: list[str]
    file: str
    end: int
    # Changes by (database, table, op): the whole segment's, on its last run with changes.
    tables: dict[tuple[str, str, str], int] | None = None


SegmentResult = list[WorkerRun]


@record(frozen=True)
class FilterUpdate:
    """Decode the segments after this one by ``change_filter`` (tables added or paused
    while running); a worker does not answer it."""

    change_filter: ChangeFilter | None


class DecodeWorkers:
    """``count`` worker processes, fed round robin; results are taken in the same order.

    ``ready`` is false until every worker has said it started (once its answers are read,
    :meth:`answer_to`); with ``decode_here_while_starting`` the listener decodes in the
    router's process until then, else ``ready`` is true from the first."""

    def __init__(self, count: int, settings: WorkerSettings, run_changes: int = 5_000, *,
                 decode_here_while_starting: bool = False):
        self.settings = settings
        self.ready = not decode_here_while_starting
        self._started = 0
        self._connections: list[Channel] = []
        self._processes: list[HelperProcess] = []
        for i in range(count):
            connection, process = _start_worker(i, settings, run_changes)
            self._connections.append(connection)
            self._processes.append(process)
        self._next = 0
        self._readers: list[threading.Thread] = []
        self._closing = False
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return len(self._connections)

    def submit(self, segment: Segment, end: tuple[str, int]) -> SegmentTicket:
        """Hand ``segment``, which ends at ``end``, to the next worker (blocks while that
        worker is busy)."""
        worker = self._next
        self._next = (worker + 1) % len(self._connections)
        try:
            self._connections[worker].send(segment)
        except (OSError, EOFError) as exc:
            raise self._lost(worker, exc) from None
        last = len(segment.data) - (end[1] - segment.offsets[-1])  # where its last event is
        return SegmentTicket(worker, len(segment.offsets), end, _SIZE(segment.data, last)[0])

    def set_filter(self, change_filter: ChangeFilter | None) -> None:
        """Have every worker decode the segments submitted from now on by
        ``change_filter`` (those submitted before keep the filter they were sent under)."""
        update = FilterUpdate(None if change_filter is None or change_filter.everything
                              else change_filter)
        for worker, connection in enumerate(self._connections):
            try:
                connection.send(update)
            except (OSError, EOFError) as exc:
                raise self._lost(worker, exc) from None
        self.settings = replace(self.settings, change_filter=update.change_filter)

    def answer_to(self, deliver: Callable[[int, Any], None]) -> None:
        """Hand each worker's answers, as they come, to ``deliver(worker, answer)`` (from a
        thread per worker): a :data:`SegmentResult`, or the exception that stopped the
        worker. One worker's answers come in the order its segments were submitted; take
        them in submit order across workers (round robin)."""
        for worker in range(len(self._connections)):
            reader = threading.Thread(target=self._read_answers, args=(worker, deliver),
                                      daemon=True, name=f"changestream-decoder-{worker}-out")
            reader.start()
            self._readers.append(reader)

    def _read_answers(self, worker: int, deliver: Callable[[int, Any], None]) -> None:
        connection = self._connections[worker]
        while True:
            try:
                answer = connection.recv()
            except (OSError, EOFError) as exc:
                if not self._closing:
                    with contextlib.suppress(Exception):
                        deliver(worker, self._lost(worker, exc))
                return
            if answer == WORKER_STARTED:
                with self._lock:
                    self._started += 1
                    self.ready = self.ready or self._started == len(self._connections)
                continue
            try:
                deliver(worker, answer)
            except Exception:  # nobody takes answers any more (the router stops)
                return

    def _lost(self, worker: int, exc: BaseException) -> SourceError:
        process = self._processes[worker]
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(0.5)
        return SourceError(f"decode worker {worker} stopped (exit code {process.returncode}): "
                           f"{exc or type(exc).__name__}")

    def close(self) -> None:
        """Stop the workers (whatever they were doing is not needed any more)."""
        self._closing = True
        for connection in self._connections:
            # Shut the socket down first: a reader thread blocked in recv() keeps it open
            # through a close(), but a shutdown ends that recv (and the worker's) at once.
            with contextlib.suppress(OSError):
                connection.shutdown()
            connection.close()  # the worker's next read or write fails, and it ends
        # Waited for: a process that ran the router then owns the workers' CPU time, as a
        # process's children's.
        reap(self._processes)


# -- the worker process -------------------------------------------------------------------


class _Worker:
    """The decoding, assembling and encoding one worker process does."""

    def __init__(self, settings: WorkerSettings, run_changes: int = 5_000):
        self.settings = settings
        self.run_changes = run_changes
        # Without include_sql the statement annotations are read by no one.
        skipped = frozenset() if settings.include_sql else frozenset(
            {et.ROWS_QUERY, et.MARIADB_ANNOTATE_ROWS})
        table_filter = settings.change_filter
        self.decoder = EventDecoder(
            verify_checksums=settings.verify_checksums, skipped_types=skipped,
            table_filter=None if table_filter is None or table_filter.everything
            else table_filter.table, schema_resolver=self._logged_whole)
        self.assembler = TransactionAssembler(
            change_filter=settings.change_filter, include_sql=settings.include_sql,
            max_buffered_changes=settings.max_buffered_changes, spill_dir=settings.spill_dir)
        self._format_description: bytes | None = None
        self.encoding = load_encoding(settings.record_format)
        self.encoder: Any = self.encoding.fast_walk(self.decoder, settings.change_filter,
                                                    settings.include_sql)
        self.fast_segments = 0  # segments the fast path took
        self._zstd = zstandard.ZstdDecompressor()

    def assemble(self, segment: Segment, stamp: str | None = None) -> SegmentResult:
        """The segment's transactions, in runs of about ``run_changes`` changes (``stamp``:
        the records' ``ts``, else now)."""
        file, offset, data = segment.format_description
        if data != self._format_description:
            self.decoder.decode(data, file, offset)
            self._format_description = data
        if segment.schemas:
            changed = False
            for key, schema in segment.schemas.items():
                changed |= self.decoder.preset_table_map(key, schema)
            if changed and self.encoder is not None:
                self.encoder.forget_table_maps()
        stamp = stamp or dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")
        lines: list[bytes] = []
        done = None
        tables: dict[tuple[str, str, str], int] = {}
        if self.encoder is not None:
            done = self._encode_fast(segment, stamp, lines)
            self.fast_segments += done is not None
            tables = self.encoder.table_counts
        name = binlog_name(segment.file)
        payload: Payload
        if done is None:
            tables = {}
            whole: list[list[TransactionPart]] | None = \
                [] if self.encoding.collects_parts else None
            changes: list[Change] = []
            done = self._assemble_generally(segment, changes, tables, whole)
            payload = self.encoding.general_payload(whole or [], changes, stamp)
        else:
            payload = self.encoding.walk_payload(self.encoder, done, name, lines)
        runs = self._runs(done, name, payload)
        for run in reversed(runs):
            if run.changes:
                run.tables = tables
                break
        return runs

    def _logged_whole(self, schema: TableSchema, header: EventHeader | None) -> TableSchema:
        """A TABLE_MAP's schema as it logs it, which must be whole: the router sends the
        schemas it resolved with the segment (:meth:`EventDecoder.preset_table_map`)."""
        fde = self.decoder.format_description
        if schema.names_logged and not (fde is not None and fde.is_mariadb
                                        and may_hold_address(schema)):
            return schema
        raise SourceError(f"decode worker: the TABLE_MAP of {schema.qualified_name} does "
                          "not log its columns' names and its schema did not come with the "
                          "segment")

    def _encode_fast(self, segment: Segment, stamp: str, lines: list[bytes]
                     ) -> list[EncodedTransaction] | None:
        """The segment through the fast path (its compressed transactions unpacked first);
        ``None`` when that path does not take it."""
        assert self.encoder is not None
        if not segment.payloads:
            return self.encoder.encode(segment.file, segment.data, segment.offsets, stamp,
                                       lines)
        decoder = self.decoder
        unpacked = unpacked_segment(segment.data, segment.offsets, self._zstd, segment.file,
                                    decoder.checksum_alg == CHECKSUM_CRC32,
                                    decoder.verify_checksums)
        if unpacked is None:
            return None
        done = self.encoder.encode(segment.file, unpacked.data, unpacked.offsets, stamp,
                                   lines)
        if done is None or len(done) != len(unpacked.ends):
            return None
        for transaction, end in zip(done, unpacked.ends, strict=True):
            if end is not None:
                transaction.end = end
        return done

    def _assemble_generally(self, segment: Segment, changes: list[Change],
                            tables: dict[tuple[str, str, str], int],
                            whole: list[list[TransactionPart]] | None = None,
                            ) -> list[EncodedTransaction]:
        """The segment through the router's own decoder and assembler: its changes put in
        ``changes`` (and each transaction's parts in ``whole``), counted by database,
        table and op in ``tables``."""
        decode = self.decoder.decode
        feed = self.assembler.feed
        file, data, at = segment.file, segment.data, 0
        for offset in segment.offsets:
            size = _SIZE(data, at + 9)[0]
            feed(decode(data[at:at + size], file, offset))
            at += size
        if self.assembler.inside_transaction:
            raise SourceError("a decode worker's segment ended inside a transaction")
        done: list[EncodedTransaction] = []
        for parts, gtid, _file, end in self.assembler.drain_whole():
            count = 0
            for part in parts:
                changes.extend(part.changes)
                count += len(part.changes)
            done.append(EncodedTransaction(count, gtid, parts[-1].info.commit_ts
                                           if parts else None, end))
            if whole is not None:
                whole.append(parts)
        for change in changes:
            key = (change.database or "", change.table or "", change.op)
            tables[key] = tables.get(key, 0) + 1
        return done

    def _runs(self, done: list[EncodedTransaction], file: str,
              payload: Payload) -> SegmentResult:
        """The transactions in runs of about ``run_changes`` changes; a run's records are
        ``payload(first transaction, after its last, first change, after its last)``."""
        runs: SegmentResult = []
        first = used = 0  # changes: the current run's first, and those taken so far
        began = 0  # the current run's first transaction
        gtids: list[str] = []
        count = 0
        commit_ts = None
        last = len(done) - 1
        for i, transaction in enumerate(done):
            if transaction.gtid is not None:
                gtids.append(transaction.gtid)
            if transaction.changes:
                count += 1
                used += transaction.changes
                commit_ts = transaction.commit_ts or commit_ts
            if used - first >= self.run_changes or i == last:
                runs.append(WorkerRun(payload(began, i + 1, first, used), used - first, count,
                                      commit_ts, gtids, file, transaction.end))
                first, began, gtids, count, commit_ts = used, i + 1, [], 0, None
        return runs


def _start_worker(index: int, settings: WorkerSettings, run_changes: int
                  ) -> tuple[Channel, HelperProcess]:
    """A worker process (:func:`~changestream.parallel.processes.start_python` on
    :func:`worker_main`) and the connection to it, its settings sent."""
    connection, process = start_python("changestream.parallel.decode_workers", "worker_main",
                                       f"changestream-decoder-{index}")
    connection.send((settings, run_changes))
    return connection, process


def worker_main(fd: int) -> None:
    """A worker process's life: its settings, then segments, from the router on ``fd``."""
    # The router stops its workers by closing their connections; an interrupt of the whole
    # process group (Ctrl-C) is the router's to handle.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    connection = Channel.of_fd(fd)
    try:
        settings, run_changes = connection.recv()
    except (EOFError, OSError):
        return
    _serve(connection, settings, run_changes)


def _serve(connection: Channel, settings: WorkerSettings,
           run_changes: int) -> None:
    worker = _Worker(settings, run_changes)
    try:
        connection.send(WORKER_STARTED)
    except (OSError, EOFError):
        return
    while True:
        try:
            segment = connection.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if segment is None:
            return
        if isinstance(segment, FilterUpdate):
            worker = _Worker(replace(worker.settings, change_filter=segment.change_filter),
                             run_changes)
            continue
        try:
            answer: Any = worker.assemble(segment)
        except ChangestreamError as exc:
            answer = exc
        except Exception as exc:  # reported in the router, with where it happened
            first = segment.offsets[0] if segment.offsets else "?"
            answer = SourceError(f"decode worker failed on the segment at {segment.file} "
                                 f"offset {first}: {type(exc).__name__}: {exc}")
        if isinstance(answer, list):
            for run in answer:
                run.records = beside_the_pickle(run.records)
        try:
            connection.send(answer)
        except (OSError, EOFError):
            return
