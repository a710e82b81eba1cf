"""Decode workers for the Spark sink: a worker turns plain transactions into the sink's own
Arrow frames (changestream.sinks.spark.frames.encode_runs), and the frames a batch gives are
the ones the router's process makes from change objects, row for row and type for type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from changestream.delivery.adapter import SinkCapabilities
from changestream.model.changes import Batch, EncodedRun
from changestream.model.errors import BinlogError, SinkError
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.spark.frames import table_runs
from changestream.sinks.spark.worker_encoding import ARROW_FRAMES
from changestream.sources.files import FileSource
from tests.corpus.reference import CORPUS, corpus_params
from tests.segments import FAST_PATH_FILES, compare_arrow_paths, worker_segments


class _ArrowSink:
    """Takes batches as the Spark sink does (decode workers' runs as Arrow frames) and
    keeps each table's rows."""

    capabilities = SinkCapabilities(encoded_format=ARROW_FRAMES)

    def __init__(self) -> None:
        self.frames: dict[str, list[pa.Table]] = {}
        self.spans: dict[str, list[tuple[Any, int, bool]]] = {}
        self.encoded_runs = 0

    def open(self) -> None:
        return None

    def write(self, batch: Batch) -> None:
        self.encoded_runs += sum(isinstance(p, EncodedRun) for p in batch.parts)
        for run in table_runs(batch.parts):
            self.frames.setdefault(run.name, []).append(run.frame)
            self.spans.setdefault(run.name, []).extend(
                (s.position, s.rows, s.snapshot) for s in run.spans)

    def close(self) -> None:
        pass


def _route(path: Path, workers: int) -> _ArrowSink:
    sink = _ArrowSink()
    Router(RouterSettings(source=f"file://{path}", until="caught-up", decode_workers=workers,
                          decode_workers_wait=True), sink).run()
    return sink


def _rows(sink: _ArrowSink) -> dict[str, list[dict[str, Any]]]:
    return {name: [row for f in frames for row in f.to_pylist()]
            for name, frames in sink.frames.items()}


def _types(sink: _ArrowSink) -> dict[str, list[pa.Schema]]:
    return {name: [f.schema for f in frames] for name, frames in sink.frames.items()}


def test_a_worker_gives_the_frames_the_router_makes() -> None:
    path = CORPUS / "rust_mysql_common/mariadb-bin.000001"
    if not path.exists():
        pytest.skip(f"{path} is not there (../shared/corpus)")
    alone, workers = _route(path, 0), _route(path, 2)
    assert workers.encoded_runs >= 1 and alone.encoded_runs == 0
    assert _rows(workers) == _rows(alone)
    assert {n: set(s) for n, s in _types(workers).items()} == \
        {n: set(s) for n, s in _types(alone).items()}
    assert workers.spans.keys() == alone.spans.keys()
    for name in alone.spans:  # every transaction's rows, at its position
        assert sum(r for _, r, _ in workers.spans[name]) == \
            sum(r for _, r, _ in alone.spans[name])
        assert {(p.file, p.pos) for p, _, _ in workers.spans[name]} == \
            {(p.file, p.pos) for p, _, _ in alone.spans[name]}


@pytest.mark.parametrize("relative", corpus_params())
def test_frames_are_the_same_with_workers_on_every_corpus_file(relative: str) -> None:
    path = CORPUS / relative
    try:
        list(FileSource([path]))
    except BinlogError:
        pytest.skip(f"{relative} is refused by the reader")
    try:
        alone = _route(path, 0)
    except Exception as exc:  # a table the Spark sink refuses refuses it both ways
        with pytest.raises(type(exc)):
            _route(path, 2)
        return
    workers = _route(path, 2)
    assert _rows(workers) == _rows(alone)


@pytest.mark.parametrize("relative", corpus_params())
def test_compiled_frames_are_the_general_paths_on_every_corpus_file(relative: str) -> None:
    """The compiled Arrow fast path gives, segment by segment, the frames the worker's
    general path makes from change objects (or leaves the segment to it)."""
    path = CORPUS / relative
    try:
        segments = worker_segments([path])
    except BinlogError:
        pytest.skip(f"{relative} is refused by the reader")
    try:
        taken = compare_arrow_paths(segments)
    except SinkError:  # a table the Spark sink refuses: the general path says so
        return
    if taken is None:
        pytest.skip("the compiled Arrow path is not built")
    if relative in FAST_PATH_FILES:
        assert segments and taken == len(segments)
