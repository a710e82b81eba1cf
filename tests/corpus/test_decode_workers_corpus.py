"""Decode workers on the real corpus binlogs: the router writes the same change records with
worker processes as without them (but for ``ts``), and a worker's decoding error reaches the
router as the same one-line error, naming the file and the offset."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.model.errors import BinlogError
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.sources.files import FileSource
from changestream.transactions.filters import ChangeFilter
from tests.corpus.reference import CORPUS, corpus_params
from tests.segments import (
    FAST_PATH_FILES,
    compare_worker_paths,
    compiled_encoder,
    worker_segments,
)


def _route(path: Path, out: Path, workers: int, **settings: Any) -> list[dict[str, Any]]:
    Router(RouterSettings(source=f"file://{path}", until="caught-up", decode_workers=workers,
                          decode_workers_wait=True,
                          **settings), JsonLinesSink(out, fsync=False)).run()
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    for record in records:
        record.pop("ts")
    return records


@pytest.mark.parametrize("relative", corpus_params())
def test_workers_write_the_same_records(relative: str, tmp_path: Path) -> None:
    path = CORPUS / relative
    try:
        list(FileSource([path]))
    except BinlogError:
        pytest.skip(f"{relative} is refused by the reader")
    alone = _route(path, tmp_path / "alone.jsonl", 0, include_sql=True)
    workers = _route(path, tmp_path / "workers.jsonl", 2, include_sql=True)
    assert workers == alone


def test_workers_take_the_plain_transactions(tmp_path: Path) -> None:
    path = CORPUS / "rust_mysql_common/mariadb-bin.000001"
    router = Router(RouterSettings(source=f"file://{path}", until="caught-up",
                                   decode_workers=2,
                                   decode_workers_wait=True), JsonLinesSink(tmp_path / "o.jsonl"))
    router.run()
    assert router.stats.delivery.changes_delivered > 0
    assert router.stats.reading.worker_segments >= 1  # its DML transactions went to a worker


def test_workers_name_a_gzipped_copy_as_the_router_does(tmp_path: Path) -> None:
    """An archived copy (``NAME.gz``): the records' positions name the binlog file as the
    server does, without the ``.gz``, with workers as without."""
    source = CORPUS / "rust_mysql_common/mariadb-bin.000001"
    path = tmp_path / f"{source.name}.gz"
    with source.open("rb") as raw, gzip.open(path, "wb") as packed:
        shutil.copyfileobj(raw, packed)
    alone = _route(path, tmp_path / "alone.jsonl", 0)
    workers = _route(path, tmp_path / "workers.jsonl", 2)
    assert workers == alone
    assert {r["position"]["file"] for r in workers} == {source.name}


def test_a_worker_error_names_file_and_offset(tmp_path: Path) -> None:
    source = CORPUS / "rust_mysql_common/mariadb-bin.000001"
    data = bytearray(source.read_bytes())
    # The first WRITE_ROWS event's last body byte (before the CRC32) flipped.
    offset = 4
    while data[offset + 4] not in (23, 30):
        offset += int.from_bytes(data[offset + 9:offset + 13], "little")
    size = int.from_bytes(data[offset + 9:offset + 13], "little")
    data[offset + size - 5] ^= 0xFF
    bad = tmp_path / "mariadb-bin.000001"
    bad.write_bytes(bytes(data))
    errors = []
    for workers in (0, 2):
        with pytest.raises(BinlogError) as info:
            _route(bad, tmp_path / f"o{workers}.jsonl", workers)
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert "checksum mismatch" in errors[1] and f"at offset {offset}" in errors[1]





@pytest.mark.parametrize("relative", corpus_params())
@pytest.mark.parametrize("include_sql", [False, True])
def test_fast_path_encodes_as_the_general_path(relative: str, include_sql: bool) -> None:
    """A worker's compiled fast path gives the same runs of records as its general path
    (decoder, assembler, record encoder) for every segment of every corpus file."""
    path = CORPUS / relative
    try:
        segments = worker_segments([path])
    except BinlogError:
        pytest.skip(f"{relative} is refused by the reader")
    fast = compare_worker_paths(segments, include_sql=include_sql)
    if fast is None:
        pytest.skip("the compiled decode worker path is not built")
    if relative in FAST_PATH_FILES:
        assert segments and fast == len(segments)


def test_fast_path_filters_tables_and_leaves_column_filters_to_the_general_path() -> None:
    segments = worker_segments([CORPUS / "rust_mysql_common/mariadb-bin.000001"])
    assert segments
    if compiled_encoder() is None:
        pytest.skip("the compiled decode worker path is not built")
    # Tables filtered out: still the fast path, and the same records as the general path.
    for tables in (ChangeFilter(exclude=["*.outbox"]), ChangeFilter(include=["toddy_test"])):
        assert compare_worker_paths(segments, tables) == len(segments)
    # Columns left out: the general path builds those images.
    columns = ChangeFilter(exclude_columns=["toddy_test.outbox.*"])
    assert compare_worker_paths(segments, columns) == 0


def test_a_worker_that_dies_is_reported_and_the_rest_stop(tmp_path: Path) -> None:
    """Workers are plain interpreters (no multiprocessing resource tracker beside them); one
    killed from outside is a SourceError naming it and its exit code, and closing the pool
    ends the others."""
    import os
    import signal
    import threading

    from changestream.model.errors import SourceError
    from changestream.parallel.decode_workers import DecodeWorkers, WorkerSettings

    def children() -> set[int]:
        return {int(c) for c in Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
                .read_text().split()}

    segments = worker_segments([CORPUS / "rust_mysql_common/mariadb-bin.000001"])
    before = children()  # e.g. test servers another test started
    workers = DecodeWorkers(2, WorkerSettings(None, False, "changestream", True, 20_000, None))
    answers: list[tuple[int, Any]] = []
    arrived = threading.Condition()

    def deliver(worker: int, answer: Any) -> None:
        with arrived:
            answers.append((worker, answer))
            arrived.notify_all()

    try:
        assert children() - before == {p.pid for p in workers._processes}
        workers.answer_to(deliver)
        segment = segments[0]
        at = 0
        for _ in segment.offsets[:-1]:
            at += int.from_bytes(segment.data[at + 9:at + 13], "little")
        workers.submit(segment, (segment.file, segment.offsets[-1] + len(segment.data) - at))
        with arrived:
            assert arrived.wait_for(lambda: answers, 30)
        assert answers[0][0] == 0 and answers[0][1][0].changes > 0
        os.kill(workers._processes[1].pid, signal.SIGKILL)
        with arrived:
            assert arrived.wait_for(lambda: len(answers) == 2, 30)
        worker, lost = answers[1]
        assert worker == 1 and isinstance(lost, SourceError)
        assert str(lost).startswith("decode worker 1 stopped (exit code -9)")
    finally:
        workers.close()
    for process in workers._processes:
        assert process.wait(5) is not None


def test_annotations_nobody_reads_are_not_sent_to_workers(tmp_path: Path) -> None:
    """Without include_sql the statement annotations stay out of the segments (as a MariaDB
    server asked not to send them leaves them out), and the records are the same."""
    from changestream.decoding import event_types as et
    from changestream.decoding.event_decoder import EventDecoder
    from changestream.parallel.segments import Segmenter
    from tests.segments import _Collected, _Raw

    path = CORPUS / "rust_mysql_common/mariadb-bin.000001"
    kinds: dict[bool, set[int]] = {}
    for keep in (True, False):
        pool = _Collected()
        source = FileSource([path])
        for _ in Segmenter(EventDecoder(), pool,  # type: ignore[arg-type]
                           annotations=keep).events(_Raw(source)):
            pass
        codes = set()
        for segment in pool.segments:
            at = 0
            for _offset in segment.offsets:
                codes.add(segment.data[at + 4])
                at += int.from_bytes(segment.data[at + 9:at + 13], "little")
        kinds[keep] = codes
    assert et.MARIADB_ANNOTATE_ROWS in kinds[True]
    assert kinds[False] == kinds[True] - {et.MARIADB_ANNOTATE_ROWS}
    assert _route(path, tmp_path / "w.jsonl", 2) == _route(path, tmp_path / "a.jsonl", 0)
