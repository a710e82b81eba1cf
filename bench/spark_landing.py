"""Benchmark: how fast the router lands into Spark, and how soon a commit is visible.

Starts a private MariaDB (``changestream.devserver.EmbeddedMariaDB``; ``--server mysql``:
a private MySQL 9 from its sid root, the schema history's shadow server of the same build)
and one local Spark session, then for each landing mode (``parquet``, ``iceberg``):

1. **Throughput.** Writes a deterministic workload (``--rows`` changes in transactions of
   ``--tx-rows``; every column value a function of the row number), then runs the Router
   from before the workload until caught up. ``--shape inserts`` (the default): every
   change a row INSERTed by a multi-row INSERT; ``--shape mixed``: each transaction
   inserts 80% of its changes that way, updates 15% (earlier rows, one UPDATE each, full
   images) and deletes 5% (earlier rows), so the Iceberg mirror takes deletes;
   ``--shape mixed-keyless``: the same, with a tenth of each transaction's inserts going to
   a table without a primary key (``n``: few distinct values, so duplicates), and one
   ``UPDATE ... LIMIT 1`` and one ``DELETE ... LIMIT 1`` of it per transaction;
   ``--shape wide``: the mix on a table of 40 columns (``t``'s 8 and 32 more: DOUBLE,
   utf8mb4 text, BIGINT, DECIMAL, DATETIME(6), INT, text, TINYINT, four of each). Rows per
   second = changes landed / the router's run time (the session is already up, so Spark's
   start is not in it; it is reported apart). The landed tables are counted afterwards
   (the changelog, and the mirror against the source) to make sure every change is
   there. The router alone (into JSON lines, with decode workers) runs on the same binlog
   after each landing; the workload is landed ``--repeat`` times (3), each time into new
   tables, and the figures are the medians: on 2 CPUs one pair of runs moved by a third
   from one run to the next.
2. **Delay from commit to visible.** Starts the router live on the same target (it resumes
   from the position the sink stored), then commits ``--probes`` single-row transactions one
   at a time; after each COMMIT returns it polls the table with Spark SQL until the row is
   there. Delay = first poll that sees the row - the moment COMMIT returned. The figures
   include the micro-batch wait (``--batch-seconds``), the landing, and half a poll on
   average (the poll time is reported too). The poll runs once before the first probe
   (Spark compiles its query then: a second or more on 2 CPUs, which the first probe's
   delay would otherwise carry); ``delays_seconds`` in the JSON lists every probe's delay
   in the order they were made.
3. **From a cold start** (``--cold-cli``): the same rows landed by new ``changestream run
   --until caught-up`` processes (``--repeat`` of them, each on a new warehouse) and as many
   runs with nothing to land, after one such run that is not measured (a machine's first
   start writes the driver's class-data archive); see :func:`cold_cli`. Spark's start is
   reported apart.

Prints the figures and writes them as JSON (``--json``)::

    python bench/spark_landing.py                        # 100,000 rows, both modes
    python bench/spark_landing.py --rows 20000 --modes parquet --json /tmp/out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as other benches

from machine_cpu import MachineCpu

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.adapter import capabilities_of
from changestream.delivery.plugins import make_sink
from changestream.devserver import EmbeddedServer
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.servers import private_server, shadow_command

TABLE = ("CREATE TABLE `{db}`.t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64), "
         "amount DECIMAL(12,2), at DATETIME(6), d DATE, ts TIMESTAMP(6) NULL, flag BOOLEAN)")
KEYLESS_TABLE = "CREATE TABLE `{db}`.n (v INT, w VARCHAR(32), at DATETIME(6))"
SHAPES = ("inserts", "mixed", "mixed-keyless", "wide")
# The wide shape's 32 columns beyond t's 8: the kinds of the outside report's rows
# (DOUBLE, utf8mb4 text, DECIMAL, DATETIME(6)) and more, four of each.
WIDE_KINDS = ("DOUBLE", "VARCHAR(40) CHARACTER SET utf8mb4", "BIGINT", "DECIMAL(12,2)",
              "DATETIME(6)", "INT", "VARCHAR(40)", "TINYINT")
WIDE_COLUMNS = 32


def table_sql(shape: str) -> str:
    """The CREATE TABLE of the keyed table ``t`` for ``shape``."""
    if shape != "wide":
        return TABLE
    extra = ", ".join(f"c{j} {WIDE_KINDS[j % len(WIDE_KINDS)]}" for j in range(WIDE_COLUMNS))
    return TABLE[:-1] + ", " + extra + ")"


def _wide_value(i: int, j: int) -> str:
    kind = WIDE_KINDS[j % len(WIDE_KINDS)]
    if kind == "DOUBLE":
        return repr(i * 0.125 + j / 3)
    if kind.startswith("VARCHAR(40) CHARACTER"):
        return f"'ünï {i % 9973} {j}'"
    if kind == "BIGINT":
        return str(i * 1_000_003 + j)
    if kind == "DECIMAL(12,2)":
        return f"{(i + j) * 0.37:.2f}"
    if kind == "DATETIME(6)":
        return (f"'2023-{1 + (i + j) % 12:02d}-{1 + i % 28:02d} "
                f"10:{j:02d}:{i % 60:02d}.{i % 999999:06d}'")
    if kind == "INT":
        return str((i * (j + 1)) % 2_000_000)
    if kind == "VARCHAR(40)":
        return f"'w{j} {i}'"
    return str((i + j) % 100)  # TINYINT


def _row(i: int, shape: str = "inserts") -> str:
    row = (f"({i}, {i % 97}, 'row {i} {'x' * (i % 23)}', {i * 0.37:.2f}, "
           f"'2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00."
           f"{i % 1000000:06d}', "
           f"'{1990 + i % 30}-01-{1 + i % 28:02d}', FROM_UNIXTIME({1_700_000_000 + i}), {i % 2})")
    if shape != "wide":
        return row
    return row[:-1] + ", " + ", ".join(_wide_value(i, j) for j in range(WIDE_COLUMNS)) + ")"


def write_workload(server: EmbeddedServer, db: str, rows: int, tx_rows: int,
                   shape: str = "inserts") -> tuple[float, dict[str, int]]:
    """``rows`` changes in transactions of ``tx_rows`` (``shape``: see the module
    docstring); returns the seconds it took and the rows each table holds after it."""
    rng = random.Random(7)
    began = time.perf_counter()
    inserted, present = 0, []  # the rows t holds, in no order
    keyless = 0  # the rows n holds
    with server.connect(autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        written = 0
        while written < rows:
            size = min(tx_rows, rows - written)
            updates = deletes = keyless_changes = 0
            if shape != "inserts" and present:
                updates, deletes = size * 15 // 100, size * 5 // 100
            if shape == "mixed-keyless" and keyless and size - updates - deletes > 12:
                # a row of n changed by an UPDATE and one removed by a DELETE, each
                # LIMIT 1 on a value n holds several times
                updated = cur.execute(f"UPDATE `{db}`.n SET w = CONCAT(w, '+') "
                                      f"WHERE v = {rng.randrange(50)} LIMIT 1")
                removed = cur.execute(f"DELETE FROM `{db}`.n WHERE v = {rng.randrange(50)} "
                                      "LIMIT 1")
                keyless_changes, keyless = updated + removed, keyless - removed
            inserts = size - updates - deletes - keyless_changes
            to_n = inserts // 10 if shape == "mixed-keyless" else 0
            if to_n:
                cur.execute(f"INSERT INTO `{db}`.n VALUES " + ",".join(
                    f"({(keyless + j) % 50}, 'dup {(keyless + j) % 50}', "
                    f"'2024-01-01 00:00:{j % 60:02d}.{j:06d}')" for j in range(to_n)))
                keyless += to_n
            inserts -= to_n
            cur.execute(f"INSERT INTO `{db}`.t VALUES " + ",".join(
                _row(i, shape) for i in range(inserted + 1, inserted + inserts + 1)))
            present.extend(range(inserted + 1, inserted + inserts + 1))
            inserted += inserts
            for _ in range(updates):
                cur.execute(f"UPDATE `{db}`.t SET k = k + 1, v = CONCAT(v, '+'), "
                            f"amount = amount + 1 WHERE id = {rng.choice(present)}")
            for _ in range(deletes):
                at = rng.randrange(len(present))
                present[at], present[-1] = present[-1], present[at]
                cur.execute(f"DELETE FROM `{db}`.t WHERE id = {present.pop()}")
            conn.commit()
            written += size
    held = {"t": len(present)}
    if shape == "mixed-keyless":
        held["n"] = keyless
    return time.perf_counter() - began, held


class Target:
    """Where a mode lands, and how to ask Spark whether rows are there."""

    def __init__(self, mode: str, base: Path, db: str, arrow_workers: bool = True):
        self.mode, self.db = mode, db
        # ``iceberg-equality``: the Iceberg mode whose mirrors take equality deletes
        self.kind = mode.split("-")[0]
        self.options = {"mirror_deletes": "equality"} if mode == "iceberg-equality" else {}
        self.arrow_workers = arrow_workers
        self.where = base / mode
        self.catalog = f"bench_{mode.replace('-', '_')}"

    def again(self, n: int) -> Target:
        """The same source tables landed anew: another folder, another catalog."""
        other = Target(self.mode, self.where.parent / f"again{n}", self.db, self.arrow_workers)
        other.catalog = f"{self.catalog}_again{n}"
        return other

    def sink(self, spark: Any) -> Any:
        option = {"warehouse": self.where} if self.kind == "iceberg" else {"path": self.where}
        return make_sink(f"spark:{self.kind}", spark=spark, catalog=self.catalog,
                         arrow_workers=self.arrow_workers, **option, **self.options)

    def frame(self, spark: Any) -> Any:
        if self.kind == "iceberg":
            name = f"{self.catalog}.{self.db}.t"
            spark.sql(f"REFRESH TABLE {name}")
            return spark.table(name)
        return spark.read.parquet(str(self.where / self.db / "t"))

    def count(self, spark: Any) -> int:
        return int(self.frame(spark).count())

    def changelog_count(self, spark: Any, tables: Iterable[str] = ("t",)) -> int:
        """The changes landed into ``tables``: their changelogs' rows (the Parquet mode has
        only them)."""
        if self.kind == "iceberg":
            return sum(int(spark.table(f"{self.catalog}.{self.db}.{table}__changelog").count())
                       for table in tables)
        return sum(int(spark.read.parquet(str(self.where / self.db / table)).count())
                   for table in tables)

    def mirror_count(self, spark: Any, table: str) -> int:
        """The rows of Iceberg mirror ``table``."""
        name = f"{self.catalog}.{self.db}.{table}"
        spark.sql(f"REFRESH TABLE {name}")
        return int(spark.table(name).count())

    def visible(self, spark: Any, row_id: int) -> bool:
        try:
            return bool(self.frame(spark).where(f"id = {row_id}").limit(1).count())
        except Exception as exc:  # the folder or table may not exist before the first batch
            if "PATH_NOT_FOUND" in str(exc) or "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
                return False
            raise


#: The router's schema history in the in-process landings (``--schema-history``).
SCHEMA_HISTORY = "auto"
BATCH_BYTES = 0  # the router's batch byte limit (0: the sink's)
SHADOW_SERVER = ""  # the schema history's shadow server command ("": the host's mariadbd)


def _settings(server: EmbeddedServer, db: str, start: tuple[str, int], batch_seconds: float,
              until: str | None, decode_workers: int = -1,
              batch_changes: int | None = None) -> RouterSettings:
    return RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}", until=until,
                          filter=ChangeFilter([db]),
                          batch=BatchSettings(max_seconds=batch_seconds,
                                              max_changes=batch_changes,
                                              max_bytes=BATCH_BYTES),
                          decode_workers=decode_workers,
                          schema=HistorySettings(SCHEMA_HISTORY, shadow_server=SHADOW_SERVER))


class TimedSink:
    """A sink adapter that adds up how long its ``write`` calls take."""

    def __init__(self, adapter: Any):
        self.adapter = adapter
        self.write_seconds = 0.0
        self.stages: dict[str, float] = {}  # seconds per landing stage, over all batches
        # Its batch size, the CPUs it keeps, what it takes from decode workers.
        self.capabilities = capabilities_of(adapter)

    def __getattr__(self, name: str) -> Any:
        # The hooks its capabilities name (history_storage, durable_state, ...): the sink's.
        return getattr(self.adapter, name)

    def open(self) -> Any:
        return self.adapter.open()

    def write(self, batch: Any) -> None:
        began = time.perf_counter()
        self.adapter.write(batch)
        self.write_seconds += time.perf_counter() - began
        last = getattr(self.adapter, "last", None)
        for stage, seconds in (getattr(last, "stages", None) or {}).items():
            self.stages[stage] = self.stages.get(stage, 0.0) + seconds

    def close(self) -> None:
        self.adapter.close()


def router_alone(server: EmbeddedServer, db: str, start: tuple[str, int], out: Path,
                 decode_workers: int) -> tuple[float, float]:
    """Rows/s of the router on the same binlog into a JSON-lines file, without Spark, and
    the machine's CPU-seconds meanwhile."""
    router = Router(_settings(server, db, start, 1.0, "caught-up", decode_workers),
                    JsonLinesSink(out, fsync=False))
    with MachineCpu() as used:
        router.run()
    return router.stats.delivery.changes_delivered / used.seconds, used.cpu_seconds


def _workers(sink: TimedSink, decode_workers: int) -> int:
    """The decode workers asked for a landing: none for a sink that takes no encoded
    records (the router starts them only for one that does)."""
    return decode_workers if sink.capabilities.encoded_format else 0


def _land(server: EmbeddedServer, spark: Any, target: Target, rows: int,
          present: dict[str, int],
          start: tuple[str, int], batch_seconds: float, batch_changes: int | None,
          decode_workers: int) -> tuple[float, int, TimedSink, float]:
    """One landing of the workload into ``target`` (checked afterwards); its seconds,
    batches, the timed sink and the machine's CPU-seconds during it."""
    db = target.db
    sink = TimedSink(target.sink(spark))
    router = Router(_settings(server, db, start, batch_seconds, "caught-up",
                              _workers(sink, decode_workers),
                              batch_changes=batch_changes), sink)
    with MachineCpu() as used:
        router.run()
    seconds = used.seconds
    landed = target.changelog_count(spark, present)
    if landed != rows:
        raise SystemExit(f"{target.mode}: {landed} changes landed, {rows} written")
    for table, held in present.items() if target.kind == "iceberg" else ():
        mirrored = target.mirror_count(spark, table)
        source = server.execute(f"SELECT count(*) FROM `{db}`.{table}")[0][0]
        if mirrored != held or source != held:
            raise SystemExit(f"iceberg: the mirror of {table} holds {mirrored} rows, the "
                             f"source {source}, the workload left {held}")
    return seconds, router.stats.delivery.batches_delivered, sink, used.cpu_seconds


def throughput(server: EmbeddedServer, spark: Any, target: Target, rows: int, tx_rows: int,
               batch_seconds: float, batch_changes: int | None = None,
               compare: bool = True, decode_workers: int = -1,
               shape: str = "inserts", repeat: int = 1) -> dict[str, Any]:
    """Write the workload, then land it ``repeat`` times (each into new tables), each
    landing followed by the router alone with decode workers on the same binlog: the
    figures are the medians, so a ratio is not one noisy pair."""
    db = target.db
    server.execute([f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`"])
    start = server.binlog_position()
    server.execute(table_sql(shape).format(db=db))
    if shape == "mixed-keyless":
        server.execute(KEYLESS_TABLE.format(db=db))
    write_seconds, present = write_workload(server, db, rows, tx_rows, shape)
    out = target.where.parent / f"{target.mode}-alone.jsonl"
    landings: list[tuple[float, int, TimedSink, float]] = []
    alone_workers: list[tuple[float, float]] = []
    for n in range(repeat):
        landings.append(_land(server, spark, target if n == 0 else target.again(n), rows,
                              present, start, batch_seconds, batch_changes, decode_workers))
        if compare:
            alone_workers.append(router_alone(server, db, start, out, -1))
    # The median landing (the lower middle one of an even count) gives every figure.
    seconds, batches, sink, cpu = sorted(landings, key=lambda landing: landing[0])[
        (len(landings) - 1) // 2]
    if not compare:
        return {"router_seconds": seconds}
    alone = router_alone(server, db, start, out, 0)[0]
    workers = _workers(sink, decode_workers)
    # the landings' rule, too
    alone_median, alone_cpu = sorted(alone_workers)[(len(alone_workers) - 1) // 2]
    return {"rows": rows, "shape": shape, "transactions": -(-rows // tx_rows),
            "write_seconds": write_seconds,
            "start": f"{start[0]}:{start[1]}",
            "end": "{}:{}".format(*server.binlog_position()),
            "repeat": repeat,
            "router_seconds": seconds, "rows_per_second": rows / seconds,
            "each_rows_per_second": [rows / landing[0] for landing in landings],
            "batches": batches,
            "sink_write_seconds": sink.write_seconds,
            "sink_stage_seconds": {k: round(v, 2) for k, v in sink.stages.items()},
            "router_alone_rows_per_second": alone,
            "router_alone_workers_rows_per_second": alone_median,
            "each_router_alone_workers_rows_per_second": [a[0] for a in alone_workers],
            # The machine's busy CPU-seconds (every process: decode workers, the JVM, the
            # server) of the median landing and of the median router alone with workers.
            "cpu_seconds": cpu, "router_alone_workers_cpu_seconds": alone_cpu,
            "decode_workers": workers,
            # The router alone as the Spark run was set up: with or without decode workers.
            "router_alone_same_rows_per_second": alone if workers == 0 else alone_median}


def cold_cli(server: EmbeddedServer, target: Target, base: Path, start: str, end: str,
             repeat: int) -> dict[str, Any]:
    """``changestream run ... --until caught-up`` as new processes, each on a new warehouse,
    ``repeat`` times each way: from ``start`` (the changes after it) and from ``end``
    (nothing to land: Python's and Spark's start, the sink's open and close). Each run's
    own log (``-v --log-json``; Spark kept quiet by its log4j2 file, as without ``-v``)
    gives its sink's open, Spark's start with it, and its reading and landing apart:
    rows/s = changes / the median reading and landing of the full runs. The difference of the
    whole processes' median times is reported beside it. The router alone is run the same
    way too (a new process into JSON lines, ``repeat`` times): the cold ratio's other side.
    One run with nothing to land goes first, unmeasured (``first_run``)."""
    from changestream.sinks.spark.session import quiet_log4j2

    def run(begin: str, folder: Path, spark: bool = True) -> dict[str, float]:
        option = "warehouse" if target.kind == "iceberg" else "path"
        extra = [a for k, v in target.options.items() for a in ("--sink-option", f"{k}={v}")]
        sink = ["--sink", f"spark:{target.kind}", "--sink-option", f"{option}={folder}",
                *extra,
                "--sink-option", "conf.spark.driver.extraJavaOptions="
                f"-Dlog4j2.configurationFile=file:{quiet_log4j2()}",
                "--sink-option", "conf.spark.ui.showConsoleProgress=false"] if spark else [
                    "--sink", f"jsonl:{folder}.jsonl"]
        command = [sys.executable, "-c", "import sys; from changestream.cli import main; "
                   "sys.exit(main())", "run", "-v", "--log-json", "--source", server.url,
                   "--start", begin, "--until", "caught-up", "--include", target.db, *sink,
                   "--position-file", str(folder) + ".position"]
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800, env={
            **os.environ, "CHANGESTREAM_SCHEMA_SHADOW_SERVER": SHADOW_SERVER})
        whole = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"{target.mode}: the cold CLI run failed: {done.stderr[-2000:]}")
        found: dict[str, float] = {"whole": whole}
        for line in done.stderr.splitlines():
            if not line.startswith("{"):
                continue
            message = json.loads(line).get("message", "")
            opened = re.search(r" opened in ([0-9.]+) s$", message)
            if opened:
                found["open"] = float(opened.group(1))
            stopped = re.match(r"stopped: \d+ transactions, (\d+) changes .* in ([0-9.]+) s \(",
                               message)
            if stopped:
                found["changes"] = float(stopped.group(1))
                found["landing"] = float(stopped.group(2))
        if "open" not in found or "landing" not in found:
            raise SystemExit(f"{target.mode}: the cold CLI run logged no open or stop time: "
                             f"{done.stderr[-2000:]}")
        return found

    # Unmeasured: on a machine without the driver's class-data archive yet, the first start
    # writes it as its JVM exits (seconds, before the process's pipes close).
    first = run(end, base / f"cold_first_{target.mode}")
    empty = [run(end, base / f"cold_empty_{target.mode}_{n}") for n in range(repeat)]
    full = [run(start, base / f"cold_{target.mode}_{n}") for n in range(repeat)]
    alone = [run(start, base / f"cold_alone_{target.mode}_{n}", spark=False)
             for n in range(repeat)]
    if any(r["changes"] for r in empty):
        raise SystemExit(f"{target.mode}: an empty cold run landed changes")
    changes = int(full[0]["changes"])  # the workload's rows and the delay's probes

    def median(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median_low([r[key] for r in runs])

    return {"repeat": repeat, "first_run": first, "full_runs": full, "empty_runs": empty,
            "whole_seconds": median(full, "whole"), "fixed_seconds": median(empty, "whole"),
            "open_seconds": median(full, "open"), "landing_seconds": median(full, "landing"),
            "empty_landing_seconds": median(empty, "landing"),
            "changes": changes, "rows_per_second": changes / median(full, "landing"),
            "alone_runs": alone, "alone_landing_seconds": median(alone, "landing"),
            "alone_rows_per_second": changes / median(alone, "landing"),
            "difference_rows_per_second": changes / max(
                median(full, "whole") - median(empty, "whole"), 1e-9)}


def delay(server: EmbeddedServer, spark: Any, target: Target, first_id: int, probes: int,
          batch_seconds: float, shape: str = "inserts") -> dict[str, Any]:
    db = target.db
    router = Router(_settings(server, db, server.binlog_position(), batch_seconds, None),
                    target.sink(spark))
    router.start()
    deadline = time.monotonic() + 60
    while not router.stats.reading.caught_up:  # resumed from the sink's position and read it all
        if time.monotonic() > deadline:
            raise SystemExit(f"{target.mode}: the live router did not catch up")
        time.sleep(0.05)
    delays, polls = [], []
    # The poll's first run compiles Spark's query (1-1.5 s on 2 CPUs, which the router
    # shares): a reader's cost, not the landing's, so it is paid before the first probe.
    target.visible(spark, -1)
    try:
        with server.connect() as conn, conn.cursor() as cur:
            for n in range(probes):
                row_id = first_id + n
                cur.execute("SET time_zone = '+00:00'")
                cur.execute(f"INSERT INTO `{db}`.t VALUES {_row(row_id, shape)}")  # autocommit
                committed = time.perf_counter()
                while True:
                    asked = time.perf_counter()
                    seen = target.visible(spark, row_id)
                    polls.append(time.perf_counter() - asked)
                    if seen:
                        delays.append(time.perf_counter() - committed)
                        break
                    if time.perf_counter() - committed > 120:
                        raise SystemExit(f"{target.mode}: row {row_id} not visible in 120 s")
                time.sleep(0.25 + (n % 4) * 0.1)  # probes at varying moments of the batch
    finally:
        router.stop()
        router.wait(120)
    in_order = list(delays)
    delays.sort()
    return {"probes": probes, "batch_seconds": batch_seconds, "delays_seconds": in_order,
            "median_seconds": statistics.median(delays),
            "p95_seconds": delays[min(len(delays) - 1, round(0.95 * (len(delays) - 1)))],
            "min_seconds": delays[0], "max_seconds": delays[-1],
            "median_poll_seconds": statistics.median(polls)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--tx-rows", type=int, default=100)
    parser.add_argument("--modes", default="parquet,iceberg",
                        help="parquet, iceberg, iceberg-equality (mirrors with equality "
                             "deletes, as before position deletes): comma-separated")
    parser.add_argument("--shape", choices=SHAPES, default="inserts",
                        help="inserts only; 80%% inserts, 15%% updates, 5%% deletes; the same "
                             "with a keyless table; the mix on a table of 40 columns (see "
                             "the module's docstring)")
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--batch-seconds", type=float, default=1.0,
                        help="the router's micro-batch time limit (its default: 1.0)")
    parser.add_argument("--batch-changes", type=int, default=None,
                        help="the router's micro-batch size limit (default: the sink's)")
    parser.add_argument("--server", choices=("mariadb", "mysql"), default="mariadb",
                        help="mariadb: Debian's MariaDB; mysql: MySQL 9 from its sid root "
                             "(scripts/setup-mysql-root.sh)")
    parser.add_argument("--batch-bytes", type=int, default=0,
                        help="the router's micro-batch byte limit (default 0: the sink's)")
    parser.add_argument("--master", default=None, help="Spark master (default local[CPUs])")
    parser.add_argument("--change-objects", action="store_true",
                        help="the sink takes change objects decoded in the router's process "
                             "(its option arrow_workers=false) instead of the decode "
                             "workers' Arrow frames")
    parser.add_argument("--decode-workers", type=int, default=-1,
                        help="the router's decode workers in the Spark run (default -1: as "
                             "changestream run has them, one per CPU but the one the Spark "
                             "sink keeps for its writing; 0: none). The router alone always "
                             "has one per CPU.")
    parser.add_argument("--cold-cli", action="store_true",
                        help="also land the rows with new `changestream run` processes "
                             "(--repeat of them, and as many with nothing to land)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="land the workload this many times, each followed by the router "
                             "alone; the figures are the medians (default 3)")
    parser.add_argument("--schema-history", choices=("auto", "off"), default="auto",
                        help="the schema history in the in-process landings: auto (as "
                             "`changestream run` has it: a new target seeds it, its shadow "
                             "server's start in the router's time) or off (the figures "
                             "before 2026-11-27: the bench's sink wrapper hid the sink's wish "
                             "for it). The cold runs keep the default")
    parser.add_argument("--json", default="spark_landing.json", help="where the figures go")
    args = parser.parse_args(argv)
    global SCHEMA_HISTORY, BATCH_BYTES, SHADOW_SERVER
    SCHEMA_HISTORY = args.schema_history
    BATCH_BYTES = args.batch_bytes
    os.environ.setdefault("TZ", "UTC")
    time.tzset()

    from changestream.sinks.spark.jvm.jars import iceberg_jars
    from changestream.sinks.spark.session import start_session

    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "workload": {"rows": args.rows, "tx_rows": args.tx_rows, "shape": args.shape,
                     "server": args.server,
                     "schema_history": args.schema_history},
        "modes": {}}
    with tempfile.TemporaryDirectory(prefix="changestream-bench-") as tmp, \
            private_server(args.server) as server:
        server.start()
        SHADOW_SERVER = shadow_command(server) or ""
        began = time.perf_counter()
        spark = start_session(args.master, {}, iceberg_jars(), "changestream-bench")
        results["spark_start_seconds"] = time.perf_counter() - began
        results["machine"]["spark"] = f"{spark.version} {spark.sparkContext.master}"
        spark.sparkContext.setLogLevel("ERROR")
        try:
            # A session's first landings load and compile the JVM's writers: done for
            # every mode before the first is measured (else a mode measured later runs on
            # a warmer JVM), on a small table of the same shape in batches small enough
            # that later ones replace rows of earlier ones; reported apart.
            warm_ups = {}
            for mode in args.modes.split(","):
                db = mode.replace("-", "_")
                warm_ups[mode] = throughput(
                    server, spark, Target(mode, Path(tmp), f"warm_{db}",
                                          not args.change_objects),
                    4_000, args.tx_rows, args.batch_seconds, 1_000, compare=False,
                    shape=args.shape)
            for mode in args.modes.split(","):
                db = mode.replace("-", "_")
                warm = warm_ups[mode]
                target = Target(mode, Path(tmp), f"bench_{db}",
                                not args.change_objects)
                print(f"{mode}: warmed up in {warm['router_seconds']:.1f} s; landing "
                      f"{args.rows:,} rows ...", file=sys.stderr)
                bulk = throughput(server, spark, target, args.rows, args.tx_rows,
                                  args.batch_seconds, args.batch_changes,
                                  decode_workers=args.decode_workers, shape=args.shape,
                                  repeat=args.repeat)
                bulk["warm_up_seconds"] = warm["router_seconds"]
                print(f"{mode}: {bulk['rows_per_second']:,.0f} rows/s; measuring delay ...",
                      file=sys.stderr)
                live = delay(server, spark, target, 10_000_000, args.probes,
                             args.batch_seconds, args.shape) if args.probes else None
                results["modes"][mode] = {"throughput": bulk, "delay": live}
                if args.cold_cli:
                    print(f"{mode}: the same rows from a cold `changestream run` ...",
                          file=sys.stderr)
                    # From the workload's start the cold runs land the delay's probes
                    # too; the empty runs start at the binlog's end as it is now.
                    results["modes"][mode]["cold_cli"] = cold_cli(
                        server, target, Path(tmp), bulk["start"],
                        "{}:{}".format(*server.binlog_position()), args.repeat)
        finally:
            spark.stop()
    # The bench's own process: the driver of every landing, and the router alone's runs.
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print(f"Spark start {results['spark_start_seconds']:.1f} s; "
          f"the driver process's peak RSS {results['peak_rss_mb']:.0f} MB; "
          f"{args.rows:,} changes ({args.shape}) in transactions of {args.tx_rows}; "
          f"rows/s: the median of {args.repeat} landings")
    print(f"{'mode':8} {'rows/s':>9} {'router s':>9} {'batches':>7} {'delay median':>13} "
          f"{'p95':>7} {'max':>7} {'poll':>6}")
    for mode, r in results["modes"].items():
        b, d = r["throughput"], r["delay"]
        delays = (f"{d['median_seconds']:12.2f}s {d['p95_seconds']:6.2f}s "
                  f"{d['max_seconds']:6.2f}s {d['median_poll_seconds']:5.2f}s"
                  if d else f"{'(--probes 0)':>13}")
        print(f"{mode:8} {b['rows_per_second']:9,.0f} {b['router_seconds']:9.1f} "
              f"{b['batches']:7d} {delays}")
    for mode, r in results["modes"].items():
        b = r["throughput"]
        share = b["sink_write_seconds"] / b["router_seconds"]
        same = b["router_alone_same_rows_per_second"]
        keeps_up = b["rows_per_second"] >= 0.9 * same
        print(f"{mode}: the router alone on the same binlog into JSON lines: "
              f"{b['router_alone_rows_per_second']:,.0f} rows/s in one process "
              f"({b['rows_per_second'] / b['router_alone_rows_per_second']:.2f}x), "
              f"{b['router_alone_workers_rows_per_second']:,.0f} with decode workers "
              f"({b['rows_per_second'] / b['router_alone_workers_rows_per_second']:.2f}x); "
              f"the Spark run had decode workers {'off' if b['decode_workers'] == 0 else 'on'}; "
              f"Spark's writes took {b['sink_write_seconds']:.1f} s of "
              f"{b['router_seconds']:.1f} s ({share:.0%}): "
              + ("the Spark path keeps up." if keeps_up else
                 "the Spark path does not keep up with the router set up the same way."))
        print(f"{mode}: where the writes' time went: " + ", ".join(
            f"{k} {v:.1f} s" for k, v in b["sink_stage_seconds"].items()))
        if "cpu_seconds" in b:
            work = b["cpu_seconds"] / b["router_alone_workers_cpu_seconds"]
            used = b["cpu_seconds"] / b["router_seconds"] / (os.cpu_count() or 1)
            print(f"{mode}: the machine's CPU time: the landing {b['cpu_seconds']:.2f} "
                  f"CPU-s ({used:.0%} of its CPUs), "
                  f"the router alone {b['router_alone_workers_cpu_seconds']:.2f} CPU-s: "
                  f"{work:.2f} times the work, so at the same use of the CPUs the landing "
                  f"could reach {1 / work:.2f}x.")
        cold = r.get("cold_cli")
        if cold:
            alone = b["router_alone_workers_rows_per_second"]
            print(f"{mode}: cold `changestream run --until caught-up` (medians of "
                  f"{cold['repeat']} new processes): {cold['whole_seconds']:.1f} s in all, of "
                  f"which the sink's open (Spark's start with it) {cold['open_seconds']:.1f} s "
                  f"and reading and landing {cold['landing_seconds']:.2f} s: "
                  f"{cold['rows_per_second']:,.0f} rows/s; the router alone as a new process "
                  f"into JSON lines read and delivered them in {cold['alone_landing_seconds']:.2f}"
                  f" s ({cold['alone_rows_per_second']:,.0f} rows/s): "
                  f"{cold['rows_per_second'] / cold['alone_rows_per_second']:.2f}x "
                  f"({cold['rows_per_second'] / alone:.2f}x the warm router alone with decode "
                  "workers); an empty run took "
                  f"{cold['fixed_seconds']:.1f} s, so the whole processes differ by "
                  f"{cold['whole_seconds'] - cold['fixed_seconds']:.2f} s"
                  + (f" ({cold['difference_rows_per_second'] / alone:.2f}x)"
                     if cold['whole_seconds'] > cold['fixed_seconds'] else "")
                  + f"; a first empty run before them (unmeasured) took "
                  f"{cold['first_run']['whole']:.1f} s")
    print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
