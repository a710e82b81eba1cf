"""kill -9 at random moments, then restart: every committed transaction is delivered whole
and exactly once into a JSON-lines file kept with a position file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.cli.scan import scan_transactions
from changestream.sources.files import FileSource

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _big_insert(server: Any, db: str, first_id: int, rows: int, tx: int) -> str:
    """One statement inserting ``rows`` rows (short SQL, so records stay small)."""
    if "mariadb" in server.url:
        numbers = f"SELECT seq AS n FROM `{db}`.seq_0_to_{rows - 1}"
    else:
        numbers = (f"WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s "
                   f"WHERE n < {rows - 1}) SELECT n FROM s")
    return (f"INSERT INTO `{db}`.t SELECT {first_id} + n, {tx}, CONCAT('big row ', n) "
            f"FROM ({numbers}) AS numbers")


def _workload(server: Any, db: str, rng: random.Random) -> None:
    """1600 transactions of 1 to 40 rows (some updated or deleted again) around one of
    6,000 rows, which the router spills to disk."""
    statements = ["SET SESSION cte_max_recursion_depth = 100000"
                  if "mariadb" not in server.url else "DO 0",
                  f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, tx INT, v VARCHAR(40))"]
    next_id = 1
    for tx in range(1601):
        statements.append("BEGIN")
        if tx == 800:
            statements.append(_big_insert(server, db, next_id, 6_000, tx))
            next_id += 6_000
        else:
            size = rng.choice((1, 1, 1, 3, 10, 40))
            rows = [f"({i}, {tx}, 'row {i}')" for i in range(next_id, next_id + size)]
            next_id += size
            statements.append(f"INSERT INTO `{db}`.t VALUES " + ",".join(rows))
            if tx % 7 == 3:
                statements.append(f"UPDATE `{db}`.t SET v = 'updated' WHERE tx = {tx}")
            if tx % 11 == 5:
                statements.append(f"DELETE FROM `{db}`.t WHERE tx = {tx}")
        statements.append("COMMIT")
    server.execute(statements)


def _router(server: Any, db: str, start: tuple[str, int], out: Path,
            position: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
         "--sink", f"jsonl:{out}", "--position-file", str(position),
         "--start", f"{start[0]}:{start[1]}", "--until", "caught-up", "--include", db,
         "--batch-changes", "25", "--max-buffered-changes", "2000"],
        stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _expected(server: Any, db: str, start: tuple[str, int]) -> dict[str, int]:
    """Changes per committed transaction of ``db`` as the binlog has them."""
    files = FileSource(server.binlog_files(), start_file=start[0], start_pos=start[1])
    out = {}
    for t in scan_transactions(files):
        rows = sum(sum(c.values()) for name, c in t.tables.items()
                   if name.startswith(f"{db}."))
        if t.status == "committed" and (rows or t.kind == "ddl") and t.gtid:
            out[t.gtid] = rows or 1
    return out


def test_kill_9_at_random_moments_delivers_every_transaction_whole(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    rng = random.Random(20261121)
    db = fresh_database
    start = server.binlog_position()
    _workload(server, db, rng)
    expected = _expected(server, db, start)
    # An uninterrupted run first: the output every restarted run must add up to.
    reference = tmp_path / "reference.jsonl"
    finished = _router(server, db, start, reference, tmp_path / "reference-position.json")
    assert finished.wait(300) == 0

    out, position = tmp_path / "changes.jsonl", tmp_path / "position.json"
    kills = 0
    for attempt in range(20):
        process = _router(server, db, start, out, position)
        if attempt < 6:
            # Once it delivers, let it run a random moment longer, then kill it hard.
            grown = out.stat().st_size if out.exists() else 0
            deadline = time.monotonic() + 30
            while process.poll() is None and time.monotonic() < deadline and \
                    (out.stat().st_size if out.exists() else 0) <= grown:
                time.sleep(0.001)
            # Decode workers finish a run quickly: the first three kills come within a few
            # milliseconds of a delivery (at least three are needed), later ones at random.
            time.sleep(rng.uniform(0.0, 0.004 if kills < 3 else 0.03))
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
                kills += 1
                continue
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr.decode()
        break
    else:
        pytest.fail("the router did not finish")
    assert kills >= 3, "the router finished before it could be killed often enough"

    copies: dict[str, dict[int, list[bytes]]] = defaultdict(lambda: defaultdict(list))
    sizes: dict[str, set[int]] = defaultdict(set)
    for line in out.read_bytes().splitlines():
        record = orjson.loads(line)
        t = record["transaction"]
        copies[t["id"]][t["seq"]].append(line)
        sizes[t["id"]].add(t["size"])
    assert set(copies) == set(expected), "delivered transactions differ from committed ones"
    for tid, by_seq in copies.items():
        assert sizes[tid] == {expected[tid]}, tid
        assert sorted(by_seq) == list(range(expected[tid])), f"transaction {tid} is partial"

    def without_ts(line: bytes) -> dict[str, Any]:
        record = orjson.loads(line)
        del record["ts"]
        return record

    # Exactly once: each change once, and the file the same as the uninterrupted run's.
    duplicated = {(tid, seq) for tid, by_seq in copies.items()
                  for seq, lines in by_seq.items() if len(lines) > 1}
    assert not duplicated, f"{len(duplicated)} changes written twice"
    assert [without_ts(line) for line in out.read_bytes().splitlines()] == \
        [without_ts(line) for line in reference.read_bytes().splitlines()]
