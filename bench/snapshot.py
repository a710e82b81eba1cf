"""Benchmark: a snapshot of one big table, against the server's own dump tool.

Starts a private MariaDB, loads ``--rows`` rows of a table of ``--shape`` (``typical``: 8
columns, INT key, INT, VARCHAR, DECIMAL, DATETIME(6), DATE, TIMESTAMP(6), BOOLEAN;
``narrow``: 2 integers; ``wide``: 24 columns of numbers, text and dates; ``composite``: 6
columns, a key of a VARCHAR and an INT; ``keyless``: the typical table without a key, read
whole; every value a function of the row number) and
resets the binlog, then in one run, each as a child process with its wall time and peak
RSS:

- ``changestream run --snapshot initial-only`` into a JSON-lines file (the snapshot alone:
  it stops when done), with ``--chunk-rows`` rows per chunk, once for each number of
  ``--readers`` (``snapshot.readers``), with the compiled row path, and again with the
  Python one (``CHANGESTREAM_PURE_PYTHON=1``, the first number of readers; the records
  compared);
- ``mariadb-dump --quick --single-transaction`` of the same table into a file (with
  ``--server mysql``, a private MySQL 9 from its sid root, ``mysqldump``);
- with ``--iceberg``, the same snapshot into Iceberg tables on local Spark (Spark's start,
  about 7 s, counted in).

Prints rows/s, peak MB and the ratio to mariadb-dump, and checks the JSON lines hold every
row once::

    python bench/snapshot.py                    # 1,000,000 rows
    python bench/snapshot.py --shape wide --rows 300000
    python bench/snapshot.py --rows 200000 --chunk-rows 20000 --iceberg
    python bench/snapshot.py --readers 1,2,3 --shape composite --server mysql
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as other benches

from changestream.devserver import EmbeddedServer
from tests.servers import private_server

TABLE = ("CREATE TABLE bench.t (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64), "
         "amount DECIMAL(12,2), at DATETIME(6), d DATE, ts TIMESTAMP(6) NULL, flag BOOLEAN)")


def _typical(i: int) -> str:
    return (f"({i}, {i % 97}, 'row {i} {'x' * (i % 23)}', {i * 0.37:.2f}, "
            f"'2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00."
            f"{i % 1000000:06d}', '{1990 + i % 30}-01-{1 + i % 28:02d}', "
            f"FROM_UNIXTIME({1_700_000_000 + i}), {i % 2})")


_WIDE_COLUMNS = ", ".join(
    [f"i{n} BIGINT" for n in range(6)] + [f"s{n} VARCHAR(80)" for n in range(6)]
    + [f"m{n} DECIMAL(14,4)" for n in range(4)] + [f"t{n} DATETIME" for n in range(4)]
    + ["body TEXT", "note VARCHAR(200)", "f DOUBLE"])


def _wide(i: int) -> str:
    return (f"({i}, " + ", ".join(str(i * (n + 3)) for n in range(6)) + ", "
            + ", ".join(f"'name {n} of row {i} with some words'" for n in range(6)) + ", "
            + ", ".join(f"{i * 0.0137 + n:.4f}" for n in range(4)) + ", "
            + ", ".join(f"'2023-{1 + (i + n) % 12:02d}-{1 + i % 28:02d} 10:{n:02d}:00'"
                        for n in range(4))
            + f", '{'lorem ipsum dolor sit amet ' * (1 + i % 8)}', 'it''s \"quoted\"', "
            f"{i / 7})")


def _composite(i: int) -> str:
    return (f"('r{i % 7}', {i}, {i % 97}, 'row {i} {'x' * (i % 23)}', {i * 0.37:.2f}, "
            f"'2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00')")


# name: (CREATE TABLE, a row's VALUES for row number i)
SHAPES = {
    "typical": (TABLE, _typical),  # 8 typical columns
    "composite": ("CREATE TABLE bench.t (region VARCHAR(8) NOT NULL, id INT NOT NULL, "
                  "k INT NOT NULL, v VARCHAR(64), amount DECIMAL(12,2), at DATETIME(6), "
                  "PRIMARY KEY (region, id))", _composite),
    "narrow": ("CREATE TABLE bench.t (id INT PRIMARY KEY, k INT NOT NULL)",
               lambda i: f"({i}, {i % 1000})"),
    "wide": (f"CREATE TABLE bench.t (id INT PRIMARY KEY, {_WIDE_COLUMNS})", _wide),
    # the typical table without a key: read whole, not in chunks (docs/snapshots.md)
    "keyless": (TABLE.replace(" PRIMARY KEY", ""), _typical),
}

_PEAK = ("import resource, subprocess, sys, time; t = time.monotonic(); "
         "code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL); "
         "print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
         "sys.exit(code)")


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``command`` run as a child process."""
    seconds, peak, _ = timed_with_log(command, env)
    return seconds, peak


def timed_with_log(command: list[str], env: dict[str, str] | None = None
                   ) -> tuple[float, float, str]:
    """:func:`timed`, and what ``command`` wrote on stderr."""
    result = subprocess.run([sys.executable, "-c", _PEAK, *command], capture_output=True,
                            text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed: {result.stderr[-2000:]}")
    seconds, rss_kb = result.stdout.split()[-2:]
    return float(seconds), int(rss_kb) / 1024, result.stderr


def load(server: EmbeddedServer, rows: int, shape: str = "typical") -> float:
    began = time.perf_counter()
    create, row = SHAPES[shape]
    server.execute(["CREATE DATABASE bench", create])
    with server.connect(autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        for first in range(1, rows + 1, 2000):
            values = ", ".join(row(i) for i in range(first, min(first + 2000, rows + 1)))
            cur.execute(f"INSERT INTO bench.t VALUES {values}")
            conn.commit()
    server.execute("RESET MASTER" if server.flavor == "mariadb" else
                   "RESET BINARY LOGS AND GTIDS")
    return time.perf_counter() - began


def _timeless(line: bytes) -> dict[str, object]:
    """A record without what differs between two runs: when it was written and read, and
    the snapshot's id (a time)."""
    record = json.loads(line)
    del record["ts"]
    record["transaction"]["id"] = record["transaction"]["id"].rsplit("-", 1)[-1]
    record["transaction"]["commit_ts"] = None
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-rows", type=int, default=10_000)
    parser.add_argument("--iceberg", action="store_true", help="also into Iceberg")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="typical",
                        help="the table: typical (8 columns), narrow (2 integer columns), "
                             "wide (24 columns, text and numbers), composite (a key of a "
                             "VARCHAR and an INT), keyless (typical, no key: read whole)")
    parser.add_argument("--readers", default="1,2",
                        help="snapshot.readers values to run, comma-separated (one given "
                             "twice runs twice)")
    parser.add_argument("--server", choices=("mariadb", "mysql"), default="mariadb",
                        help="mariadb: Debian's MariaDB; mysql: MySQL 9 from its sid root")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    readers = [int(n) for n in args.readers.split(",")]
    figures: dict[str, object] = {"rows": args.rows, "chunk_rows": args.chunk_rows,
                                  "cpus": os.cpu_count(), "machine": platform.platform(),
                                  "date": time.strftime("%Y-%m-%d")}
    with tempfile.TemporaryDirectory() as work, private_server(args.server) as server:
        work_dir = Path(work)
        figures["load_seconds"] = round(load(server, args.rows, args.shape), 1)
        figures["shape"] = args.shape
        env = {**os.environ, "CHANGESTREAM_SNAPSHOT_CHUNK_ROWS": str(args.chunk_rows)}
        base = [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
                "--include", "bench", "--snapshot", "initial-only", "--no-preflight"]
        runs: dict[str, tuple[float, float]] = {}
        outputs = []
        # A number of readers given again is run again (its own line: runs side by side).
        for name, extra in [*((f"changestream_jsonl_readers{n}" + (f"_{k}" if k else ""),
                               {"CHANGESTREAM_SNAPSHOT_READERS": str(n)})
                              for k, n in ((readers[:i].count(n), n)
                                           for i, n in enumerate(readers))),
                            ("changestream_jsonl_python",
                             {"CHANGESTREAM_PURE_PYTHON": "1",
                              "CHANGESTREAM_SNAPSHOT_READERS": str(readers[0])})]:
            out = work_dir / f"{name}.jsonl"
            runs[name] = timed([*base, "--sink", f"jsonl:{out}"], {**env, **extra})
            ids = set()
            with out.open("rb") as f:
                for line in f:
                    record = json.loads(line)
                    assert record["op"] == "snapshot"
                    ids.add(record["after"]["id"])
            assert len(ids) == args.rows, f"{name}: {len(ids)} distinct rows of {args.rows}"
            outputs.append(out)
        # Every run writes the same records (but for the times), in the same order.
        for other in outputs[1:]:
            with outputs[0].open("rb") as first, other.open("rb") as f:
                for a, b in zip(first, f, strict=True):
                    assert _timeless(a) == _timeless(b), (a, b)
            other.unlink()
        dump = work_dir / "dump.sql"
        tool = ["mariadb-dump"] if args.server == "mariadb" else \
            list(server.tool("mysqldump"))  # type: ignore[attr-defined]
        runs["server_dump"] = timed(
            ["sh", "-c", " ".join(tool) + f" --no-defaults -h 127.0.0.1 -P {server.port} "
                         f"-u root --quick --single-transaction bench t > {dump}"])
        if args.iceberg:
            warehouse = work_dir / "warehouse"
            iceberg = [*base, "--sink", "spark:iceberg", "--sink-option",
                       f"warehouse={warehouse}", "--sink-option", "master=local[2]",
                       "--sink-option", "conf.spark.ui.enabled=false"]
            seconds, peak, log = timed_with_log(
                [*iceberg, "-v"], {**env, "CHANGESTREAM_SNAPSHOT_READERS": str(readers[-1])})
            runs["changestream_iceberg"] = seconds, peak
            # Spark's start (the sink's open) apart: the snapshot's own rate into Iceberg.
            opened = re.search(r"opened in ([0-9.]+) s", log)
            if opened:
                runs["changestream_iceberg_after_open"] = seconds - float(opened[1]), peak
    dump_seconds = runs["server_dump"][0]
    print(f"{args.rows:,} rows, {args.shape} table on {args.server}, chunks of "
          f"{args.chunk_rows:,}, on "
          f"{os.cpu_count()} CPUs (load {figures['load_seconds']}s)")
    print(f"{'reader':24} {'seconds':>8} {'rows/s':>10} {'peak MB':>8}  ratio")
    for name, (seconds, peak) in runs.items():
        rate = args.rows / seconds
        ratio = "" if name == "server_dump" else f"{dump_seconds / seconds:.2f}x the dump"
        print(f"{name:24} {seconds:8.2f} {rate:10,.0f} {peak:8.1f}  {ratio}")
        figures[name] = {"seconds": round(seconds, 2), "rows_per_second": round(rate),
                         "peak_mb": round(peak, 1)}
    if "changestream_iceberg_after_open" in runs:
        jsonl = runs[f"changestream_jsonl_readers{readers[-1]}"][0]
        print(f"Iceberg (Spark's start apart) at "
              f"{jsonl / runs['changestream_iceberg_after_open'][0]:.2f}x the JSON-lines rate")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
