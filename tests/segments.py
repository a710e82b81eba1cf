"""Test helper: a decode worker's fast path against its general path on binlog files."""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import TableMapEvent
from changestream.model.errors import ChangestreamError
from changestream.native import compiled
from changestream.parallel import segments
from changestream.parallel.decode_workers import Segment, WorkerSettings, _Worker
from changestream.parallel.segments import Segmenter
from changestream.sources.files import FileSource
from changestream.sources.raw import RawEvent
from changestream.transactions.filters import ChangeFilter

# Files whose DML transactions all take the fast path (column names logged).
FAST_PATH_FILES = {"rust_mysql_common/mariadb-bin.000001",
                    "rust_mysql_common/mysql-enum-string-set.000001",
                    "rust_mysql_common/mysql_type_bit.000001",
                    "mysql-testsuite/rpl_binlog_with_gipk_info_full_metadata.000001"}


class _Collected:
    """Stands in for the worker pool: keeps the segments the segmenter hands out."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self.ready = True

    def submit(self, segment: Segment, end: tuple[str, int]) -> None:
        self.segments.append(segment)


class _Raw:
    def __init__(self, source: FileSource):
        self.source = source

    def raw_stream(self) -> Iterator[RawEvent | None]:
        return self.source.raw_events()


def worker_segments(paths: Sequence[Path], start: int = 4) -> list[Segment]:
    """The segments the router would hand its decode workers for these binlog files
    (after checking the segmenter's compiled walk routes them as its Python loop does)."""
    pool = _Collected()
    source = FileSource(paths, start_file=paths[0].name, start_pos=start)
    for _ in Segmenter(EventDecoder(), pool).events(_Raw(source)):  # type: ignore[arg-type]
        pass
    walk = compiled_walk()
    if walk is not None:
        events = [raw for raw in FileSource(paths, start_file=paths[0].name,
                                            start_pos=start).raw_events() if raw is not None]
        for seed, options in enumerate(({}, {"transaction_bytes": 2_000}, {"snapshot": True},
                                        {"ready": False}, {"filters": True})):
            assert routed(events, seed, walk, **options) == \
                routed(events, seed, None, **options), options
    return pool.segments


def compiled_walk() -> Any:
    """The segmenter's compiled walk (see :func:`required_module`)."""
    return required_module("changestream.parallel._plain_walk", "the segmenter's compiled walk")


def required_module(name: str, what: str) -> Any:
    """A compiled module; when it was not built, ``None``, or a failure when the test run
    must have everything (``CHANGESTREAM_REQUIRE_SERVERS=1``)."""
    module = compiled(name)
    if module is None and os.environ.get("CHANGESTREAM_REQUIRE_SERVERS") == "1" \
            and os.environ.get("CHANGESTREAM_PURE_PYTHON") != "1":
        raise AssertionError(f"{what} is not built (bash scripts/install.sh builds it with "
                             "Cython)")
    return module


class _Kept:
    """A snapshot's coordinator whose tracked tables change as events are read."""

    def __init__(self) -> None:
        self.tracked: set[tuple[str, str]] = set()
        self.version = 0


class _Batches:
    """Events in lists of random sizes, now and then idle, as a live source reads them;
    a snapshot's tracked tables (every table the events map) come and go between lists."""

    def __init__(self, events: list[RawEvent], seed: int, kept: _Kept | None,
                 decoder: EventDecoder | None = None):
        self.events, self.rng, self.kept = events, random.Random(seed), kept
        self.mapped = _mapped(events) if kept is not None or decoder is not None else set()
        self.decoder = decoder  # whose table filter changes between lists

    def raw_batches(self) -> Iterator[list[RawEvent] | None]:
        i = 0
        while i < len(self.events):
            size = self.rng.choice((1, 2, 3, 7, 50, 1000))
            yield list(self.events[i:i + size])
            i += size
            if self.kept is not None and self.rng.random() < 0.3:
                self.kept.version += 1
                self.kept.tracked = set() if self.kept.tracked else self.mapped
            if self.decoder is not None and self.rng.random() < 0.3:
                self.decoder.table_filter = _leaving_out(
                    self.mapped if self.rng.random() < 0.5 else set())
            if self.rng.random() < 0.1:
                yield None


def _leaving_out(tables: set[tuple[str, str]]) -> Any:
    """A table filter (a new one each time: the segmenter tells filters apart by identity)."""
    return lambda database, table: (database, table) not in tables


def _mapped(events: list[RawEvent]) -> set[tuple[str, str]]:
    """Half the tables the events' TABLE_MAPs name."""
    decoder = EventDecoder()
    names: set[tuple[str, str]] = set()
    for raw in events:
        if raw.data[4] in (et.FORMAT_DESCRIPTION, et.TABLE_MAP):
            with contextlib.suppress(ChangestreamError):
                event = decoder.decode(raw.data, raw.file, raw.offset)
                if isinstance(event, TableMapEvent):
                    names.add((event.schema.database, event.schema.table))
    return set(sorted(names)[::2])


def routed(events: list[RawEvent], seed: int, walk: Any, *, ready: bool = True,
           snapshot: bool = False, transaction_bytes: int = 4 << 20, filters: bool = False
           ) -> tuple[list[Any], list[Any]]:
    """What the segmenter makes of ``events`` with ``walk`` (the compiled walk's module,
    or ``None``: its Python loop alone), in lists cut with ``seed``: the events decoded
    here (type and place, or the error) and the segments (file, bytes, offsets, schemas)."""
    saved = segments._WALK
    segments._WALK = walk
    pool = _Collected()
    pool.ready = ready
    kept = _Kept() if snapshot else None
    out: list[Any] = []
    try:
        # Small segments: the limits are met on small files too.
        decoder = EventDecoder()
        segmenter = Segmenter(decoder, pool, segment_events=40, segment_bytes=20_000,
                              transaction_bytes=transaction_bytes, kept_here=kept)
        batches = _Batches(events, seed, kept, decoder if filters else None)
        for item in segmenter.events(batches):
            out.append(None if item is None else
                       (type(item).__name__, item.header.file, item.header.offset))
    except ChangestreamError as exc:
        out.append(str(exc))
    finally:
        segments._WALK = saved
    return out, [(s.file, s.data, list(s.offsets), s.payloads,
                  sorted((k, v.table) for k, v in (s.schemas or {}).items()))
                 for s in pool.segments]


def compare_worker_paths(segments: list[Segment], change_filter: ChangeFilter | None = None,
                         include_sql: bool = False) -> int | None:
    """Assert the compiled fast path gives the same runs as the general path for every
    segment; how many segments it took (``None`` where it was not built)."""
    settings = WorkerSettings(change_filter, include_sql, "changestream", True, 20_000, None)
    fast, general = _Worker(settings, 50), _Worker(settings, 50)
    general.encoder = None
    if compiled_encoder() is None:
        return None
    assert fast.encoder is not None
    for segment in segments:
        both = _assembled(general, fast, segment)
        if both is not None:
            where = f"segment at {segment.file} offset {segment.offsets[0]}"
            assert both[1] == both[0], where
    return fast.fast_segments


def _assembled(general: _Worker, fast: _Worker, segment: Segment) -> tuple[Any, Any] | None:
    """What the general path and the fast path make of ``segment``; ``None`` when the
    general path refuses it (a row image it cannot read), after checking that the fast path
    refuses it with the same error."""
    try:
        expected = general.assemble(segment, "T")
    except ChangestreamError as exc:
        with pytest.raises(type(exc)) as refused:
            fast.assemble(segment, "T")
        assert str(refused.value) == str(exc)
        return None
    return expected, fast.assemble(segment, "T")


def compiled_encoder() -> Any:
    """The compiled fast path's module (see :func:`required_module`)."""
    return required_module("changestream.parallel._segment_rows",
                           "the compiled decode worker path")


def compare_arrow_paths(segments: list[Segment], change_filter: ChangeFilter | None = None
                        ) -> int | None:
    """Assert the compiled Arrow fast path gives the same runs (the Spark sink's frames:
    schemas, spans, columns and types) as the general path for every segment, and that
    each path's in-process frames (a backfill unit's worker) are what its bytes read back
    as; how many segments it took (``None`` where it was not built)."""
    from changestream.sinks.spark.frames import decode_runs
    from changestream.sinks.spark.worker_encoding import ARROW_FRAMES, IN_PROCESS_ARROW_FRAMES

    settings = WorkerSettings(change_filter, False, ARROW_FRAMES, True, 20_000, None)
    fast, general = _Worker(settings, 50), _Worker(settings, 50)
    general.encoder = None
    in_process = replace(settings, record_format=IN_PROCESS_ARROW_FRAMES)
    fast_here, general_here = _Worker(in_process, 50), _Worker(in_process, 50)
    general_here.encoder = None
    if compiled("changestream.sinks.spark._arrow_walk") is None:
        compiled_encoder()  # fails when everything must be there
        return None
    assert fast.encoder is not None
    for segment in segments:
        both = _assembled(general, fast, segment)
        if both is None:
            continue
        expected, got = both
        where = f"segment at {segment.file} offset {segment.offsets[0]}"
        for here, runs in ((general_here, expected), (fast_here, got)):
            _same_frames([run.records for run in here.assemble(segment, "T")],
                         [decode_runs(run.records) for run in runs], f"{where}, in-process")
        assert len(got) == len(expected), where
        for mine, theirs in zip(got, expected, strict=True):
            assert (mine.changes, mine.transactions, mine.last_commit_ts, mine.gtids,
                    mine.file, mine.end, mine.tables) == (
                theirs.changes, theirs.transactions, theirs.last_commit_ts, theirs.gtids,
                theirs.file, theirs.end, theirs.tables), where
            _same_frames([decode_runs(mine.records)], [decode_runs(theirs.records)], where)
    return fast.fast_segments


def _same_frames(got: list[Any], wanted: list[Any], where: str) -> None:
    """Assert two lists of runs' frames (schema, spans, Arrow table) are equal."""
    assert len(got) == len(wanted), where
    for frames, expected in zip(got, wanted, strict=True):
        assert [(s.qualified_name, s.columns, spans) for s, spans, _ in frames] == \
            [(s.qualified_name, s.columns, spans) for s, spans, _ in expected], where
        for (_, _, frame), (_, _, table) in zip(frames, expected, strict=True):
            assert frame.schema == table.schema, where
            if not frame.equals(table):
                for name in table.column_names:
                    assert frame.column(name).to_pylist() == \
                        table.column(name).to_pylist(), f"{where}: column {name}"
                raise AssertionError(f"{where}: frames differ")
