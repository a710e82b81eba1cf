"""`extract` writes a standalone binlog that the servers' own tools and changestream read back."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from changestream.cli import main
from changestream.cli.scan import scan_transactions
from changestream.sources.files import FileSource
from tests.corpus.reference import require_corpus
from tests.servers import SidRootServer

pytestmark = pytest.mark.integration


def _binlog_tool(server: Any) -> list[str]:
    """The server's own binlog decoder: the host's for MariaDB 10.11, else its root's."""
    name = "mariadb-binlog" if server.flavor == "mariadb" else "mysqlbinlog"
    return server.tool(name) if isinstance(server, SidRootServer) else [name]


def _transactions(paths: list[Path]) -> list[Any]:
    return list(scan_transactions(FileSource(paths), on_warning=lambda m: None))


def test_extract_round_trips_through_server_tool_and_changestream(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    db = fresh_database
    server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20))",
                    "BEGIN", f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b')",
                    f"UPDATE `{db}`.t SET v = 'c' WHERE id = 1", "COMMIT",
                    f"INSERT INTO `{db}`.t VALUES (3, 'after')"])
    source = _transactions(server.binlog_files())
    wanted = next(t for t in source if f"{db}.t" in t.tables and t.tables[f"{db}.t"]["update"])
    out = tmp_path / "one.bin"
    assert main(["extract", "--gtid", wanted.gtid, *map(str, server.binlog_files()),
                 "-o", str(out)]) == 0
    (back,) = _transactions([out])
    assert (back.gtid, back.tables, back.kind, back.status, back.events) == (
        wanted.gtid, wanted.tables, wanted.kind, wanted.status, wanted.events)
    decoded = subprocess.run([*_binlog_tool(server), "-vv", "--base64-output=DECODE-ROWS",
                              str(out)], capture_output=True, text=True, check=True).stdout
    assert decoded.count("### INSERT INTO") == 2 and decoded.count("### UPDATE") == 1


def test_extract_jumps_over_transactions_by_length(tmp_path: Path) -> None:
    from changestream.cli.extract import extract_transaction

    path = require_corpus("apecloud/mysql-bin.000057") / "apecloud/mysql-bin.000057"
    result = extract_transaction([path], "76f3e7be-6720-11ed-9cad-0242ac110002:13",
                                 tmp_path / "x.bin")
    assert result.skipped_by_length == 2
    (back,) = _transactions([tmp_path / "x.bin"])
    assert back.tables == {"a.test_table_3": {"insert": 1, "update": 1, "delete": 0}}


def test_extract_unknown_gtid_is_a_clear_error(tmp_path: Path, capsys: Any) -> None:
    path = require_corpus("apecloud/mysql-bin.000057") / "apecloud/mysql-bin.000057"
    assert main(["extract", "--gtid", "00000000-0000-0000-0000-000000000000:1", str(path),
                 "-o", str(tmp_path / "none.bin")]) == 1
    assert "no transaction with GTID" in capsys.readouterr().err
