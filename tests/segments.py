"""Test helper: a decode worker's fast path against its general path on binlog files."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from changestream.decoding.event_decoder import EventDecoder
from changestream.native import compiled
from changestream.parallel.decode_workers import Segment, WorkerSettings, _Worker
from changestream.parallel.segment_encoder import SegmentEncoder
from changestream.parallel.segments import Segmenter
from changestream.sources.files import FileSource
from changestream.sources.raw import RawEvent
from changestream.transactions.filters import ChangeFilter


class _Collected:
    """Stands in for the worker pool: keeps the segments the segmenter hands out."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    def submit(self, segment: Segment, end: tuple[str, int]) -> None:
        self.segments.append(segment)


class _Raw:
    def __init__(self, source: FileSource):
        self.source = source

    def raw_stream(self) -> Iterator[RawEvent | None]:
        return self.source.raw_events()


def worker_segments(paths: Sequence[Path], start: int = 4) -> list[Segment]:
    """The segments the router would hand its decode workers for these binlog files."""
    pool = _Collected()
    source = FileSource(paths, start_file=paths[0].name, start_pos=start)
    for _ in Segmenter(EventDecoder(), pool).events(_Raw(source)):  # type: ignore[arg-type]
        pass
    return pool.segments


def compare_worker_paths(segments: list[Segment], change_filter: ChangeFilter | None = None,
                         include_sql: bool = False) -> int:
    """Assert the fast path, in Python and compiled (where it was built), gives the same runs
    as the general path for every segment, and that the compiled one takes every segment
    the Python one takes; how many segments the fast path took."""
    settings = WorkerSettings(change_filter, include_sql, "changestream", True, 20_000, None)
    fast, general = _Worker(settings, 50), _Worker(settings, 50)
    general.encoder = None
    fast.encoder = SegmentEncoder(fast.decoder, change_filter, include_sql)
    native = compiled_encoder()
    built = _Worker(settings, 50) if native is not None else None
    if built is not None:
        built.encoder = native.SegmentEncoder(built.decoder, change_filter, include_sql)
    for segment in segments:
        expected = general.assemble(segment, "T")
        where = f"segment at {segment.file} offset {segment.offsets[0]}"
        assert fast.assemble(segment, "T") == expected, where
        if built is not None:
            assert built.assemble(segment, "T") == expected, f"compiled: {where}"
    if built is not None:
        assert built.fast_segments == fast.fast_segments
    return fast.fast_segments


def compiled_encoder() -> Any:
    """The compiled fast path's module; when it was not built, ``None``, or a failure when
    the test run must have everything (``CHANGESTREAM_REQUIRE_SERVERS=1``)."""
    module = compiled("changestream.parallel._segment_rows")
    if module is None and os.environ.get("CHANGESTREAM_REQUIRE_SERVERS") == "1" \
            and os.environ.get("CHANGESTREAM_PURE_PYTHON") != "1":
        raise AssertionError("the compiled decode worker path is not built "
                             "(bash scripts/install.sh builds it with Cython)")
    return module
