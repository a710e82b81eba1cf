"""examples/spark_callback.py runs as a user would run it (its own Spark, local[1]) against
the private MariaDB, and its summaries say what the binlog holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration]

EXAMPLE = Path(__file__).parents[2] / "examples" / "spark_callback.py"


def test_the_spark_callback_example_summarizes_each_batch(mariadb: Any, spark: Any,
                                                          tmp_path: Path) -> None:
    db, out = "spark_callback_example", tmp_path / "summaries"
    mariadb.execute(f"DROP DATABASE IF EXISTS {db}")
    file, pos = mariadb.binlog_position()
    mariadb.execute([f"CREATE DATABASE {db}",
                     f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, total DECIMAL(8,2))",
                     f"INSERT INTO {db}.orders VALUES " + ", ".join(
                         f"({i}, {i}.50)" for i in range(40)),
                     f"UPDATE {db}.orders SET total = total * 2 WHERE id < 10",
                     f"DELETE FROM {db}.orders WHERE id >= 35"])
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), mariadb.url, db, str(out), "--start", f"{file}:{pos}",
         "--until", "caught-up"], capture_output=True, text=True, timeout=300,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{db}.orders insert 40" in result.stdout
    rows = spark.read.parquet(str(out)).groupBy("table", "_op").sum("rows").collect()
    assert {(r["table"], r["_op"]): r["sum(rows)"] for r in rows} == {
        (f"{db}.orders", "insert"): 40, (f"{db}.orders", "update"): 10,
        (f"{db}.orders", "delete"): 5}
