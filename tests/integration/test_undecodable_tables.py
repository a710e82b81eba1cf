"""A table whose rows cannot be decoded: left out by a filter it stops nothing (its rows are
never decoded); read, it ends the run with the documented error (exit 3, one line naming
file and offset) on both decode paths, whatever is wrong (an unknown collation, an
unsupported column type, a malformed rows event).

The binlogs are real ones from the servers, with one table's events patched in a copy
(checksums fixed): the patched bytes stay undecodable whatever the decoder learns later.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.decoding import event_types as et
from changestream.decoding import field_types as ft
from changestream.decoding.collation_ids import COLLATIONS
from changestream.decoding.events import RowsEvent, TableMapEvent
from changestream.decoding.packed import read_packed_int
from changestream.model.errors import BinlogError
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.sources import FileSource
from changestream.transactions.filters import ChangeFilter

pytestmark = pytest.mark.integration

WORKERS = pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "decode-workers"])
DEFECTS = pytest.mark.parametrize("defect", ["collation", "column-type", "malformed"])
HEADER = 19
TABLE_MAP_POST_HEADER = 8
DEFAULT_CHARSET = 2  # TABLE_MAP optional metadata: the default collation, then exceptions
# A one-byte collation id neither server has.
UNKNOWN_COLLATION = max(i for i in range(200, 251) if i not in COLLATIONS)


@dataclass
class PatchedBinlog:
    path: Path
    good: str  # database whose rows decode
    bad: str  # database with the patched table
    bad_rows_offset: int  # the first rows event of the patched table


def _write_workload(server: Any, good: str, bad: str) -> Path:
    """The workload in a binlog file of its own; returns a copy of that file."""
    server.execute([
        f"DROP DATABASE IF EXISTS `{bad}`", f"CREATE DATABASE `{bad}`",
        f"CREATE TABLE `{good}`.t (id INT PRIMARY KEY, v VARCHAR(10))",
        f"CREATE TABLE `{bad}`.t (id INT PRIMARY KEY, n INT, "
        "s VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_bin)",
        "FLUSH BINARY LOGS",
        f"INSERT INTO `{good}`.t VALUES (1, 'before')",
        f"INSERT INTO `{bad}`.t VALUES (1, 1, 'x')",
        "BEGIN",
        f"INSERT INTO `{good}`.t VALUES (2, 'with')",
        f"INSERT INTO `{bad}`.t VALUES (2, 2, 'y')",
        f"INSERT INTO `{good}`.t VALUES (3, 'with')",
        "COMMIT",
        f"INSERT INTO `{good}`.t VALUES (4, 'after')",
    ])
    file = server.binlog_files()[-1]
    server.execute("FLUSH BINARY LOGS")
    return file


def _table_map_fields(body: bytes) -> tuple[int, int]:
    """Offsets in a TABLE_MAP body of its column types and of its default collation."""
    pos = TABLE_MAP_POST_HEADER
    pos += 1 + body[pos] + 1  # database name, NUL
    pos += 1 + body[pos] + 1  # table name, NUL
    ncols, pos = read_packed_int(body, pos)
    types = pos
    meta_len, pos = read_packed_int(body, pos + ncols)
    pos += meta_len + (ncols + 7) // 8
    while pos < len(body):
        kind = body[pos]
        length, value = read_packed_int(body, pos + 1)
        if kind == DEFAULT_CHARSET:
            assert body[value] < 251, "a one-byte collation id to patch"
            return types, value
        pos = value + length
    raise AssertionError("no DEFAULT_CHARSET in the TABLE_MAP (binlog_row_metadata=FULL?)")


def _patch(copy: Path, defect: str, bad: str) -> int:
    """Patch ``bad``.t's events in ``copy`` as ``defect`` says; the first rows event's
    offset."""
    data = bytearray(copy.read_bytes())
    source = FileSource([copy])
    events = [(e.header.offset, e.header.size, e) for e in source]
    first_rows = None
    for offset, size, event in events:
        if isinstance(event, TableMapEvent) and event.schema.database == bad:
            body = bytes(data[offset + HEADER:offset + size - 4])
            types, collation = _table_map_fields(body)
            if defect == "collation":
                data[offset + HEADER + collation] = UNKNOWN_COLLATION
            elif defect == "column-type":
                assert body[types + 1] == ft.LONG
                data[offset + HEADER + types + 1] = ft.TYPED_ARRAY
        elif isinstance(event, RowsEvent) and event.schema.database == bad:
            first_rows = first_rows if first_rows is not None else offset
            if defect == "malformed":
                body = bytes(data[offset + HEADER:offset + size - 4])
                column_count = source.decoder.rows_header(event.header.type_code, body)[2]
                assert data[offset + HEADER + column_count] == 3
                data[offset + HEADER + column_count] = 2  # two columns, the table has three
        else:
            continue
        crc = zlib.crc32(data[offset:offset + size - 4])
        data[offset + size - 4:offset + size] = struct.pack("<I", crc)
    copy.write_bytes(bytes(data))
    assert first_rows is not None
    return first_rows


@pytest.fixture
def patched(request: pytest.FixtureRequest, server: Any, fresh_database: str,
            tmp_path: Path) -> PatchedBinlog:
    defect = request.param
    good, bad = fresh_database, fresh_database[:60] + "_bad"
    original = _write_workload(server, good, bad)
    copy = tmp_path / "binlogs" / original.name
    copy.parent.mkdir()
    shutil.copyfile(original, copy)
    return PatchedBinlog(copy, good, bad, _patch(copy, defect, bad))


def _run(binlog: PatchedBinlog, out: Path, workers: int, change_filter: ChangeFilter) -> None:
    Router(RouterSettings(source=f"file://{binlog.path}", until="caught-up",
                          filter=change_filter, decode_workers=workers, decode_workers_wait=True),
           JsonLinesSink(out)).run()


@pytest.mark.parametrize("patched", ["collation", "column-type", "malformed"], indirect=True)
@WORKERS
def test_an_excluded_undecodable_table_stops_nothing(patched: PatchedBinlog, tmp_path: Path,
                                                     workers: int) -> None:
    out = tmp_path / "out.jsonl"
    _run(patched, out, workers, ChangeFilter(exclude=[patched.bad]))
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [(r["table"], r["after"]["id"], r["after"]["v"]) for r in records] == [
        ("t", 1, "before"), ("t", 2, "with"), ("t", 3, "with"), ("t", 4, "after")]
    assert {r["database"] for r in records} == {patched.good}


@pytest.mark.parametrize("patched", ["collation", "column-type", "malformed"], indirect=True)
@WORKERS
def test_an_undecodable_table_read_is_a_binlog_error_at_its_rows_event(
        patched: PatchedBinlog, tmp_path: Path, workers: int) -> None:
    with pytest.raises(BinlogError) as error:
        _run(patched, tmp_path / "out.jsonl", workers, ChangeFilter())
    assert (error.value.file, error.value.offset) == (str(patched.path),
                                                     patched.bad_rows_offset)
    assert "\n" not in str(error.value)


_REASONS = {"collation": f"unknown collation id {UNKNOWN_COLLATION}",
            "column-type": "TYPED_ARRAY", "malformed": "columns but the table map"}


@pytest.mark.parametrize("patched", ["collation", "column-type", "malformed"], indirect=True)
@WORKERS
def test_run_ends_with_exit_3_and_one_line_naming_file_and_offset(
        patched: PatchedBinlog, tmp_path: Path, workers: int, request: Any) -> None:
    defect = request.node.callspec.params["patched"]
    env = {**os.environ, "CHANGESTREAM_SOURCE_DECODE_WORKERS": str(workers)}
    result = subprocess.run(
        [sys.executable, "-m", "changestream.cli", "run", "--source", f"file://{patched.path}",
         "--sink", f"jsonl:{tmp_path / 'out.jsonl'}", "--until", "caught-up",
         "--position-file", str(tmp_path / "position.json")],
        capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert _REASONS[defect] in lines[0]
    assert f"{patched.path} at offset {patched.bad_rows_offset}" in lines[0]
    assert patched.bad in lines[0] or defect == "malformed"


def test_the_patched_collation_id_is_unknown() -> None:
    assert UNKNOWN_COLLATION not in COLLATIONS and UNKNOWN_COLLATION < 2048
    assert et.TABLE_MAP == 19
