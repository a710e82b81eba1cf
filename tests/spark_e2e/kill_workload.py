"""The kill -9 tests' workload into Iceberg and their checks: the mirrors equal the source
and the changelogs hold every committed change exactly once."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from changestream.cli.scan import scan_transactions
from changestream.sources.files import FileSource

from .compare import assert_mirror_equals_source


def kill_workload(server: Any, db: str, rng: random.Random) -> None:
    """300 transactions (about 3,000 changes) on a keyed and a keyless table: inserts of 1
    to 20 rows, updates, deletes, rollbacks, and an ADD COLUMN halfway."""
    t, k = f"`{db}`.t", f"`{db}`.k"
    statements = [
        "SET time_zone = '+00:00'",
        f"CREATE TABLE {t} (id INT PRIMARY KEY, tx INT, v VARCHAR(40), amount DECIMAL(10,2),"
        " at DATETIME(6), d DATE, ts TIMESTAMP(3) NULL)",
        f"CREATE TABLE {k} (tx INT, n INT, note VARCHAR(20))",
    ]
    next_id = 1
    for tx in range(300):
        if tx == 150:
            statements.append(f"ALTER TABLE {t} ADD COLUMN extra INT")
        statements.append("BEGIN")
        size = rng.choice((1, 2, 5, 10, 20))
        rows = [f"({i}, {tx}, 'row {i}', {i * 1.25:.2f}, '2024-05-{1 + i % 28:02d} "
                f"10:00:{i % 60:02d}.{i:06d}', '{1000 + i}-01-01', "
                f"FROM_UNIXTIME({1_700_000_000 + i}.5))" for i in range(next_id, next_id + size)]
        next_id += size
        statements.append(f"INSERT INTO {t} (id, tx, v, amount, at, d, ts) VALUES "
                          + ",".join(rows))
        statements.append(f"INSERT INTO {k} VALUES ({tx}, {size}, 'tx {tx}'), "
                          f"({tx}, {size}, 'tx {tx}')")
        if tx % 7 == 3:
            statements.append(f"UPDATE {t} SET v = 'updated', amount = amount + 1 "
                              f"WHERE tx = {tx}")
        if tx % 11 == 5:
            statements.append(f"DELETE FROM {t} WHERE tx = {tx - 1}")
            statements.append(f"DELETE FROM {k} WHERE tx = {tx - 1}")
        if tx % 13 == 6:
            statements.append(f"UPDATE {k} SET note = 'changed' WHERE tx = {tx - 2}")
        if tx > 150 and tx % 5 == 0:
            statements.append(f"UPDATE {t} SET extra = tx WHERE tx = {tx}")
        statements.append("ROLLBACK" if tx % 50 == 25 else "COMMIT")
    server.execute(statements)


def landed_batches(warehouse: Path) -> int:
    """Batches the sink has committed: commits to its control table after the one that
    created it (each Iceberg commit writes a new metadata file)."""
    control = warehouse / "_changestream" / "batches" / "metadata"
    return max(0, sum(1 for _ in control.glob("*.metadata.json")) - 1) \
        if control.exists() else 0


def committed_changes(server: Any, db: str, start: tuple[str, int]) -> dict[str, Counter]:
    """Rows changed per committed transaction and table of ``db``, from the binlog files."""
    out: dict[str, Counter] = {}
    for t in scan_transactions(FileSource(server.binlog_files(), start_file=start[0],
                                          start_pos=start[1])):
        for name, c in t.tables.items():
            if t.status == "committed" and name.startswith(f"{db}.") and sum(c.values()):
                out.setdefault(t.gtid, Counter())[name.split(".", 1)[1]] += sum(c.values())
    return out


def assert_landed_exactly_once(server: Any, spark: Any, db: str, start: tuple[str, int],
                               catalog: str) -> None:
    """The mirrors of ``t`` (keyed) and ``k`` (keyless) equal the source tables, and their
    changelogs hold each change committed since ``start`` once: per transaction the
    changes the binlog has, numbered 0 to size - 1 over both tables."""
    assert_mirror_equals_source(server, spark, db, "t", f"{catalog}.{db}.t", "id")
    assert_mirror_equals_source(server, spark, db, "k", f"{catalog}.{db}.k", None)
    expected = committed_changes(server, db, start)
    seqs: dict[str, list[int]] = defaultdict(list)
    for table in ("t", "k"):
        rows = spark.sql(f"SELECT _transaction_id AS id, _seq AS seq FROM "
                         f"{catalog}.{db}.{table}__changelog").collect()
        landed = Counter(r["id"] for r in rows)
        assert landed == Counter({tid: c[table] for tid, c in expected.items()
                                  if c[table]}), f"{table}: changes per transaction differ"
        for r in rows:
            seqs[r["id"]].append(r["seq"])
    for tid, landed_seqs in seqs.items():
        assert sorted(landed_seqs) == list(range(sum(expected[tid].values()))), tid
