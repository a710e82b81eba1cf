"""The schema history's binlog scan (what a seeded history leaves out: the tables a DDL
between the start and the head changes) yields every statement but the BEGIN and COMMIT
around transactions, with its text whole, and nothing at or past the head: live and from
the server's files, across a rotation."""

from __future__ import annotations

from typing import Any

import pytest

from changestream.schema.startup import SCANNED_TYPES, scan_queries
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource, StartPosition

pytestmark = pytest.mark.integration

DDL = ["CREATE TABLE scan_db.t (id INT PRIMARY KEY, v VARCHAR(20))",
       "ALTER TABLE scan_db.t ADD COLUMN w INT",
       "RENAME TABLE scan_db.t TO scan_db.u"]


def _write(server: Any) -> tuple[tuple[str, int], tuple[str, int]]:
    """DDL between transactions of inserts and a rotation; where the stretch begins and
    its head (a DDL after the head follows)."""
    server.execute(["DROP DATABASE IF EXISTS scan_db", "CREATE DATABASE scan_db"])
    start = server.binlog_position()
    server.execute(DDL[0])
    for n in range(20):
        server.execute(["BEGIN", f"INSERT INTO scan_db.t VALUES ({n}, 'x')", "COMMIT"])
    server.execute(DDL[1])
    server.execute("FLUSH BINARY LOGS")
    server.execute(["BEGIN", "INSERT INTO scan_db.t VALUES (100, 'y', 1)", "COMMIT"])
    server.execute(DDL[2])
    head = server.binlog_position()
    server.execute("DROP TABLE scan_db.u")  # past the head: not scanned
    return start, head


def test_the_scan_yields_each_statement_but_begin_and_commit_up_to_the_head(
        server: Any) -> None:
    start, head = _write(server)
    connection = {"host": "127.0.0.1", "port": server.port, "user": "root", "password": ""}
    live = LiveSource(connection, StartPosition("file", file=start[0], pos=start[1]),
                      blocking=False, server_id=4242)
    # As the schema history's opener reads: most events left out unread, ending at the head.
    filtered = LiveSource(connection, StartPosition("file", file=start[0], pos=start[1]),
                          blocking=False, server_id=4243, wanted_types=SCANNED_TYPES,
                          skip_begin_commit=True, until=head)
    paths = server.binlog_files()
    files = FileSource(paths, start_file=start[0], start_pos=start[1])
    # A file source names its events' files by path, and so does the head it is given.
    head_path = str(next(p for p in paths if p.name == head[0]))
    for source, end in ((live, head), (filtered, head), (files, (head_path, head[1]))):
        queries = [e.query for e in scan_queries(source, end)]
        assert [q for q in queries if q.startswith(("CREATE", "ALTER", "RENAME"))] == DDL, \
            queries
        # MariaDB logs a transaction's BEGIN too; neither server's reaches the scan.
        assert not [q for q in queries if q in ("BEGIN", "COMMIT")], queries
        assert not [q for q in queries if "DROP" in q], queries
