"""A live MariaDB workload through the real Router into Spark: the Iceberg mirror tables
equal the source tables value by value, and the changelogs (Iceberg and Parquet) hold every
committed change exactly once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.cli.scan import scan_transactions
from changestream.delivery.plugins import make_sink
from changestream.model.changes import Position
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.sinks.spark.positions import position_key
from changestream.sources.files import FileSource
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command

from .compare import (
    assert_mirror_equals_source,
    assert_same_rows,
    normalize,
    normalized,
    source_columns,
    source_rows,
)
from .workload import steps

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLES = {"items": "id", "nokey": None}  # table -> primary key column
RENAMED = {"items": {"vc": "title"}, "nokey": {"b": "label"}}  # old -> new, by the workload


def run_live(server: Any, db: str, sink: Any, start: tuple[str, int]) -> Router:
    """Start the router on ``db``, run the workload while it lands (pausing between steps
    so the changes come in many batches), wait until everything is landed, stop it."""
    router = Router(RouterSettings(
        source=server.url, start=f"{start[0]}:{start[1]}", filter=ChangeFilter([db]),
        batch=BatchSettings(max_changes=40, max_seconds=0.3)), sink)
    router.start()
    for group in steps(db):
        server.execute(["SET time_zone = '+00:00'", *group])
        time.sleep(0.4)
    end = server.binlog_position()
    deadline = time.monotonic() + 180
    while True:
        delivered = router.stats.delivery.delivered
        if delivered is not None and position_key(delivered) >= position_key(
                Position(end[0], end[1])):
            break
        assert time.monotonic() < deadline, f"not landed by {end}: at {delivered}"
        if not router.wait(0.2) and router._thread and router._thread.is_alive():
            continue
        pytest.fail("the router ended early")
    router.stop()
    assert router.wait(120)
    return router


def reference(server: Any, db: str, start: tuple[str, int], tmp_path: Path
              ) -> list[dict[str, Any]]:
    """The change records of ``db`` from the JSON-lines sink (what every landing must hold);
    rows logged without column names are named by a schema history."""
    out = tmp_path / "reference.jsonl"
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up", filter=ChangeFilter([db]),
                          schema=HistorySettings("auto", shadow_command(server))),
           JsonLinesSink(str(out))).run()
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]


def committed_counts(server: Any, db: str, start: tuple[str, int]) -> dict[str, Counter]:
    """Rows changed per committed transaction and table of ``db``, read from the binlog
    files by the scanner (independent of the router's change assembly)."""
    out: dict[str, Counter] = {}
    for t in scan_transactions(FileSource(server.binlog_files(), start_file=start[0],
                                          start_pos=start[1])):
        if t.status != "committed":
            continue
        for name, c in t.tables.items():
            if name.startswith(f"{db}."):
                out.setdefault(t.gtid, Counter())[name.split(".", 1)[1]] += sum(c.values())
    return out


def check_changelog(table: str, rows: list[dict[str, Any]],
                    records: list[dict[str, Any]], counts: dict[str, Counter]) -> None:
    """``rows`` (a landed changelog) hold each change of ``table`` exactly once."""
    keys = Counter((r["_transaction_id"], r["_seq"]) for r in rows)
    doubled = [k for k, n in keys.items() if n > 1]
    assert not doubled, f"{table}: changes landed twice: {doubled[:5]}"
    want = {(r["transaction"]["id"], r["transaction"]["seq"]): r["op"]
            for r in records if r["table"] == table and r["op"] != "ddl"}
    got = {(r["_transaction_id"], r["_seq"]): r["_op"] for r in rows}
    assert got == want, (f"{table}: missing {sorted(set(want) - set(got))[:5]}, "
                         f"extra {sorted(set(got) - set(want))[:5]}")
    per_tx = Counter(tid for tid, _ in got)
    assert per_tx == Counter({tid: c[table] for tid, c in counts.items() if c[table]}), \
        f"{table}: rows per transaction differ from the binlog's"


def replay(table: str, rows: list[dict[str, Any]], records: list[dict[str, Any]],
           kinds: dict[str, str], key: str | None) -> list[dict[str, Any]]:
    """The table rebuilt from its changelog alone, change by change in commit order. An
    update's row image is its after image; its before image (the old key, or for a table
    without a key the old row) comes from the change record of the same (transaction,
    seq). Renamed columns are read under their old name from rows landed before the
    rename (a Parquet reader's job: the files keep the names they were written with)."""
    renamed = RENAMED[table]
    before = {(r["transaction"]["id"], r["transaction"]["seq"]): r["before"]
              for r in records if r["table"] == table}

    def image(row: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, kind in kinds.items():
            value = row.get(name)
            old = next((o for o, n in renamed.items() if n == name), None)
            if value is None and old is not None:
                value = row.get(old)
            out[name] = normalize(kind, value, "spark")
        return out

    def image_json(data: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, kind in kinds.items():
            old = next((o for o, n in renamed.items() if n == name), None)
            value = data.get(name, data.get(old) if old else None)
            out[name] = normalize(kind, value, "json")
        return out

    state: dict[Any, dict[str, Any]] = {}
    bag: list[dict[str, Any]] = []
    for row in sorted(rows, key=lambda r: (r["_binlog_file"], r["_binlog_pos"], r["_seq"])):
        img = image(row)
        old = before[(row["_transaction_id"], row["_seq"])]
        if key is not None:
            if row["_op"] in ("update", "delete"):
                del state[old[key]]
            if row["_op"] in ("insert", "update"):
                state[img[key]] = img
        else:
            if row["_op"] == "delete":
                bag.remove(img)
            elif row["_op"] == "update":
                bag.remove(image_json(old))
            if row["_op"] in ("insert", "update"):
                bag.append(img)
    return list(state.values()) if key is not None else bag


@pytest.fixture
def database(mariadb: Any, request: pytest.FixtureRequest) -> str:
    name = f"e2e_{request.node.callspec.id}"
    mariadb.execute([f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`"])
    return name


@pytest.mark.parametrize("mode", ["iceberg", "parquet"])
def test_live_workload_lands_exactly_in_spark(mariadb: Any, spark: Any, tmp_path: Path,
                                              database: str, mode: str) -> None:
    db = database
    start = mariadb.binlog_position()
    where = tmp_path / mode
    options = {"warehouse": where} if mode == "iceberg" else {"path": where}
    sink = make_sink(f"spark:{mode}", spark=spark, catalog=f"e2e_{mode}", **options)
    router = run_live(mariadb, db, sink, start)
    assert router.stats.delivery.batches_delivered >= 2, \
        "the workload should land in several batches"

    records = reference(mariadb, db, start, tmp_path)
    counts = committed_counts(mariadb, db, start)
    assert not any(r["after"] and "rolled back" in str(r["after"]) for r in records)
    for table, key in TABLES.items():
        kinds = source_columns(mariadb, db, table)
        if mode == "iceberg":
            n = assert_mirror_equals_source(mariadb, spark, db, table,
                                            f"e2e_iceberg.{db}.{table}", key)
            assert n > 3
            log = spark.table(f"e2e_iceberg.{db}.{table}__changelog")
        else:
            log = spark.read.option("mergeSchema", "true").parquet(str(where / db / table))
        rows = [r.asDict() for r in log.collect()]
        check_changelog(table, rows, records, counts)
        # The changelog replayed on its own gives the source table, value by value.
        source = normalized(kinds, source_rows(mariadb, db, table), "source")
        assert_same_rows(f"{table} (replayed {mode} changelog)", source,
                         replay(table, rows, records, kinds, key), key)
