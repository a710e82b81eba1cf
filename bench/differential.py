"""The randomized differential test for as long as it is given (docs/testing.md).

Runs seed after seed of :mod:`tests.differential` on private servers (MariaDB 10.11, 11.8,
MySQL 9.7) for ``--seconds``, reading each workload's records live and from files, with and
without decode workers, and prints what was tried (seeds, rows, columns, column types) and
the seed of every difference, to be replayed with
``CHANGESTREAM_DIFFERENTIAL_SEEDS=<seed> pytest tests/integration/test_differential.py``.

    .venv/bin/python bench/differential.py --seconds 600 --servers mariadb,mariadb11,mysql
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from changestream.devserver import EmbeddedMariaDB
from tests.differential import differences, read_records, rebuild, run_workload
from tests.servers import PrivateMariaDB11, PrivateMySQL, require_server

SERVERS = {"mariadb": EmbeddedMariaDB, "mariadb11": PrivateMariaDB11, "mysql": PrivateMySQL}
READS = [("live", 0), ("live", 2), ("files", 0), ("files", 2)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--servers", default="mariadb,mariadb11,mysql")
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--transactions", type=int, default=120)
    args = parser.parse_args()
    servers = {name: require_server(SERVERS[name]()) for name in args.servers.split(",")}
    tried: Counter[str] = Counter()
    families: Counter[str] = Counter()
    failed: list[str] = []
    seed, deadline = args.first_seed, time.monotonic() + args.seconds
    try:
        with tempfile.TemporaryDirectory() as scratch:
            while time.monotonic() < deadline:
                for name, server in servers.items():
                    database = f"differential_{seed}"
                    server.execute([f"DROP DATABASE IF EXISTS `{database}`",
                                    f"CREATE DATABASE `{database}`"])
                    start = server.binlog_position()
                    work = run_workload(server, seed, database, args.transactions)
                    for source, workers in READS:
                        out = Path(scratch) / f"{name}-{seed}-{source}-{workers}.jsonl"
                        records = read_records(server, database, start, out, source, workers)
                        diff = differences(server, work, rebuild(work, records))
                        out.unlink()
                        tried["reads"] += 1
                        tried["records"] += len(records)
                        if diff:
                            failed.append(f"seed {seed} on {name} ({source}, {workers} "
                                          f"decode workers): {diff[0][:400]}")
                            print(failed[-1], flush=True)
                    tried["workloads"] += 1
                    tried["tables"] += len(work.tables)
                    tried["columns"] += sum(len(t.columns) for t in work.tables)
                    families.update(c.family or "key" for t in work.tables for c in t.columns)
                    server.execute(f"DROP DATABASE `{database}`")
                seed += 1
    finally:
        for server in servers.values():
            server.close()
    print(f"seeds {args.first_seed}..{seed - 1} on {', '.join(servers)}: "
          f"{tried['workloads']} workloads, {tried['tables']} tables, {tried['columns']} "
          f"columns, {tried['records']} records in {tried['reads']} reads; "
          f"differences: {len(failed)}")
    print("column kinds:", ", ".join(f"{k} {v}" for k, v in sorted(families.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
