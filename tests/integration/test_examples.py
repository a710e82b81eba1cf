"""The programs in examples/ run as a user would run them, against the private servers:
the embedding example and the SQLite sink adapter (the Spark callback is in tests/spark)."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
from sqlite_sink import _json  # noqa: E402  (the example's own row encoding)


def _run(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                            timeout=180, env={**os.environ, **(env or {})})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_embedding_example_counts_each_change_once_across_restarts(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    db, position = fresh_database, tmp_path / "position.json"
    file, pos = server.binlog_position()
    server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))",
                    f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
                    f"UPDATE `{db}`.t SET v = 'B' WHERE id = 2"])
    command = [str(EXAMPLES / "embedding.py"), server.url, db, "--position-file",
               str(position), "--start", f"{file}:{pos}", "--until", "caught-up"]
    out = _run(*command)
    assert re.search(r"^t insert 3$", out, re.M) and re.search(r"^t update 1$", out, re.M)
    server.execute([f"DELETE FROM `{db}`.t WHERE id = 3"])
    again = _run(*command)  # from the position file: only what came since
    assert re.findall(r"^t \w+ \d+$", again, re.M) == ["t delete 1"]


def _source(server: Any, db: str, table: str) -> Counter[str]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            names = [d[0] for d in cur.description]
            return Counter(_json(dict(zip(names, row))) for row in cur.fetchall())
    finally:
        conn.close()


def _mirror(path: Path, db: str, table: str) -> Counter[str]:
    with sqlite3.connect(path) as mirror:
        return Counter(row for (row,) in mirror.execute(f'SELECT row FROM "{db}.{table}"'))


def test_the_sqlite_sink_example_keeps_mirrors_equal_to_the_source(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """The custom adapter, loaded by `changestream run --sink module:Class`, keeps its own
    position: a second run goes on from it, and keyed and keyless mirrors equal the
    source (no change applied twice)."""
    db, mirror = fresh_database, tmp_path / "mirror.db"
    file, pos = server.binlog_position()
    server.execute([f"CREATE TABLE `{db}`.k (id INT PRIMARY KEY, v VARCHAR(10), n INT)",
                    f"CREATE TABLE `{db}`.n (g INT, note VARCHAR(10))",
                    f"INSERT INTO `{db}`.k VALUES " + ", ".join(
                        f"({i}, 'v{i}', {i % 7})" for i in range(300)),
                    f"INSERT INTO `{db}`.n VALUES " + ", ".join(
                        f"({i % 5}, 'x')" for i in range(50)),
                    f"UPDATE `{db}`.k SET n = n + 100 WHERE id % 3 = 0",
                    f"DELETE FROM `{db}`.k WHERE id % 10 = 1",
                    f"UPDATE `{db}`.n SET note = 'y' WHERE g = 2"])
    command = ["-m", "changestream.cli", "run", "--source", server.url, "--include", db,
               "--start", f"{file}:{pos}", "--until", "caught-up", "--snapshot", "never",
               "--sink", "sqlite_sink:SqliteMirrorSink", "--sink-option", f"path={mirror}",
               "--batch-changes", "100"]
    env = {"PYTHONPATH": str(EXAMPLES)}
    _run(*command, env=env)
    for table in ("k", "n"):
        assert _mirror(mirror, db, table) == _source(server, db, table), table
    server.execute([f"INSERT INTO `{db}`.n VALUES (9, 'late'), (9, 'late')",
                    f"DELETE FROM `{db}`.n WHERE g = 0 LIMIT 3",
                    f"UPDATE `{db}`.k SET v = 'again' WHERE id < 20"])
    _run(*command, env=env)  # resumes from the position stored in the SQLite file
    for table in ("k", "n"):
        assert _mirror(mirror, db, table) == _source(server, db, table), table
