"""Parallel chunk reads against real servers: several readers of one table, each with what
it must not share (the other parallel-read tests are parametrized in test_snapshot.py:
concurrent changes, kill -9, ALTERs in the middle)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.snapshot.encodings import JsonLinesChunks
from changestream.snapshot.reader import ChunkReader
from changestream.snapshot.settings import SnapshotSettings
from changestream.transactions.filters import ChangeFilter
from tests.integration.test_snapshot import _connect, _records, rebuilt, source_rows

pytestmark = pytest.mark.integration


def test_readers_of_one_table_each_read_with_row_functions_of_their_own(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """Three readers of one table whose rows go through a column's Python writer (DOUBLE)
    in the compiled row function, threads switched as often as can be: each reader has
    its own row function (the compiled one keeps its buffers in itself), so every record
    is whole and the rows are the source's."""
    db = fresh_database
    server.execute(f"CREATE TABLE `{db}`.f (id INT PRIMARY KEY, x DOUBLE, s VARCHAR(40))")
    values = ", ".join(f"({i}, {i / 7}, 'row {i}')" for i in range(1, 6001))
    server.execute(f"INSERT INTO `{db}`.f VALUES {values}")
    out = tmp_path / "out.jsonl"
    router = Router(RouterSettings(source=server.url, until="caught-up",
                                   filter=ChangeFilter(include=[db]), decode_workers=0,
                                   snapshot=SnapshotSettings(chunk_rows=300, readers=3)),
                    JsonLinesSink(out))
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        router.run()
    finally:
        sys.setswitchinterval(switch)
    records = _records(out)  # a torn record fails here
    assert rebuilt(records, "f", ("id",)) == source_rows(server, db, "f", ("id",))
    reader = ChunkReader(_connect(server), 300, JsonLinesChunks())
    other = ChunkReader(_connect(server), 300, JsonLinesChunks())
    try:
        plan = reader.plan(db, "f")
        assert plan is not None
        assert reader._own(plan).read_row is not other._own(plan).read_row
        assert reader._own(plan) is reader._own(plan)  # made once per plan
    finally:
        reader.close()
        other.close()
