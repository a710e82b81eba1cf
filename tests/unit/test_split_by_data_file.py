"""Position delete rows split by the data file they name (the delete files' writer and the
key index both use it)."""
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")  # the unit tier runs without the [spark] extra too

from sinks.spark.iceberg.files import split_by_data_file  # noqa: E402


def _rows(pairs: list[tuple[str, int]]) -> Any:
    return pa.table({"file_path": [f for f, _ in pairs], "pos": [p for _, p in pairs]},
                    schema=pa.schema([("file_path", pa.string()), ("pos", pa.int64())]))


def test_unsorted_rows_are_split_per_file_each_sorted_by_position() -> None:
    parts = split_by_data_file(_rows([("b", 7), ("a", 3), ("b", 1), ("c", 0), ("a", 2)]))
    assert [(f, t.column("pos").to_pylist()) for f, t in parts] == [
        ("a", [2, 3]), ("b", [1, 7]), ("c", [0])]
    assert all(t.column("file_path").to_pylist() == [f] * t.num_rows for f, t in parts)


def test_no_rows_no_parts() -> None:
    assert split_by_data_file(_rows([])) == []
