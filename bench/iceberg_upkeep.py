"""Benchmark: an Iceberg mirror after thousands of small batches, before and after
``changestream maintain``.

Starts a private MariaDB and one local Spark session, writes ``--batches`` transactions
(each inserts ``--tx-rows`` rows and updates as many earlier ones), and runs the router
from before them with micro-batches of one transaction each, so every transaction is its
own Iceberg commit, as a quiet router with a 1-second timer makes them. It prints, every
``--every`` batches, the seconds per batch of the last stretch, the mirror's data files and
snapshots, and how long a full count and a point lookup of the mirror take. Then it runs
the maintenance (compaction, manifest rewrite, expiry keeping the position, orphans) and
prints the same figures again, lands ``--after`` more batches and prints their time::

    python bench/iceberg_upkeep.py                       # 2,000 batches (about 20 min)
    python bench/iceberg_upkeep.py --batches 200 --every 50

With ``--maintain-every SECONDS`` the sink maintains its tables itself on that schedule
(its ``maintain_every`` option) while it lands: each stretch then also reports the
maintenance runs and their seconds, and the table's figures are taken before the command
runs as well.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.plugins import make_sink
from changestream.devserver import EmbeddedMariaDB
from changestream.runtime.router import Router, RouterSettings
from changestream.transactions.filters import ChangeFilter

DB = "upkeep"
CATALOG = "upkeep"


class StretchTimer:
    """A sink wrapper that reports every ``every`` batches how long they took."""

    def __init__(self, adapter: Any, every: int, report: Any):
        self.adapter = adapter
        self.every = every
        self.report = report
        self.batches = 0
        self.maintenance: list[float] = []  # seconds of each scheduled maintenance
        self.began = time.perf_counter()

    def open(self) -> Any:
        return self.adapter.open()

    def write(self, batch: Any) -> None:
        self.adapter.write(batch)
        self.batches += 1
        last = getattr(self.adapter, "last", None)
        upkeep = (getattr(last, "stages", None) or {}).get("maintenance", 0.0)
        if upkeep > 0.05:  # the schedule ran (a check alone takes microseconds)
            self.maintenance.append(round(upkeep, 2))
        if self.batches % self.every == 0:
            now = time.perf_counter()
            self.report(self.batches, (now - self.began) / self.every, self.maintenance)
            self.maintenance = []
            self.began = time.perf_counter()

    def close(self) -> None:
        self.adapter.close()


def write_transactions(server: EmbeddedMariaDB, first: int, count: int, tx_rows: int,
                       rng: random.Random) -> None:
    """``count`` transactions, each ``tx_rows`` inserts and ``tx_rows`` updates."""
    with server.connect(autocommit=False) as conn, conn.cursor() as cur:
        for n in range(first, first + count):
            base = n * tx_rows
            cur.execute(f"INSERT INTO `{DB}`.t VALUES " + ", ".join(
                f"({i}, 'row {i}', {i % 1000})" for i in range(base, base + tx_rows)))
            for _ in range(tx_rows):
                target = rng.randrange(0, base + tx_rows)
                cur.execute(f"UPDATE `{DB}`.t SET qty = qty + 1 WHERE id = {target}")
            conn.commit()


def land(server: EmbeddedMariaDB, sink: Any, start: tuple[str, int] | None,
         tx_rows: int) -> None:
    Router(RouterSettings(
        source=server.url, start=f"{start[0]}:{start[1]}" if start else None,
        until="caught-up", filter=ChangeFilter(include=[DB]),
        batch=BatchSettings(max_changes=2 * tx_rows, max_seconds=60.0)), sink).run()


def table_figures(spark: Any) -> dict[str, Any]:
    name = f"{CATALOG}.{DB}.t"
    began = time.perf_counter()
    rows = spark.table(name).count()
    counted = time.perf_counter() - began
    began = time.perf_counter()
    spark.sql(f"SELECT * FROM {name} WHERE id = 7").collect()
    looked = time.perf_counter() - began
    files = spark.sql(f"SELECT count(*) FROM {name}.files").collect()[0][0]
    snapshots = spark.sql(f"SELECT count(*) FROM {name}.snapshots").collect()[0][0]
    return {"rows": rows, "data_files": files, "snapshots": snapshots,
            "count_seconds": round(counted, 2), "lookup_seconds": round(looked, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--tx-rows", type=int, default=5)
    parser.add_argument("--every", type=int, default=200)
    parser.add_argument("--after", type=int, default=200)
    parser.add_argument("--spark-writes", action="store_true",
                        help="the sink's arrow_appends=false: Spark appends and MERGEs")
    parser.add_argument("--maintain-every", default=None,
                        help="the sink's maintain_every option (e.g. 60, 5m): it maintains "
                             "its tables itself while landing")
    parser.add_argument("--json", default="iceberg_upkeep.json")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from changestream.sinks.spark.iceberg.maintenance import MaintenanceSettings, maintain_catalog
    from changestream.sinks.spark.jvm.jars import iceberg_jars
    from changestream.sinks.spark.session import iceberg_conf, start_session

    rng = random.Random(11)
    out: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                       "platform": platform.platform()},
                           "date": time.strftime("%Y-%m-%d"), "batches": args.batches,
                           "tx_rows": args.tx_rows, "stretches": []}
    with tempfile.TemporaryDirectory(prefix="changestream-upkeep-") as folder, \
            EmbeddedMariaDB(base_dir=Path(folder) / "mariadb") as server:
        warehouse = Path(folder) / "warehouse"
        spark = start_session("local[2]", iceberg_conf(CATALOG, warehouse), iceberg_jars(),
                              "changestream-upkeep", quiet=True)
        server.execute([f"CREATE DATABASE `{DB}`",
                        f"CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, name VARCHAR(40), "
                        "qty INT)"])
        start = server.binlog_position()
        write_transactions(server, 0, args.batches, args.tx_rows, rng)

        def report(batches: int, per_batch: float, maintenance: list[float]) -> None:
            stretch = {"batches": batches, "seconds_per_batch": round(per_batch, 3),
                       "maintenance_seconds": maintenance}
            out["stretches"].append(stretch)
            print(f"{batches:>6} batches: {per_batch:.3f} s a batch"
                  + (f"; scheduled maintenance: {maintenance} s" if maintenance else ""),
                  flush=True)

        out["maintain_every"] = args.maintain_every
        sink = StretchTimer(make_sink("spark:iceberg", warehouse=str(warehouse), spark=spark,
                                      catalog=CATALOG, arrow_appends=not args.spark_writes,
                                      maintain_every=args.maintain_every),
                            args.every, report)
        land(server, sink, start, args.tx_rows)
        out["before"] = table_figures(spark)
        print(f"before maintenance: {out['before']}", flush=True)
        began = time.perf_counter()
        done = maintain_catalog(spark, CATALOG, MaintenanceSettings(expire_after=0,
                                                                    keep_snapshots=10))
        out["maintenance_seconds"] = round(time.perf_counter() - began, 1)
        out["maintained"] = [u.as_dict() for u in done]
        out["after"] = table_figures(spark)
        print(f"maintenance: {out['maintenance_seconds']} s for {len(done)} tables; "
              f"after: {out['after']}", flush=True)
        write_transactions(server, args.batches, args.after, args.tx_rows, rng)
        began = time.perf_counter()
        sink = StretchTimer(make_sink("spark:iceberg", warehouse=str(warehouse), spark=spark,
                                      catalog=CATALOG, arrow_appends=not args.spark_writes,
                                      maintain_every=args.maintain_every),
                            args.after, report)
        land(server, sink, None, args.tx_rows)
        out["after_batches_seconds_per_batch"] = round(
            (time.perf_counter() - began) / max(1, args.after), 3)
        expected = (args.batches + args.after) * args.tx_rows
        landed = spark.table(f"{CATALOG}.{DB}.t").count()
        if landed != expected:
            print(f"mirror holds {landed} rows, expected {expected}", file=sys.stderr)
            return 1
        spark.stop()
    Path(args.json).write_text(json.dumps(out, indent=1))
    print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
