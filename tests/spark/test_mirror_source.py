"""The mirror's MERGE source skips its window (a shuffle) only when every key changes once in
the batch and no update moves a key; otherwise the last change per key is picked in Spark."""

from __future__ import annotations

from typing import Any

import pytest

from changestream.sinks.spark.frames import table_runs
from changestream.sinks.spark.iceberg import IcebergLanding, one_change_per_key
from tests.spark.conftest import Binlog, simple_schema

T = simple_schema("orders")


def _row(i: int, qty: int = 1) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "qty": qty}


@pytest.mark.parametrize("changes, once", [
    ([("insert", None, _row(1)), ("insert", None, _row(2)),
      ("update", _row(3), _row(3, 9)), ("delete", _row(4), None)], True),
    ([("insert", None, _row(1)), ("update", _row(1), _row(1, 2))], False),
    ([("insert", None, _row(1)), ("delete", _row(1), None)], False),
    ([("update", _row(1), _row(2))], False),  # the key moved: the old one is deleted
    ([("insert", None, _row(1))], True),
])
def test_one_change_per_key(changes: list[tuple[str, Any, Any]], once: bool) -> None:
    log = Binlog()
    (run,) = table_runs([log.transaction([(op, T, before, after)])
                         for op, before, after in changes])
    assert one_change_per_key(run, run.frame) is once
    source = IcebergLanding()._keyed_source(run, "v", run.frame)
    assert ("row_number()" in source) is not once


def test_a_composite_key_counts_whole_keys() -> None:
    schema = simple_schema("lines", ("id", "qty", "name"))
    schema = type(schema)(schema.database, schema.table, schema.columns, primary_key=(0, 1),
                          names_logged=True)
    log = Binlog()
    rows = [{"id": 1, "qty": 1, "name": "a"}, {"id": 1, "qty": 2, "name": "b"}]
    (run,) = table_runs([log.transaction([("insert", schema, None, r) for r in rows])])
    assert one_change_per_key(run, run.frame)
    (run,) = table_runs([log.transaction([("insert", schema, None, rows[0]),
                                          ("update", schema, rows[0],
                                           {**rows[0], "name": "c"})])])
    assert not one_change_per_key(run, run.frame)
