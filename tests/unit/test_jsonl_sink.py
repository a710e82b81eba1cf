"""The JSON-lines sink writes each batch whole, in chunks, takes a failed one back, and
cuts off a line a crash left half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from changestream.delivery.records import encode_lines, iter_lines
from changestream.model.changes import Batch, Change, TransactionInfo, TransactionPart
from changestream.sinks.jsonl import JsonLinesSink

INFO = TransactionInfo("0-1-7", "0-1-7", 3, None, 3, 1, "mariadb-bin.000001", 4, 900)


def _changes(n: int, sql: str) -> list[Change]:
    return [Change("insert", "db", "t", None, {"id": i, "v": "x" * 10}, {"id": i}, sql,
                   "mariadb-bin.000001", 100, i, seq=i, last=i == n - 1, transaction=INFO)
            for i in range(n)]


def _batch(changes: list[Change]) -> Batch:
    return Batch(1, [TransactionPart(INFO, changes)], None)


def test_lines_are_the_records_of_the_batch_in_order(tmp_path: Path) -> None:
    # A long statement shared by every row (a multi-row INSERT): several chunks.
    quote, backslash = chr(34), chr(92)  # escaped in JSON
    changes = _changes(300, "INSERT INTO t VALUES " + ", ".join(
        f"({i}, 'é{quote}{backslash}\n')" for i in range(2000)))
    sink = JsonLinesSink(tmp_path / "out.jsonl", fsync=False)
    sink.open()
    sink.write(_batch(changes))
    sink.close()
    lines = (tmp_path / "out.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 300
    expected = encode_lines(changes, ts="now").splitlines(keepends=True)
    for line, want in zip(lines, expected, strict=True):
        got = json.loads(line)
        assert got.pop("ts") and json.loads(want).pop("sql") == got.pop("sql") == changes[0].sql
    assert [json.loads(line)["after"]["id"] for line in lines] == list(range(300))


def test_chunks_hold_whole_lines() -> None:
    changes = _changes(50, "x" * 5000)
    chunks = list(iter_lines(changes, ts="now", chunk_bytes=20_000))
    assert len(chunks) > 5
    assert all(chunk.endswith(b"\n") for chunk in chunks)
    assert b"".join(chunks) == encode_lines(changes, ts="now")


def test_a_batch_that_fails_halfway_is_taken_back(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    sink = JsonLinesSink(path, fsync=False)
    sink.open()
    sink.write(_batch(_changes(3, "INSERT ...")))
    before = path.read_bytes()
    bad = _changes(3000, "y" * 2000)
    bad[-1].after = {"id": object()}  # cannot be written: fails after megabytes of lines
    with pytest.raises(TypeError):
        sink.write(_batch(bad))
    sink.write(_batch(_changes(2, "INSERT ...")))
    sink.close()
    data = path.read_bytes()
    assert data.startswith(before)
    assert len(data.splitlines()) == 5


def test_a_line_half_written_by_a_crash_is_cut_off_on_open(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"after":{"id":1}}\n{"after":{"id":2}}\n{"after":{"id"')
    sink = JsonLinesSink(path, fsync=False)
    sink.open()
    sink.write(_batch(_changes(1, "INSERT ...")))
    sink.close()
    assert [json.loads(line)["after"]["id"] for line in path.read_bytes().splitlines()] == [
        1, 2, 0]


def test_a_file_that_is_only_a_torn_line_is_emptied(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"after":{"id":1')
    JsonLinesSink(path).open()
    assert path.read_bytes() == b""
