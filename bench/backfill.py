"""Benchmark: ``changestream backfill`` against ``changestream run --source file://`` on the
same archived binlog files, into Iceberg (changelog + mirror), and how soon the first live
change after a backfill is visible.

For each flavour (``--flavors``: MariaDB 10.11, MySQL 9.7) a private server writes
``--rows`` rows into one keyed table in 100-row transactions, then updates about a tenth
of them (1 to 10 rows a transaction) and deletes about a twentieth, rotating its binary log
so the workload spans ``--files`` files; the closed files are copied into an archive
folder. Then, each on a fresh warehouse:

1. ``backfill-local``: :func:`run_backfill` on ``local[2]``.
2. ``backfill-cluster``: the same on a standalone cluster (a master and two workers of one
   core each, from PySpark's ``bin/spark-class``), with ``--cluster``.
3. ``run-files``: the router with ``file://`` on the archive into the same kind of sink,
   until caught up.
4. After the local backfill, the router starts live on that warehouse (it resumes from
   the backfill's position) and one row is committed: the seconds until a Spark query sees
   it (router start included, and from the commit alone).

Rates are changes landed per second (inserts, updates, deletes), Spark's session start
excluded and reported apart, after a throwaway Iceberg write has warmed the JVM (its first
commit would otherwise be paid by whichever run goes first); the mirror is counted against
the source each time::

    python bench/backfill.py                                   # 2,000,000 rows, both flavours
    python bench/backfill.py --rows 200000 --flavors mariadb --cluster --json /tmp/bf.json
    python bench/backfill.py --rows 300000 --flavors mariadb --shape mixed --repeat 3

``--shape mixed``: transactions of 250 inserted rows, an update and a delete, and two
identical rows in a keyless table (its mirror counted too).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine_cpu import MachineCpu

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.plugins import make_sink
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.backfill import BackfillSettings, run_backfill
from changestream.sinks.spark.jvm.jars import iceberg_jars
from changestream.sinks.spark.session import start_session
from changestream.transactions.filters import ChangeFilter
from tests.servers import private_server

DB = "bench_backfill"
TABLE = (f"CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64), "
         "amount DECIMAL(12,2), at DATETIME(6), flag BOOLEAN)")
KEYLESS = f"CREATE TABLE `{DB}`.k (tx INT, n INT, note VARCHAR(20))"
SHAPES = ("bulk", "mixed")


def _row(i: int) -> str:
    return (f"({i}, {i % 97}, 'row {i} {'x' * (i % 23)}', {i * 0.37:.2f}, "
            f"'2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00."
            f"{i % 1000000:06d}', {i % 2})")


def write_mixed(server: Any, rows: int, files: int) -> dict[str, int]:
    """The mixed shape: transactions of 250 inserted rows, an update and a delete in the
    keyed table, and two identical rows in a keyless one; the changes made, by kind."""
    server.execute([f"DROP DATABASE IF EXISTS `{DB}`", f"CREATE DATABASE `{DB}`", TABLE,
                    KEYLESS])
    per_tx = 254
    transactions = max(1, rows // per_tx)
    per_file = max(1, transactions // max(1, files - 1))
    made = {"insert": 0, "update": 0, "delete": 0}
    with server.connect(autocommit=False) as conn, conn.cursor() as cur:
        for tx in range(transactions):
            first = tx * 250 + 1
            cur.execute(f"INSERT INTO `{DB}`.t VALUES "
                        + ", ".join(_row(i) for i in range(first, first + 250)))
            cur.execute(f"UPDATE `{DB}`.t SET k = k + 1, v = 'updated' WHERE id = {first}")
            cur.execute(f"DELETE FROM `{DB}`.t WHERE id = {first + 1}")
            cur.execute(f"INSERT INTO `{DB}`.k VALUES ({tx}, 2, 'tx {tx}'), "
                        f"({tx}, 2, 'tx {tx}')")
            conn.commit()
            made["insert"] += 252
            made["update"] += 1
            made["delete"] += 1
            if tx % per_file == per_file - 1:
                cur.execute("FLUSH BINARY LOGS")
        cur.execute("FLUSH BINARY LOGS")
    return made


def write_workload(server: Any, rows: int, files: int) -> dict[str, int]:
    """The workload (see the module docstring); returns the changes made, by kind."""
    server.execute([f"DROP DATABASE IF EXISTS `{DB}`", f"CREATE DATABASE `{DB}`", TABLE])
    per_file = max(1, rows // max(1, files - 1))
    made = {"insert": 0, "update": 0, "delete": 0}
    with server.connect(autocommit=False) as conn, conn.cursor() as cur:
        for first in range(1, rows + 1, 100):
            last = min(rows, first + 99)
            cur.execute(f"INSERT INTO `{DB}`.t VALUES "
                        + ", ".join(_row(i) for i in range(first, last + 1)))
            conn.commit()
            made["insert"] += last - first + 1
            if (first - 1) // per_file != last // per_file:
                cur.execute("FLUSH BINARY LOGS")
        for step, first in enumerate(range(1, rows + 1, 100)):  # a tenth up, a 20th gone
            n = 1 + step % 10
            cur.execute(f"UPDATE `{DB}`.t SET k = k + 1, v = 'updated' WHERE id BETWEEN "
                        f"{first} AND {first + n - 1}")
            made["update"] += cur.rowcount
            cur.execute(f"DELETE FROM `{DB}`.t WHERE id BETWEEN {first + 50} AND "
                        f"{first + 54}")
            made["delete"] += cur.rowcount
            conn.commit()
        cur.execute("FLUSH BINARY LOGS")
    return made


def archive(server: Any, first: str, folder: Path) -> list[Path]:
    files = server.binlog_files()
    names = [f.name for f in files]
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for path in files[names.index(first):-1]:
        shutil.copyfile(path, folder / path.name)
        out.append(folder / path.name)
    return out


def _session(master: str, catalog: str, warehouse: Path) -> tuple[Any, float]:
    from changestream.sinks.spark.session import iceberg_conf

    began = time.perf_counter()
    spark = start_session(master, {**iceberg_conf(catalog, str(warehouse)),
                                   "spark.sql.shuffle.partitions": "2"},
                          iceberg_jars(), "changestream-bench-backfill", quiet=True)
    return spark, time.perf_counter() - began


def _mirror_rows(spark: Any, catalog: str, tables: dict[str, int]) -> dict[str, int]:
    counts = {}
    for table in tables:
        spark.sql(f"REFRESH TABLE {catalog}.{DB}.{table}")
        counts[table] = int(spark.table(f"{catalog}.{DB}.{table}").count())
    return counts


def _source_rows(server: Any) -> dict[str, int]:
    tables = [row[0] for row in server.execute(f"SHOW TABLES FROM `{DB}`")]
    return {t: int(server.execute(f"SELECT COUNT(*) FROM `{DB}`.`{t}`")[0][0]) for t in tables}


def warm_up(master: str, work: Path) -> float:
    """A throwaway Iceberg table made, written and dropped in a scratch warehouse: the JVM's
    first Iceberg commit (class loading, the JIT) paid before either measured run, not by
    whichever goes first; the seconds it took."""
    spark, _ = _session(master, "bf_warm_up", work / "warm-up")
    began = time.perf_counter()
    try:
        spark.sql("CREATE TABLE bf_warm_up.w.t (id INT, v STRING) USING iceberg")
        spark.sql("INSERT INTO bf_warm_up.w.t VALUES (1, 'a')")
        spark.sql("DROP TABLE bf_warm_up.w.t")
        return time.perf_counter() - began
    finally:
        spark.stop()


def backfill(master: str, files: Path, work: Path, changes: int, rows_left: dict[str, int],
             label: str) -> dict[str, Any]:
    catalog = f"bf_{label.replace('-', '_')}"
    warehouse = work / label
    spark, started = _session(master, catalog, warehouse)
    try:
        with MachineCpu() as used:
            report = run_backfill(spark, catalog, str(warehouse), [str(files)],
                                  BackfillSettings(change_filter=ChangeFilter([DB])))
        seconds = used.seconds
        landed = _mirror_rows(spark, catalog, rows_left)
        if landed != rows_left:
            raise SystemExit(f"{label}: the mirrors hold {landed} rows, the source {rows_left}")
        return {"spark_start_seconds": round(started, 1), "seconds": round(seconds, 1),
                "changes": report.rows, "units": report.units,
                "changes_per_second": round(report.rows / seconds),
                "decode_task_seconds": round(report.decode_seconds, 1),
                "cpu_seconds": round(used.cpu_seconds, 2), "cpu_share": round(used.share, 2),
                "warehouse": str(warehouse), "catalog": catalog,
                "expected_changes": changes}
    finally:
        spark.stop()


def run_files(files: Path, work: Path, rows_left: dict[str, int],
              label: str = "run-files") -> dict[str, Any]:
    catalog, warehouse = f"bf_{label.replace('-', '_')}", work / label
    spark, started = _session("local[2]", catalog, warehouse)
    try:
        sink = make_sink("spark:iceberg", spark=spark, catalog=catalog, warehouse=warehouse)
        router = Router(RouterSettings(source=f"file://{files}", until="caught-up",
                                       filter=ChangeFilter([DB]),
                                       batch=BatchSettings(max_seconds=1.0)), sink)
        with MachineCpu() as used:
            router.run()
        seconds = used.seconds
        landed = _mirror_rows(spark, catalog, rows_left)
        if landed != rows_left:
            raise SystemExit(f"run-files: the mirrors hold {landed} rows, the source "
                             f"{rows_left}")
        changes = router.stats.delivery.changes_delivered
        return {"spark_start_seconds": round(started, 1), "seconds": round(seconds, 1),
                "changes": changes, "changes_per_second": round(changes / seconds),
                "cpu_seconds": round(used.cpu_seconds, 2), "cpu_share": round(used.share, 2)}
    finally:
        spark.stop()


def decode_alone(files: Path, staging: Path) -> dict[str, float]:
    """The CPU-seconds of decoding and staging every unit of the archive into ``staging``
    in this one process, one after the other, with nothing else running (the schema
    history that names the columns is made first, not counted): what any backfill of
    these files spends on its decoding, whatever it lands with."""
    from changestream.sinks.backfill.decoding import decode_unit
    from changestream.sinks.backfill.driver import _unit_names
    from changestream.sinks.backfill.planning import plan_units

    settings = BackfillSettings(change_filter=ChangeFilter([DB]))
    units = plan_units([str(files)], settings.split_bytes)
    names = _unit_names(units, units, settings)
    cpu, began = time.process_time(), time.perf_counter()
    for unit in units:
        manifest = decode_unit(unit, str(staging), settings.chunk_changes,
                               settings.change_filter, names.get(unit.index), False)
        if manifest.error:
            raise SystemExit(f"decode-alone: {manifest.error}")
    return {"cpu_seconds": round(time.process_time() - cpu, 2),
            "seconds": round(time.perf_counter() - began, 2)}


def land_alone(files: Path, staging: Path, work: Path, rows_left: dict[str, int]
               ) -> dict[str, float]:
    """A backfill of the archive whose units are all staged already (``staging``, by
    :func:`decode_alone`): its landing alone, the machine's CPU-seconds and wall seconds."""
    catalog, warehouse = "bf_land_alone", work / "land-alone"
    spark, _ = _session("local[2]", catalog, warehouse)
    try:
        with MachineCpu() as used:
            report = run_backfill(spark, catalog, str(warehouse), [str(files)],
                                  BackfillSettings(change_filter=ChangeFilter([DB]),
                                                   staging=str(staging)))
        if report.units_decoded:
            raise SystemExit(f"land-alone: {report.units_decoded} units were decoded again")
        landed = _mirror_rows(spark, catalog, rows_left)
        if landed != rows_left:
            raise SystemExit(f"land-alone: the mirrors hold {landed} rows, the source "
                             f"{rows_left}")
        return {"cpu_seconds": round(used.cpu_seconds, 2), "seconds": round(used.seconds, 2)}
    finally:
        spark.stop()


def first_live(server: Any, backfilled: dict[str, Any], rows: int) -> dict[str, Any]:
    """Start the router live on the backfilled warehouse, commit one row, time until
    Spark sees it."""
    catalog, warehouse = backfilled["catalog"], Path(backfilled["warehouse"])
    spark, _ = _session("local[2]", catalog, warehouse)
    try:
        sink = make_sink("spark:iceberg", spark=spark, catalog=catalog, warehouse=warehouse)
        router = Router(RouterSettings(source=server.url, filter=ChangeFilter([DB]),
                                       batch=BatchSettings(max_seconds=0.2)), sink)
        began = time.perf_counter()
        router.start()
        new_id = rows + 1
        server.execute(f"INSERT INTO `{DB}`.t VALUES {_row(new_id)}")
        committed = time.perf_counter()
        table = f"{catalog}.{DB}.t"
        while True:
            spark.sql(f"REFRESH TABLE {table}")
            if spark.table(table).where(f"id = {new_id}").count():
                break
            if time.perf_counter() - began > 300:
                raise SystemExit("the live change was not visible after 300 s")
            time.sleep(0.05)
        seen = time.perf_counter()
        router.stop()
        router.wait(60)
        return {"router_start_to_visible_seconds": round(seen - began, 2),
                "commit_to_visible_seconds": round(seen - committed, 2)}
    finally:
        spark.stop()


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median seconds (the later of the middle two for an even count)."""
    return sorted(results, key=lambda r: r["seconds"])[len(results) // 2]


def measure(flavor: str, rows: int, files: int, cluster: bool, work: Path,
            shape: str = "bulk", repeat: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with private_server(flavor) as server:
        out["server"] = server.execute("SELECT VERSION()")[0][0]
        server.execute("FLUSH BINARY LOGS")
        first = server.binlog_position()[0]
        began = time.perf_counter()
        made = (write_mixed if shape == "mixed" else write_workload)(server, rows, files)
        out["write_seconds"] = round(time.perf_counter() - began, 1)
        out["made"] = made
        folder = work / flavor / "archive"
        kept = archive(server, first, folder)
        out["files"] = len(kept)
        out["archive_mb"] = round(sum(p.stat().st_size for p in kept) / 1e6, 1)
        changes = sum(made.values())
        left = _source_rows(server)
        out["warm_up_seconds"] = round(warm_up("local[2]", work / flavor), 1)
        # Alternated, so that neither gains from the other's warming of the JVM.
        backfills, runs = [], []
        for i in range(repeat):
            backfills.append(backfill("local[2]", folder, work / flavor, changes, left,
                                      f"backfill-local-{i}"))
            if i == 0:
                out["first_live"] = first_live(server, backfills[0], rows)
            runs.append(run_files(folder, work / flavor, left, f"run-files-{i}"))
        out["backfill_local"], out["run_files"] = _median(backfills), _median(runs)
        staging = work / flavor / "staged-alone"
        out["decode_alone"] = decode_alone(folder, staging)
        out["land_alone"] = land_alone(folder, staging, work / flavor, left)
        shutil.rmtree(staging, ignore_errors=True)
        out["rounds_seconds"] = [[b["seconds"], r["seconds"]]
                                 for b, r in zip(backfills, runs, strict=True)]
        if cluster:
            from tests.spark_cluster import StandaloneCluster

            with StandaloneCluster(workers=2, cores=1, memory="2g") as spark_cluster:
                out["backfill_cluster"] = backfill(spark_cluster.master_url, folder,
                                                   work / flavor, changes, left,
                                                   "backfill-cluster")
        base = out["run_files"]["changes_per_second"]
        for key in ("backfill_local", "backfill_cluster"):
            if key in out:
                out[key]["vs_run_files"] = round(out[key]["changes_per_second"] / base, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--flavors", default="mariadb,mysql")
    parser.add_argument("--cluster", action="store_true",
                        help="also backfill on a standalone cluster")
    parser.add_argument("--shape", choices=SHAPES, default="bulk",
                        help="bulk: 100-row inserts, then updates and deletes (the default); "
                        "mixed: 250 inserts, an update and a delete per transaction, and two "
                        "identical rows in a keyless table")
    parser.add_argument("--repeat", type=int, default=1,
                        help="backfill and plain run this many times each, alternated; "
                        "the medians are reported")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    figures: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python":
                                           platform.python_version()},
                               "date": time.strftime("%Y-%m-%d"), "rows": args.rows,
                               "shape": args.shape}
    with tempfile.TemporaryDirectory(prefix="changestream-bench-backfill-") as tmp:
        for flavor in args.flavors.split(","):
            result = measure(flavor, args.rows, args.files, args.cluster, Path(tmp),
                             args.shape, args.repeat)
            figures[flavor] = result
            print(f"{flavor} ({result['server']}): {result['files']} files, "
                  f"{result['archive_mb']} MB, {sum(result['made'].values()):,} changes")
            for key in ("backfill_local", "backfill_cluster", "run_files"):
                if key in result:
                    r = result[key]
                    ratio = f", {r['vs_run_files']}x run" if "vs_run_files" in r else ""
                    print(f"  {key:17} {r['changes_per_second']:>9,} changes/s "
                          f"({r['seconds']} s; Spark start {r['spark_start_seconds']} s"
                          f"{ratio}); the machine's CPU {r['cpu_seconds']} CPU-s "
                          f"({r['cpu_share']:.0%} of its CPUs)"
                          + (f", of it the decoding tasks {r['decode_task_seconds']} s"
                             if "decode_task_seconds" in r else ""))
            if args.repeat > 1:
                print(f"  rounds (backfill s, run s): {result['rounds_seconds']}")
            alone, landing = result["decode_alone"], result["land_alone"]
            work_cpu = alone["cpu_seconds"] + landing["cpu_seconds"]
            cpus = os.cpu_count() or 1
            print(f"  the backfill's work apart: decoding alone (one process, nothing else "
                  f"running) {alone['cpu_seconds']} CPU-s, landing alone (every unit staged "
                  f"already) {landing['cpu_seconds']} CPU-s in {landing['seconds']} s; "
                  f"together at least {work_cpu / cpus:.2f} s on {cpus} CPUs, so a backfill "
                  f"could be at most {result['run_files']['seconds'] * cpus / work_cpu:.2f}x "
                  "the plain run")
            live = result["first_live"]
            print(f"  first live change visible {live['router_start_to_visible_seconds']} s "
                  f"after the router's start ({live['commit_to_visible_seconds']} s after "
                  "its commit)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
