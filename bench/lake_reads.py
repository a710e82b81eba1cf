"""Benchmark: reading a keyed Iceberg mirror after many small batches, with position deletes
(the default) and with equality deletes (``mirror_deletes=equality``, the mirrors before
them), from Spark, pyiceberg and DuckDB, and ``changestream maintain``'s time on it.

No server: the batches are built as the router delivers them and written to the sink
directly. A table of ``--rows`` rows (id, name, qty) is landed in batches of 50,000, then
``--batches`` batches each insert ``--tx-rows`` new keys and update as many random earlier
ones (the shape of a busy OLTP table under a quiet router's 1-second timer). For each kind
of delete it prints the landing time per small batch, the mirror's files, the time of a
``count(*)`` and of a full read in each engine (pyiceberg refuses equality deletes, DuckDB
fails their ``count(*)``: shown as such), the time ``maintain`` takes on the mirror, and the
reads again after it::

    python bench/lake_reads.py                          # 100,000 rows, 2,000 batches
    python bench/lake_reads.py --rows 5000000 --batches 1000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as other benches

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.model.changes import Batch, Change, Position, TransactionInfo, TransactionPart
from tests.lake_readers import duckdb_connection, metadata_file

SCHEMA = TableSchema("shop", "items", (
    Column(index=0, type_code=ft.LONGLONG, name="id", nullable=False),
    Column(index=1, type_code=ft.VARCHAR, name="name", collation=255, max_length=100),
    Column(index=2, type_code=ft.LONGLONG, name="qty")), primary_key=(0,), names_logged=True)


class Log:
    """Transactions at growing binlog offsets, as the assembler delivers them."""

    def __init__(self) -> None:
        self.pos, self.gno, self.batch_id = 4, 0, 0

    def part(self, changes: list[tuple[str, dict | None, dict | None]]) -> TransactionPart:
        self.gno += 1
        start, self.pos = self.pos, self.pos + 100 + 50 * len(changes)
        gtid = f"3e11fa47-71ca-11e1-9e33-c80aa9429562:{self.gno}"
        info = TransactionInfo(id=gtid, gtid=gtid, xid=self.gno, size=len(changes),
                               commit_ts=dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
                               server_id=1, file="binlog.000001", start=start, end=self.pos)
        out = [Change(op=op, database="shop", table="items", before=before, after=after,
                      primary_key={"id": (after or before or {})["id"]}, sql=None,
                      file="binlog.000001",
                      pos=start + 50 * i, row=0, seq=i, last=i == len(changes) - 1,
                      schema=SCHEMA, transaction=info)
               for i, (op, before, after) in enumerate(changes)]
        return TransactionPart(info, out, True, Position(
            "binlog.000001", self.pos, f"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-{self.gno}",
            "mysql"))

    def batch(self, parts: list[TransactionPart]) -> Batch:
        self.batch_id += 1
        return Batch(self.batch_id, parts, parts[-1].position)


def row(i: int, qty: int = 0) -> dict[str, Any]:
    return {"id": i, "name": f"name-{i}", "qty": qty}


def timed(action: Any) -> tuple[float, Any]:
    began = time.perf_counter()
    try:
        result = action()
    except Exception as exc:  # an engine that refuses the table
        return time.perf_counter() - began, f"refused: {str(exc).splitlines()[0][:70]}"
    return time.perf_counter() - began, result


def reads(spark: Any, catalog: str, folder: Path) -> dict[str, Any]:
    from pyiceberg.table import StaticTable

    metadata = str(metadata_file(folder))
    name = f"{catalog}.shop.items"
    spark.sql(f"REFRESH TABLE {name}")
    con = duckdb_connection()
    figures: dict[str, Any] = {}
    for label, action in (
            ("spark count", lambda: spark.table(name).count()),
            ("spark read", lambda: len(spark.table(name).toArrow())
             if hasattr(spark.table(name), "toArrow") else len(spark.table(name).collect())),
            ("pyiceberg read", lambda: StaticTable.from_metadata(metadata).scan()
             .to_arrow().num_rows),
            ("duckdb count", lambda: con.execute("SELECT count(*) FROM iceberg_scan(?)",
                                                 [metadata]).fetchone()[0]),
            ("duckdb read", lambda: con.execute("SELECT * FROM iceberg_scan(?)", [metadata])
             .fetch_arrow_table().num_rows)):
        seconds, result = timed(action)
        figures[label] = (round(seconds, 3), result)
    files = spark.sql(f"SELECT content, count(*) n FROM {name}.files GROUP BY content") \
        .collect()
    figures["files"] = {int(r["content"]): int(r["n"]) for r in files}
    return figures


def run(spark: Any, warehouse: Path, kind: str, rows: int, batches: int, tx_rows: int,
        seed: int) -> None:
    from changestream.sinks.spark import SparkSink
    from changestream.sinks.spark.iceberg.maintenance import MaintenanceSettings, maintain_table

    catalog = f"reads_{kind}"
    sink = SparkSink("iceberg", warehouse=warehouse / kind, spark=spark, catalog=catalog,
                     mirror_deletes=kind)
    sink.open()
    log, rng = Log(), random.Random(seed)
    began = time.perf_counter()
    for first in range(0, rows, 50_000):
        sink.write(log.batch([log.part([("insert", None, row(i)) for i in
                                        range(first, min(rows, first + 50_000))])]))
    loaded = time.perf_counter() - began
    qty: dict[int, int] = {}
    next_id = rows
    began = time.perf_counter()
    for _ in range(batches):
        changes: list[tuple[str, dict | None, dict | None]] = []
        for _ in range(tx_rows):
            changes.append(("insert", None, row(next_id)))
            next_id += 1
        for key in rng.sample(range(next_id - tx_rows), tx_rows):
            old = qty.get(key, 0)
            qty[key] = old + 1
            changes.append(("update", row(key, old), row(key, old + 1)))
        sink.write(log.batch([log.part(changes)]))
    landed = time.perf_counter() - began
    print(f"\n{kind} deletes: {rows:,} rows loaded in {loaded:.1f} s; {batches:,} batches of "
          f"{tx_rows} inserts + {tx_rows} updates in {landed:.1f} s "
          f"({landed / max(1, batches) * 1000:.0f} ms a batch)")
    folder = warehouse / kind / "shop" / "items"
    for label, figures in (("before maintain", reads(spark, catalog, folder)),):
        print(f"  {label}: {figures}")
    seconds, _ = timed(lambda: maintain_table(spark, catalog, "`shop`.`items`",
                                              MaintenanceSettings(remove_orphans=False)))
    print(f"  maintain of the mirror: {seconds:.1f} s")
    print(f"  after maintain: {reads(spark, catalog, folder)}")
    sink.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--tx-rows", type=int, default=5)
    parser.add_argument("--kinds", default="position,equality")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["TZ"] = "UTC"
    time.tzset()
    from changestream.sinks.spark.jvm.jars import iceberg_jars
    from changestream.sinks.spark.session import start_session

    print(f"lake_reads: {platform.node()}, {os.cpu_count()} CPUs, {dt.date.today()}, "
          f"{args.rows:,} rows, {args.batches:,} batches of {args.tx_rows}+{args.tx_rows}")
    spark = start_session("local[2]", {"spark.sql.shuffle.partitions": "2",
                                       "spark.ui.enabled": "false"}, iceberg_jars(),
                          "changestream-lake-reads")
    try:
        with tempfile.TemporaryDirectory(prefix="changestream-lake-reads-") as folder:
            for kind in args.kinds.split(","):
                run(spark, Path(folder), kind, args.rows, args.batches, args.tx_rows,
                    args.seed)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
