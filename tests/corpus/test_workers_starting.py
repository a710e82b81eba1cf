"""While the decode workers start, the router decodes the transactions itself: every event
once, in binlog order, the same records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import Event
from changestream.parallel.decode_workers import Segment
from changestream.parallel.segments import Segmenter
from changestream.runtime.router import Router
from changestream.runtime.settings import RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.sources.files import FileSource
from changestream.sources.raw import RawEvent
from tests.corpus.reference import CORPUS

FILE = CORPUS / "rust_mysql_common/mariadb-bin.000001"


class _Starting:
    """A worker pool that is ready once ``ready_after`` raw events were read."""

    def __init__(self, ready_after: int | None):
        self.ready_after = ready_after
        self.ready = ready_after == 0
        self.segments: list[Segment] = []

    def submit(self, segment: Segment, end: tuple[str, int]) -> None:
        self.segments.append(segment)


class _Raw:
    def __init__(self, pool: _Starting):
        self.pool = pool

    def raw_stream(self) -> Iterator[RawEvent | None]:
        for read, raw in enumerate(FileSource([FILE]).raw_events(), 1):
            if read == self.pool.ready_after:
                self.pool.ready = True
            yield raw


def _split(ready_after: int | None, **segmenter: int) -> tuple[list[int], list[int]]:
    """The offsets of the events decoded here and of those handed to the pool."""
    pool = _Starting(ready_after)
    here = [item.header.offset
            for item in Segmenter(EventDecoder(), pool, **segmenter).events(  # type: ignore[arg-type]
                _Raw(pool)) if isinstance(item, Event)]
    return here, [offset for segment in pool.segments for offset in segment.offsets]


def _offsets() -> list[int]:
    return [raw.offset for raw in FileSource([FILE]).raw_events()]


def test_nothing_goes_to_workers_that_have_not_started() -> None:
    here, handed = _split(None)
    assert handed == []
    assert here == _offsets()


def test_workers_take_the_transactions_that_begin_once_they_are_ready() -> None:
    everything = _offsets()
    assert _split(0)[1], "a ready pool takes this file's DML transactions"
    midway = len(everything) // 2
    here, handed = _split(midway)
    assert handed
    assert min(handed) >= everything[midway - 1]  # none that began before it was ready
    assert any(offset < everything[midway - 1] for offset in _split(0)[1])
    assert sorted(here + handed) == everything  # each event once


def test_after_a_segment_s_bytes_decoded_here_the_workers_are_waited_for() -> None:
    """A big backlog is not decoded here while the workers start: past a segment's bytes
    (here 300) its transactions go to the workers, which take them once started."""
    everything = _offsets()
    here, handed = _split(None, segment_bytes=300)
    assert handed and here
    assert sorted(here + handed) == everything
    sizes = {raw.offset: len(raw.data) for raw in FileSource([FILE]).raw_events()}
    assert sum(sizes[offset] for offset in here if offset < min(handed)) >= 300


def _records(out: Path, **settings: Any) -> list[dict[str, Any]]:
    Router(RouterSettings(source=f"file://{FILE}", until="caught-up", **settings),
           JsonLinesSink(out, fsync=False)).run()
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    for record in records:
        record.pop("ts")
    return records


def test_the_router_writes_the_same_records_while_its_workers_start(tmp_path: Path) -> None:
    alone = _records(tmp_path / "alone.jsonl", decode_workers=0)
    assert alone
    assert _records(tmp_path / "starting.jsonl", decode_workers=2) == alone
    assert _records(tmp_path / "waited.jsonl", decode_workers=2,
                    decode_workers_wait=True) == alone
