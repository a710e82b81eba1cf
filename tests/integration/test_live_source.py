"""The live source against private MariaDB and MySQL servers: every column type decoded
exactly, and the same decoded events through the live source and the file source."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pytest

from changestream.cli.scan import scan_transactions
from changestream.decoding import event_types as et
from changestream.decoding.events import Event, RowsEvent, TransactionPayloadEvent
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource, StartPosition
from tests.servers import PrivateMariaDB11
from tests.workloads import EXPECTED, types_table

pytestmark = pytest.mark.integration

def _workload(server: Any, db: str) -> None:
    mariadb = "mariadb" in server.url
    types_table(server, db)
    server.execute([
        f"CREATE TABLE `{db}`.acct (id INT PRIMARY KEY, n INT) ENGINE=InnoDB",
        f"CREATE TABLE `{db}`.log (id INT PRIMARY KEY, msg VARCHAR(20)) ENGINE=MyISAM",
        "BEGIN",
        f"INSERT INTO `{db}`.acct VALUES (1, 10), (2, 20)",
        f"UPDATE `{db}`.acct SET n = n + 1",
        f"DELETE FROM `{db}`.acct WHERE id = 2",
        "COMMIT",
        "BEGIN",
        f"INSERT INTO `{db}`.acct VALUES (3, 30)",
        "ROLLBACK",
        f"INSERT INTO `{db}`.log VALUES (1, 'non-transactional')",
        f"ALTER TABLE `{db}`.acct ADD COLUMN note VARCHAR(10) DEFAULT 'x'",
        f"INSERT INTO `{db}`.acct (id, n) VALUES (4, 40)",
        "XA START 'xa1'",
        f"INSERT INTO `{db}`.acct (id, n) VALUES (5, 50)",
        "XA END 'xa1'",
        "XA PREPARE 'xa1'",
        "XA COMMIT 'xa1'",
        "XA START 'xa2'",
        f"INSERT INTO `{db}`.acct (id, n) VALUES (6, 60)",
        "XA END 'xa2'",
        "XA PREPARE 'xa2'",
        "XA ROLLBACK 'xa2'",
        "XA START 'xa3'",
        f"INSERT INTO `{db}`.acct (id, n) VALUES (7, 70)",
        "XA END 'xa3'",
        "XA COMMIT 'xa3' ONE PHASE",
    ])
    if mariadb:
        server.execute(["SET GLOBAL log_bin_compress = ON",
                        "SET GLOBAL log_bin_compress_min_len = 10"])
        try:
            server.execute([f"INSERT INTO `{db}`.acct (id, n, note) VALUES (8, 80, 'zipped')",
                            f"UPDATE `{db}`.acct SET note = 'zipped2' WHERE id = 8"])
        finally:
            server.execute("SET GLOBAL log_bin_compress = OFF")
    else:
        server.execute(["SET SESSION binlog_transaction_compression = ON",
                        f"INSERT INTO `{db}`.acct (id, n, note) VALUES (8, 80, 'zipped')"])


def _flatten(events: list[Event]) -> list[Event]:
    out = []
    for e in events:
        out.append(e)
        if isinstance(e, TransactionPayloadEvent):
            out.extend(e.events)
    return out


def _comparable(e: Event) -> tuple[Any, ...]:
    h = e.header
    body = {k: getattr(e, k) for k in getattr(e, "__slots__", ()) if k not in ("header", "events")}
    return (h.file.rsplit("/", 1)[-1] if h.file else None, h.offset, h.payload_index,
            h.type_code, h.log_pos, repr(sorted(body.items())))


def _read_both(server: Any, start: tuple[str, int]) -> tuple[list[Event], list[Event]]:
    connection = {"host": "127.0.0.1", "port": server.port, "user": "root", "password": ""}
    live = list(LiveSource(connection, StartPosition("file", file=start[0], pos=start[1]),
                           blocking=False))
    files = list(FileSource(server.binlog_files(), start_file=start[0], start_pos=start[1]))
    live = [e for e in live if not e.header.artificial and e.header.offset >= start[1]]
    files = [e for e in files if e.header.offset >= start[1]]
    return _flatten(live), _flatten(files)


def test_live_and_file_sources_decode_identically(server: Any, fresh_database: str) -> None:
    start = server.binlog_position()
    _workload(server, fresh_database)
    server.execute("FLUSH BINARY LOGS")  # the file source follows ROTATE into the next file
    server.execute(f"INSERT INTO `{fresh_database}`.acct (id, n) VALUES (9, 90)")
    live, files = _read_both(server, start)
    assert [_comparable(e) for e in live] == [_comparable(e) for e in files]
    kinds = [(t.kind, t.status) for t in scan_transactions(files)]
    assert ("xa-prepare", "prepared") in kinds
    assert ("xa-rollback", "rolled-back") in kinds
    assert ("ddl", "committed") in kinds
    compressed = [e for e in files if getattr(e, "compressed", False)
                  or isinstance(e, TransactionPayloadEvent)]
    assert compressed, "the workload's compressed transaction was not seen"


def test_mariadb_leaves_out_the_annotations_nobody_asked_for(server: Any,
                                                             fresh_database: str) -> None:
    """Without ``annotations`` there are no ANNOTATE_ROWS events (MariaDB before 11.4 does
    not even send them); every other event arrives as before, at the same offsets."""
    if "mariadb" not in server.url:
        pytest.skip("ANNOTATE_ROWS and the dump flag that asks for it are MariaDB's")
    start = server.binlog_position()
    _workload(server, fresh_database)
    connection = {"host": "127.0.0.1", "port": server.port, "user": "root", "password": ""}
    read = {}
    for wanted in (True, False):
        read[wanted] = [(e.header.offset, e.header.type_code) for e in LiveSource(
            connection, StartPosition("file", file=start[0], pos=start[1]), blocking=False,
            annotations=wanted) if not e.header.artificial]
    annotate = et.MARIADB_ANNOTATE_ROWS
    assert any(code == annotate for _, code in read[True])
    assert read[False] == [(o, c) for o, c in read[True] if c != annotate]


def test_live_offsets_are_the_files_where_mariadb_leaves_end_log_pos_out(
        server: Any, fresh_database: str) -> None:
    """MariaDB 11.4+ writes the events inside a transaction with ``end_log_pos`` 0 (its
    ``binlog_legacy_event_pos`` is off by default): the live source still gives every event
    its offset in the file, with and without annotations."""
    start = server.binlog_position()
    _workload(server, fresh_database)
    files = [e for e in FileSource(server.binlog_files(), start_file=start[0],
                                   start_pos=start[1]) if e.header.offset >= start[1]]
    unlogged = [e for e in files if e.header.log_pos == 0
                and e.header.type_code != et.FORMAT_DESCRIPTION]
    assert bool(unlogged) == isinstance(server, PrivateMariaDB11)
    assert not any(e.header.artificial for e in files)
    connection = {"host": "127.0.0.1", "port": server.port, "user": "root", "password": ""}
    for wanted in (True, False):
        live = [(e.header.offset, e.header.type_code) for e in LiveSource(
            connection, StartPosition("file", file=start[0], pos=start[1]), blocking=False,
            annotations=wanted) if not e.header.artificial and e.header.offset >= start[1]]
        assert live == [(e.header.offset, e.header.type_code) for e in files
                        if wanted or e.header.type_code != et.MARIADB_ANNOTATE_ROWS]


def test_every_column_type_decodes_exactly(server: Any, fresh_database: str) -> None:
    start = server.binlog_position()
    _workload(server, fresh_database)
    _, files = _read_both(server, start)
    rows = [e for e in files if isinstance(e, RowsEvent) and e.schema.table == "types"]
    assert len(rows) == 1 and len(rows[0].rows) == 1
    values = dict(zip(rows[0].schema.column_names, rows[0].rows[0], strict=True))
    for name, expected in EXPECTED.items():
        assert values[name] == expected, name
    assert type(values["de"]) is Decimal
    mariadb = "mariadb" in server.url
    if mariadb:
        assert values["js"] == '{"a": [1, 2, {"b": null}]}'  # MariaDB JSON is LONGTEXT
        assert len(values["u"]) == 16 and len(values["ip"]) == 16
        assert values["ip"] == bytes.fromhex("20010db8" + "00" * 12)
    else:
        assert values["js"] == {"a": [1, 2, {"b": None}]}
        assert values["vec"] == [1.5, 2.0, -3.0]
    srid_and_wkb = values["g"]
    assert srid_and_wkb[:4] == b"\0\0\0\0" and len(srid_and_wkb) == 4 + 21


def _dump_threads(server: Any) -> list[int]:
    """Ids of the server's binlog dump threads (MariaDB's and MySQL's)."""
    rows = server.execute("SELECT ID, COMMAND FROM information_schema.PROCESSLIST")
    return [int(r[0]) for r in rows if "binlog dump" in str(r[1]).lower()]


@pytest.mark.parametrize("how", ["read to the end", "stopped"])
def test_a_stream_it_ends_leaves_no_dump_thread_behind(server: Any, how: str) -> None:
    """A dump thread waiting for events does not see its client go until its next heartbeat,
    and MariaDB held a new dump with the same server id about 100 ms while it ended that
    thread: a router ending its stream has the server end its dump thread at once."""
    connection = {"host": "127.0.0.1", "port": server.port, "user": "root", "password": ""}
    source = LiveSource(connection, StartPosition("latest"), server_id=777_001,
                        heartbeat_seconds=30.0)
    before = set(_dump_threads(server))
    batches = source.raw_batches(idle=True)
    assert next(b for b in batches if b is None) is None  # caught up, the dump thread waits
    assert set(_dump_threads(server)) - before, "no dump thread while reading"
    if how == "stopped":
        source.stop()
        # What was read already may still come out (the server rotated its binlog once, as
        # another test flushed the logs); then the stream ends.
        ends = time.monotonic() + 5.0
        for _ in batches:
            assert time.monotonic() < ends, "the stream went on after stop()"
    else:
        batches.close()
    deadline = time.monotonic() + 2.0  # the KILL is asynchronous; the heartbeat is 30 s away
    while set(_dump_threads(server)) - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not set(_dump_threads(server)) - before
