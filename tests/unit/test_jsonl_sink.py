"""The JSON-lines sink writes each batch whole, in chunks, takes a failed one back, and
cuts off a line a crash left half-written."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
from pathlib import Path

import pytest

from changestream.encoding.records import encode_lines, iter_lines
from changestream.model.changes import Batch, Change, TransactionInfo, TransactionPart
from changestream.model.errors import SinkError
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


def _ids(path: Path) -> list[int]:
    return [json.loads(line)["after"]["id"] for line in path.read_bytes().splitlines()]


def test_a_restart_cuts_the_file_back_to_the_length_saved_with_the_position(
        tmp_path: Path) -> None:
    """What was written after the last saved position is cut off: the router writes it
    again, so the file holds every change once."""
    path = tmp_path / "out.jsonl"
    sink = JsonLinesSink(path, fsync=False)
    sink.restore(None)
    sink.open()
    sink.write(_batch(_changes(2, "INSERT ...")))
    saved = sink.durable_state()
    assert saved == {"path": str(path.resolve()), "length": path.stat().st_size}
    sink.write(_batch(_changes(3, "INSERT ...")))  # never acknowledged: the crash
    sink.close()
    again = JsonLinesSink(path, fsync=False)
    again.restore(saved)
    again.open()
    again.write(_batch(_changes(3, "INSERT ...")))
    again.close()
    assert _ids(path) == [0, 1, 0, 1, 2]


def test_a_state_saved_for_another_file_cuts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"after":{"id":7}}\n')
    sink = JsonLinesSink(path, fsync=False)
    sink.restore({"path": str(tmp_path / "other.jsonl"), "length": 0})
    sink.open()
    sink.close()
    assert _ids(path) == [7]


def test_a_file_shorter_than_what_was_acknowledged_is_refused(tmp_path: Path) -> None:
    from changestream.model.errors import SinkError

    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"after":{"id":7}}\n')
    sink = JsonLinesSink(path, fsync=False)
    sink.restore({"path": str(path.resolve()), "length": 500})
    with pytest.raises(SinkError, match=r"holds 19 bytes but the position file says 500"):
        sink.open()


def test_a_file_rotated_away_is_written_on_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    sink = JsonLinesSink(path, fsync=False)
    sink.restore({"path": str(path.resolve()), "length": 500})
    sink.open()
    sink.write(_batch(_changes(1, "INSERT ...")))
    sink.close()
    assert _ids(path) == [0]


def test_a_crash_before_the_first_position_cuts_back_to_where_the_first_start_found_it(
        tmp_path: Path) -> None:
    """The router saves the file's state on its first start, before any batch: batches
    written before the first position was saved are cut off on the restart."""
    from changestream.delivery.position_store import PositionStore, open_sink

    path, position_file = tmp_path / "out.jsonl", tmp_path / "position.json"
    path.write_bytes(b'{"after":{"id":7}}\n')  # from before: kept
    store = PositionStore(position_file)
    sink = JsonLinesSink(path, fsync=False)
    assert open_sink(sink, store, store.load()) is None
    sink.write(_batch(_changes(2, "INSERT ...")))  # the crash comes before its position
    sink.close()
    again_store = PositionStore(position_file)
    again = JsonLinesSink(path, fsync=False)
    open_sink(again, again_store, again_store.load())
    again.write(_batch(_changes(2, "INSERT ...")))
    again.close()
    assert _ids(path) == [7, 0, 1]



def _resident_pages(path: Path) -> int:
    """How many of ``path``'s pages the OS page cache holds: mincore(2) of a mapping of it
    (mapping reads nothing)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    with path.open("rb") as f:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
        assert address not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            vector = (ctypes.c_ubyte * pages)()
            assert libc.mincore(address, size, vector) == 0, ctypes.get_errno()
        finally:
            libc.munmap(address, size)
    return sum(byte & 1 for byte in vector)


def _file_system(path: Path) -> str:
    """The type of the file system ``path`` is on (/proc/self/mounts' longest match)."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, fs_type = line.split()[:3]
        if str(path).startswith(point.rstrip("/") + "/") and len(point) > len(best):
            best, kind = point, fs_type
    return kind


@pytest.mark.skipif(not hasattr(os, "posix_fadvise") or not Path("/proc/self/mounts").exists(),
                    reason="posix_fadvise and /proc are Linux's")
def test_fsynced_batches_leave_the_page_cache(tmp_path: Path) -> None:
    if _file_system(tmp_path) in ("tmpfs", "ramfs"):
        pytest.skip(f"{tmp_path} is in memory: its pages are the file")
    kept, dropped = tmp_path / "kept.jsonl", tmp_path / "dropped.jsonl"
    for path, drop in ((kept, False), (dropped, True)):
        sink = JsonLinesSink(path, drop_cache=drop)
        sink.open()
        for _ in range(3):
            sink.write(_batch(_changes(2000, "INSERT ...")))
        sink.close()
    assert kept.stat().st_size == dropped.stat().st_size > 100 * mmap.PAGESIZE
    assert _resident_pages(kept) > 100
    assert _resident_pages(dropped) == 0
    assert kept.read_bytes().count(b"\n") == dropped.read_bytes().count(b"\n") == 6000


def test_boolean_options_are_taken_as_text_too(tmp_path: Path) -> None:
    sink = JsonLinesSink(tmp_path / "out.jsonl", fsync="false", drop_cache="no")
    assert sink.fsync is False and sink.drop_cache is False
    assert JsonLinesSink(tmp_path / "out.jsonl", fsync="TRUE").fsync is True
    with pytest.raises(SinkError, match=r"jsonl sink: option fsync='sometimes' is not true "
                                        r"or false"):
        JsonLinesSink(tmp_path / "out.jsonl", fsync="sometimes")
