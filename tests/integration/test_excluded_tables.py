"""Rows of tables the filter leaves out are skipped before anything asks for their column
names or decodes them: under MINIMAL row metadata the schema history keeps only the tables
the filter reaches, and a row of another table once stopped the router ("carry no column
names ... the schema history does not know the table"), delivering nothing at all. Tested
with MINIMAL and FULL metadata, live and from files, with and without decode workers, with
``include``, ``exclude`` and column exclusions, and DDL on the excluded table in between."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command

pytestmark = pytest.mark.integration


def _databases(server: Any, name: str) -> tuple[str, str]:
    a, b = f"{name[:58]}_a", f"{name[:58]}_b"
    server.execute([f"DROP DATABASE IF EXISTS `{a}`", f"DROP DATABASE IF EXISTS `{b}`",
                    f"CREATE DATABASE `{a}`", f"CREATE DATABASE `{b}`"])
    return a, b


def _filter(kind: str, a: str, b: str) -> ChangeFilter:
    if kind == "include":
        return ChangeFilter(include=[b])
    if kind == "exclude":
        return ChangeFilter(exclude=[a])
    return ChangeFilter(include=[b], exclude_columns=[f"{b}.t.secret"])


@pytest.mark.parametrize("source", ["live", "files"])
@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "decode-workers"])
@pytest.mark.parametrize("kind", ["include", "exclude", "exclude-columns"])
def test_rows_of_an_excluded_table_do_not_stop_the_included_ones(
        server: Any, fresh_database: str, row_metadata: str, tmp_path: Path, source: str,
        workers: int, kind: str) -> None:
    a, b = _databases(server, fresh_database)
    # The excluded table is older than the start: neither the history nor the files know it.
    server.execute([f"CREATE TABLE `{a}`.t (id INT PRIMARY KEY, v INT)",
                    f"INSERT INTO `{a}`.t VALUES (0, 0)"])
    start = server.binlog_position()
    server.execute([
        f"CREATE TABLE `{b}`.t (id INT PRIMARY KEY, v INT, secret VARCHAR(10))",
        f"INSERT INTO `{a}`.t VALUES (1, 10)",
        f"INSERT INTO `{b}`.t VALUES (1, 10, 's1')",
        # DDL on the excluded table between rows of both.
        f"ALTER TABLE `{a}`.t ADD COLUMN w VARCHAR(5) FIRST",
        f"INSERT INTO `{a}`.t VALUES ('x', 2, 20)",
        "BEGIN",
        f"UPDATE `{a}`.t SET v = v + 1",
        f"UPDATE `{b}`.t SET v = 11 WHERE id = 1",
        f"INSERT INTO `{b}`.t VALUES (2, 20, 's2')",
        f"DELETE FROM `{a}`.t WHERE id = 0",
        "COMMIT",
        f"DROP TABLE `{a}`.t",
        f"DELETE FROM `{b}`.t WHERE id = 2",
    ])
    url = server.url if source == "live" else f"file://{server.binlog_dir}"
    out = tmp_path / "out.jsonl"
    Router(RouterSettings(source=url, start=f"{start[0]}:{start[1]}", until="caught-up",
                          filter=_filter(kind, a, b), decode_workers=workers,
                          decode_workers_wait=True,
                          schema=HistorySettings("auto", shadow_command(server))),
           JsonLinesSink(out)).run()
    records = [r for r in map(orjson.loads, out.read_bytes().splitlines())
               if r["database"] in (a, b)]
    assert {r["database"] for r in records} == {b}
    row1 = {"id": 1, "v": 10, "secret": "s1"}
    row2 = {"id": 2, "v": 20, "secret": "s2"}
    expected = [("insert", None, row1), ("update", row1, {**row1, "v": 11}),
                ("insert", None, row2), ("delete", row2, None)]
    if kind == "exclude-columns":
        expected = [(op, _without_secret(before), _without_secret(after))
                    for op, before, after in expected]
    assert [(r["op"], r["before"], r["after"]) for r in records if r["op"] != "ddl"] \
        == expected
    assert [r["sql"].split("(")[0].strip() for r in records if r["op"] == "ddl"] \
        == [f"CREATE TABLE `{b}`.t"]


def _without_secret(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {k: v for k, v in row.items() if k != "secret"}
