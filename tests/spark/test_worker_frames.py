"""A decode worker's Arrow frames join the run of their table whatever key the run's first
schema gave the table: a snapshot may plan a table as keyless whose binlog TABLE_MAP names
a primary key (a NOT NULL unique key), with the same columns and types."""

from __future__ import annotations

from changestream.model.changes import EncodedRun, Position
from changestream.sinks.spark.frames import BEFORE_PREFIX, encode_runs, table_runs
from tests.spark.conftest import Binlog, simple_schema

KEYED = simple_schema("u")
KEYLESS = simple_schema("u", pk=False)


def _worker_run(log: Binlog) -> EncodedRun:
    part = log.transaction([("insert", KEYED, None, {"id": 2, "name": "b", "qty": 2}),
                            ("update", KEYED, {"id": 2, "name": "b", "qty": 2},
                             {"id": 2, "name": "c", "qty": 3})])
    records = encode_runs(table_runs([part], all_before=True))
    return EncodedRun(records, 2, 1, None, Position(log.file, log.pos))


def test_a_worker_frame_joins_a_keyless_run() -> None:
    log = Binlog()
    first = log.transaction([("insert", KEYLESS, None, {"id": 1, "name": "a", "qty": 1})])
    (run,) = table_runs([first, _worker_run(log)])
    assert run.schema.primary_key is None
    frame = run.frame
    assert frame.num_rows == 3
    assert [c for c in frame.column_names if c.startswith(BEFORE_PREFIX)] == \
        [f"{BEFORE_PREFIX}{i}" for i in range(3)]
    assert frame.column(f"{BEFORE_PREFIX}1").to_pylist() == [None, None, "b"]


def test_a_worker_frame_joins_a_keyed_run() -> None:
    log = Binlog()
    first = log.transaction([("insert", KEYED, None, {"id": 1, "name": "a", "qty": 1})])
    (run,) = table_runs([first, _worker_run(log)])
    frame = run.frame
    assert [c for c in frame.column_names if c.startswith(BEFORE_PREFIX)] == \
        [f"{BEFORE_PREFIX}0"]
    assert frame.column("qty").to_pylist() == [1, 2, 3]
