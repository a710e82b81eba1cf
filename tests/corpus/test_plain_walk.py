"""The segmenter's compiled walk (``changestream.parallel._plain_walk``) routes every
corpus file as its Python loop does: the same events decoded in the router, in the same
order, and the same segments (events, offsets, schemas), whatever lists the events come
in; with a snapshot's tracked tables changing while it reads, and while the workers
start. (Every test that takes :func:`tests.segments.worker_segments` of a live server's
files checks the same.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from changestream.decoding import event_types as et
from changestream.model.errors import ChangestreamError
from changestream.parallel.segments import Segmenter
from changestream.sources.files import FileSource
from changestream.sources.raw import RawEvent
from changestream.transactions.plain import opens_plain_group
from tests.corpus.reference import CORPUS, corpus_params
from tests.segments import FAST_PATH_FILES, compiled_walk, routed


def _walk() -> Any:
    module = compiled_walk()
    if module is None:
        pytest.skip("the compiled walk is not built")
    return module


def _events(*paths: Path) -> list[RawEvent]:
    try:
        return [raw for raw in FileSource(list(paths)).raw_events() if raw is not None]
    except ChangestreamError:
        pytest.skip("a file the source refuses: the walk never sees it")


@pytest.mark.parametrize("relative", corpus_params())
def test_the_compiled_walk_routes_as_the_python_loop(relative: str) -> None:
    walk = _walk()
    events = _events(CORPUS / relative)
    for seed in range(3):
        assert routed(events, seed, walk) == routed(events, seed, None), seed
    for options in ({"ready": False}, {"snapshot": True}, {"filters": True},
                    {"transaction_bytes": 600}):
        assert routed(events, 7, walk, **options) == routed(events, 7, None, **options)


# Files whose TABLE_MAPs do not log names: the schemas resolved here go with the segment.
MINIMAL_FILES = ["rust_mysql_common/minimal_row_metadata.000001",
                 "osheroff/mysql-bin.checksum-crc32"]


@pytest.mark.parametrize("relative", sorted(FAST_PATH_FILES) + MINIMAL_FILES)
def test_the_walk_routes_many_transactions_of_tables_it_has_seen(relative: str) -> None:
    """A file's transactions read 40 times over (the walk takes a TABLE_MAP seen before):
    with a snapshot's tables and the table filter changing as it reads, the walk must see
    a TABLE_MAP it knew become one decoded here, and back."""
    walk = _walk()
    events = _events(CORPUS / relative)
    first = next(n for n, raw in enumerate(events) if opens_plain_group(raw.data))
    body = [raw for raw in events[first:] if raw.data[4] != et.ROTATE]
    stream = events[:first] + body * 40
    for seed, options in enumerate(({}, {"snapshot": True}, {"snapshot": True},
                                    {"filters": True}, {"filters": True},
                                    {"transaction_bytes": 600})):
        fast = routed(stream, seed, walk, **options)
        assert fast == routed(stream, seed, None, **options), options
        assert fast[1] or "transaction_bytes" in options, "no segment: nothing was tested"


def test_the_walk_takes_most_events_and_keeps_a_segment_to_one_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two files read on from one to the other: each segment holds one file's events, and
    the walk, not the loop, took most of them (else this test would compare nothing)."""
    walk = _walk()
    events = _events(CORPUS / "osheroff/mysql-bin.checksum-crc32")
    # (without the ROTATE and FORMAT_DESCRIPTION between them, which end a segment anyway)
    again = [RawEvent("mysql-bin.000099", raw.offset, raw.data) for raw in events
             if raw.data[4] not in (et.ROTATE, et.FORMAT_DESCRIPTION)]
    both = [raw for raw in events if raw.data[4] != et.ROTATE] + again
    fast = routed(both, 0, walk)
    assert fast == routed(both, 0, None)
    files = [segment[0] for segment in fast[1]]
    assert files and set(files) == {events[0].file, "mysql-bin.000099"}
    assert sum(len(segment[2]) for segment in fast[1]) > len(both) // 2
    taken_by_loop: list[RawEvent] = []
    python_route = Segmenter._route

    def counted(self: Segmenter, raw: RawEvent, *args: Any) -> Any:
        taken_by_loop.append(raw)
        return python_route(self, raw, *args)

    monkeypatch.setattr(Segmenter, "_route", counted)
    assert routed(both, 0, walk) == fast
    assert 0 < len(taken_by_loop) < len(both) // 4, (len(taken_by_loop), len(both))
