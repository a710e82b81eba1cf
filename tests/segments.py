"""Test helper: a decode worker's fast path against its general path on binlog files."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from changestream.decoding.event_decoder import EventDecoder
from changestream.parallel.decode_workers import Segment, WorkerSettings, _Worker
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
    """Assert the fast path gives the same runs as the general path for every segment;
    how many segments the fast path took."""
    settings = WorkerSettings(change_filter, include_sql, "changestream", True, 20_000, None)
    fast, general = _Worker(settings, 50), _Worker(settings, 50)
    general.encoder = None
    for segment in segments:
        assert fast.assemble(segment, "T") == general.assemble(segment, "T"), \
            f"segment at {segment.file} offset {segment.offsets[0]}"
    return fast.fast_segments
