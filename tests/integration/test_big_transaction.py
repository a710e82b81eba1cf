"""A 1,000,000-row transaction passes through the router with its memory bounded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROWS = 1_000_000
MEMORY_LIMIT_MB = 300

# Runs the router as its child and prints the child's peak resident memory in kB.
_PEAK_RSS = ("import resource, subprocess, sys; "
             "code = subprocess.call(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
             "sys.exit(code)")


def test_a_million_row_transaction_stays_under_300_mb(mariadb: Any, tmp_path: Path) -> None:
    db = "big_transaction"
    mariadb.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = mariadb.binlog_position()
    mariadb.execute([
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v BIGINT, note VARCHAR(40))",
        "BEGIN",
        f"INSERT INTO {db}.t SELECT seq, seq * 3, CONCAT('row number ', seq) "
        f"FROM {db}.seq_1_to_{ROWS}",
        "COMMIT",
    ])
    out = tmp_path / "big.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, sys.executable, "-m", "changestream.cli", "run",
         "--source", mariadb.url, "--start", f"{start[0]}:{start[1]}",
         "--until", "caught-up", "--include", db, "--sink", f"jsonl:{out}",
         "--spill-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    peak_mb = int(result.stdout.strip().splitlines()[-1]) / 1024
    print(f"peak RSS of the router: {peak_mb:.0f} MB for {ROWS} rows in one transaction")
    assert peak_mb < MEMORY_LIMIT_MB
    with open(out, "rb") as f:
        lines = sum(1 for _ in f)
    assert lines == ROWS + 1  # the CREATE TABLE and every row
    with open(out, "rb") as f:
        f.seek(-2000, 2)
        last = f.read().splitlines()[-1]
    assert b'"seq":999999,"size":1000000,"last":true' in last
