"""Servers and users a router cannot work with get a clear error naming what to change, and
the extremes of what a server can log are delivered whole: a 16 MB row, a table of 4,096
columns."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.devserver import EmbeddedMariaDB, ServerNotAvailableError
from tests.servers import skip_or_fail

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _run(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "changestream.cli", "run", "--source", url, "--snapshot",
         "never", "--until", "caught-up", "--sink", f"jsonl:{tmp_path / 'out.jsonl'}",
         *args], capture_output=True, text=True, timeout=120)


def test_a_server_without_binary_logging_is_refused(tmp_path: Path) -> None:
    try:
        server = EmbeddedMariaDB(binlog=False).start()
    except ServerNotAvailableError as error:
        skip_or_fail(str(error))
    try:
        result = _run(server.url, tmp_path)
    finally:
        server.close()
    assert result.returncode == 3, result.stderr
    assert "log_bin" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_user_without_replication_grants_is_told_which(private_mariadb: Any,
                                                         tmp_path: Path) -> None:
    server = private_mariadb
    server.execute(["CREATE USER 'reader'@'%' IDENTIFIED BY 'pw'",
                    "GRANT SELECT ON *.* TO 'reader'@'%'"])
    url = server.url.replace("root@", "reader:pw@")
    result = _run(url, tmp_path)
    assert result.returncode == 3, result.stderr
    assert "REPLICATION" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "pw" not in result.stderr.replace("pwd", "")  # the password is never shown


def _delivered_inserts(server: Any, tmp_path: Path, start: tuple[str, int],
                      database: str) -> dict[str, dict[str, Any]]:
    out = tmp_path / "out.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "changestream.cli", "run", "--source", server.url, "--include",
         database, "--snapshot", "never", "--start", f"{start[0]}:{start[1]}", "--until",
         "caught-up", "--sink", f"jsonl:{out}"], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err.decode()
    return {r["table"]: r["after"] for r in map(orjson.loads, out.read_bytes().splitlines())
            if r["op"] == "insert"}


def test_a_16_mb_row_is_delivered_whole(private_mariadb: Any, tmp_path: Path) -> None:
    server = private_mariadb
    start = server.binlog_position()
    server.execute([
        "CREATE TABLE faults.big (id INT PRIMARY KEY, body LONGBLOB)",
        "INSERT INTO faults.big VALUES (1, REPEAT('0123456789abcdef', 1048576))",  # 16 MiB
    ])
    body = _delivered_inserts(server, tmp_path, start, "faults")["big"]["body"]
    assert base64.b64decode(body) == b"0123456789abcdef" * 1048576  # BLOBs come as base64


def test_a_4096_column_table_is_delivered_whole(mysql: Any, tmp_path: Path) -> None:
    """MySQL's MyISAM takes 4,096 columns (MariaDB's table definitions stop near 2,000)."""
    start = mysql.binlog_position()
    columns = ", ".join(f"c{i} TINYINT" for i in range(4095))  # with id: 4,096
    mysql.execute(["DROP DATABASE IF EXISTS wide_faults", "CREATE DATABASE wide_faults",
                   f"CREATE TABLE wide_faults.wide (id INT, {columns}) ENGINE=MyISAM",
                   "INSERT INTO wide_faults.wide (id, c0, c4094) VALUES (7, 1, 2)"])
    wide = _delivered_inserts(mysql, tmp_path, start, "wide_faults")["wide"]
    assert len(wide) == 4096 and wide["c0"] == 1 and wide["c4094"] == 2 and wide["c1"] is None
