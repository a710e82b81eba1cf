"""Throughput benchmark: changestream against its peers on the same binlog.

Starts a private MariaDB, writes a deterministic workload (200,000 rows over a table of 8
typical columns, half in 100-row transactions and half as single-row autocommits; with
``--wide`` a 40-column table), then measures on the same binlog:

- changestream end to end: live source -> actors -> JSON-lines sink into a file
- changestream from the binlog files (file source -> actors -> JSON-lines file)
- a bare python-mysql-replication loop that touches every row value
- ``mariadb-binlog -vv --base64-output=DECODE-ROWS`` on the binlog files

It prints rows/s for each, the ratios, and peak memory (RSS), compares changestream's
values with python-mysql-replication's on the first 5,000 inserted rows (every column type
of the workload is one that library decodes right), and writes the figures as JSON.

    .venv/bin/python bench/throughput.py [--rows 200000] [--wide] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from changestream.devserver import EmbeddedMariaDB

NARROW = ("id BIGINT PRIMARY KEY, qty INT, name VARCHAR(40), price DECIMAL(12,2), "
          "created DATETIME(6), score DOUBLE, flag TINYINT, label VARCHAR(40) "
          "CHARACTER SET utf8mb4")


def _wide_columns() -> str:
    kinds = ["INT", "VARCHAR(40)", "DECIMAL(12,2)", "DATETIME(6)", "DOUBLE", "TINYINT",
             "BIGINT", "VARCHAR(40) CHARACTER SET utf8mb4"]
    cols = ["id BIGINT PRIMARY KEY"]
    cols += [f"c{i} {kinds[i % len(kinds)]}" for i in range(1, 40)]
    return ", ".join(cols)


def _value(kind: str, i: int, rng: random.Random) -> str:
    if kind.startswith(("INT", "BIGINT")):
        return str(rng.randint(-2**31, 2**31 - 1))
    if kind.startswith("TINYINT"):
        return str(rng.randint(-128, 127))
    if kind.startswith("DECIMAL"):
        return str(Decimal(rng.randint(-10**11, 10**11)) / 100)
    if kind.startswith("DATETIME"):
        t = dt.datetime(2020, 1, 1) + dt.timedelta(seconds=rng.randint(0, 10**8),
                                                   microseconds=rng.randint(0, 999_999))
        return f"'{t.isoformat(' ')}'"
    if kind.startswith("DOUBLE"):
        return repr(rng.uniform(-1e6, 1e6))
    if "utf8mb4" in kind:
        return f"'ünïcödé ✓ {i} {rng.randint(0, 10**6)}'"
    return f"'name {i} {rng.randint(0, 10**9)}'"


def _row(columns: list[str], i: int, rng: random.Random) -> str:
    return "(" + ", ".join([str(i)] + [_value(k, i, rng) for k in columns[1:]]) + ")"


def write_workload(server: EmbeddedMariaDB, rows: int, wide: bool) -> None:
    rng = random.Random(20261121)
    definition = _wide_columns() if wide else NARROW
    kinds = [c.split(" ", 1)[1] for c in definition.split(", ")]
    server.execute(["SET GLOBAL innodb_flush_log_at_trx_commit = 2", "SET GLOBAL sync_binlog = 0",
                    "CREATE DATABASE bench", f"CREATE TABLE bench.t ({definition})"])
    conn = server.connect(client_flag=1 << 16)  # MULTI_STATEMENTS: fewer round trips
    try:
        with conn.cursor() as cur:
            half = rows // 2
            for start in range(1, half + 1, 100):  # 100-row transactions
                values = ",".join(_row(kinds, i, rng) for i in range(start, min(start + 100,
                                                                                 half + 1)))
                cur.execute(f"BEGIN; INSERT INTO bench.t VALUES {values}; COMMIT")
                while cur.nextset():
                    pass
            for start in range(half + 1, rows + 1, 200):  # single-row autocommits
                sql = ";".join(f"INSERT INTO bench.t VALUES {_row(kinds, i, rng)}"
                               for i in range(start, min(start + 200, rows + 1)))
                cur.execute(sql)
                while cur.nextset():
                    pass
    finally:
        conn.close()


_PEAK = ("import resource, subprocess, sys, time; t = time.monotonic(); "
         "code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL); "
         "print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
         "sys.exit(code)")


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``command`` run as a child process."""
    result = subprocess.run([sys.executable, "-c", _PEAK, *command], capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed: {result.stderr[-2000:]}")
    seconds, rss_kb = result.stdout.split()[-2:]
    return float(seconds), int(rss_kb) / 1024


PYMYSQLREPLICATION_LOOP = """
import sys
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent
port, file, pos = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
stream = BinLogStreamReader(
    connection_settings={"host": "127.0.0.1", "port": port, "user": "root", "passwd": ""},
    server_id=4242, log_file=file, log_pos=pos, resume_stream=True, blocking=False,
    only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
rows = touched = 0
for event in stream:
    for row in event.rows:
        rows += 1
        for value in row["values"].values():
            touched += value is not None
stream.close()
print(rows, touched)
"""


PYMYSQLREPLICATION_SAMPLE = """
import sys
import orjson
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent
from changestream.delivery.records import json_default
port, file, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
stream = BinLogStreamReader(
    connection_settings={"host": "127.0.0.1", "port": port, "user": "root", "passwd": ""},
    server_id=4243, log_file=file, log_pos=4, resume_stream=True, blocking=False,
    only_events=[WriteRowsEvent])
rows = []
for event in stream:
    rows.extend(row["values"] for row in event.rows)
    if len(rows) >= limit:
        break
stream.close()
sys.stdout.buffer.write(orjson.dumps(rows[:limit], default=json_default))
"""


def compare_sample(port: int, first: str, records_path: Path, limit: int) -> dict[str, int]:
    """python-mysql-replication's values of the first ``limit`` inserted rows against the
    ``after`` images changestream wrote: how many rows and values were compared, and how many
    differ (every column type of the workload is one that library decodes right)."""
    result = subprocess.run([sys.executable, "-c", PYMYSQLREPLICATION_SAMPLE, str(port), first,
                             str(limit)], capture_output=True, check=True)
    theirs = {row["id"]: row for row in json.loads(result.stdout)}
    compared = values = differ = 0
    with open(records_path, "rb") as f:
        for line in f:
            after = json.loads(line)["after"]
            row = theirs.get(after["id"]) if after else None
            if row is None:
                continue
            compared += 1
            for name, value in after.items():
                values += 1
                if row.get(name) != value:
                    differ += 1
                    if differ <= 5:
                        print(f"differs: row {after['id']} {name}: changestream {value!r}, "
                              f"python-mysql-replication {row.get(name)!r}", file=sys.stderr)
            if compared == len(theirs):
                break
    return {"rows": compared, "values": values, "differ": differ}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--wide", action="store_true", help="40 columns instead of 8")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="changestream-bench-"))  # removed at the end
    figures: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "rows": args.rows, "columns": 40 if args.wide else 8,
    }
    with EmbeddedMariaDB() as server:
        server.execute("RESET MASTER")
        began = time.monotonic()
        write_workload(server, args.rows, args.wide)
        figures["workload_seconds"] = round(time.monotonic() - began, 2)
        server.execute("FLUSH BINARY LOGS")
        first = server.binlog_files()[0]
        binlogs = [str(p) for p in server.binlog_files()]
        figures["binlog_bytes"] = sum(os.path.getsize(p) for p in binlogs)
        cs = [sys.executable, "-m", "changestream.cli", "run", "--until", "caught-up",
              "--include", "bench", "--no-preflight", "--start", f"{first.name}:4"]
        runs: dict[str, tuple[float, float]] = {}
        runs["changestream_live"] = timed([*cs, "--source", server.url, "--sink",
                                           f"jsonl:{work / 'live.jsonl'}"])
        runs["changestream_files"] = timed([*cs, "--source", f"file://{server.binlog_dir}",
                                            "--sink", f"jsonl:{work / 'files.jsonl'}"])
        runs["python_mysql_replication"] = timed([sys.executable, "-c",
                                                  PYMYSQLREPLICATION_LOOP, str(server.port),
                                                  first.name, "4"])
        runs["mariadb_binlog"] = timed(["mariadb-binlog", "-vv",
                                        "--base64-output=DECODE-ROWS", *binlogs])
        with open(work / "live.jsonl", "rb") as f:
            lines = sum(1 for _ in f)
        assert lines >= args.rows, f"changestream delivered {lines} records for {args.rows} rows"
        figures["values_compared"] = compare_sample(server.port, first.name,
                                                    work / "live.jsonl", 5_000)
    results = {}
    for name, (seconds, rss) in runs.items():
        results[name] = {"seconds": round(seconds, 2), "rows_per_second": round(args.rows /
                                                                                 seconds),
                         "peak_rss_mb": round(rss, 1)}
    base = results["python_mysql_replication"]["rows_per_second"]
    server_tool = results["mariadb_binlog"]["rows_per_second"]
    for name in ("changestream_live", "changestream_files"):
        results[name]["x_python_mysql_replication"] = round(
            results[name]["rows_per_second"] / base, 2)
        results[name]["x_mariadb_binlog"] = round(
            results[name]["rows_per_second"] / server_tool, 2)
    figures["results"] = results
    print(f"{args.rows} rows, {figures['columns']} columns, binlog "
          f"{figures['binlog_bytes'] / 1e6:.1f} MB, on {os.cpu_count()} CPUs")
    print(f"{'reader':28} {'seconds':>8} {'rows/s':>10} {'peak MB':>8}  ratios")
    for name, r in results.items():
        ratios = ""
        if "x_python_mysql_replication" in r:
            ratios = (f"{r['x_python_mysql_replication']}x python-mysql-replication, "
                      f"{r['x_mariadb_binlog']}x mariadb-binlog")
        print(f"{name:28} {r['seconds']:8.2f} {r['rows_per_second']:10,} "
              f"{r['peak_rss_mb']:8.1f}  {ratios}")
    sample = figures["values_compared"]
    print(f"values against python-mysql-replication: {sample['rows']:,} rows, "
          f"{sample['values']:,} values compared, {sample['differ']} differ")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
