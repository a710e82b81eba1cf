"""The router end to end against private MariaDB and MySQL servers: a workload of
transactions, rollbacks, MyISAM, DDL mid-stream, XA, a big transaction and every column
type, checked change record by change record."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.segments import compare_worker_paths, worker_segments
from tests.workloads import types_table

pytestmark = pytest.mark.integration

BIG_ROWS = 30_000


def _big_insert(server: Any, db: str, table: str) -> str:
    if "mariadb" in server.url:
        return f"INSERT INTO {table} SELECT seq, seq * 2 FROM `{db}`.seq_1_to_{BIG_ROWS}"
    return (f"INSERT INTO {table} WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
            f"FROM s WHERE n < {BIG_ROWS}) SELECT n, n * 2 FROM s")


def _mysql_session(server: Any) -> list[str]:
    if "mariadb" in server.url:
        return []
    return ["SET SESSION cte_max_recursion_depth = 100000",
            "SET SESSION binlog_rows_query_log_events = ON"]


def _mixed_rollback(server: Any, db: str) -> list[str]:
    """A rolled-back transaction that also changed a MyISAM table (MariaDB only: MySQL's
    enforce_gtid_consistency refuses it); MyISAM's change stays."""
    if "mariadb" not in server.url:
        return [f"INSERT INTO `{db}`.log VALUES (2, 'kept')"]
    return ["BEGIN",
            f"INSERT INTO `{db}`.acct VALUES (4, 40, 'rolled back')",
            f"INSERT INTO `{db}`.log VALUES (2, 'kept')",
            "ROLLBACK"]


def _workload(server: Any, db: str) -> None:
    """Each step's expected effect is written out in ``EXPECTED_TRANSACTIONS``."""
    server.execute([
        *_mysql_session(server),
        f"CREATE TABLE `{db}`.acct (id INT PRIMARY KEY, n INT, note VARCHAR(20))",
        f"INSERT INTO `{db}`.acct VALUES (1, 10, 'a')",
        "BEGIN",
        f"INSERT INTO `{db}`.acct VALUES (2, 20, 'b')",
        f"UPDATE `{db}`.acct SET n = 11 WHERE id = 1",
        "COMMIT",
        "BEGIN",
        f"INSERT INTO `{db}`.acct VALUES (3, 30, 'rolled back')",
        "ROLLBACK",
        f"CREATE TABLE `{db}`.log (id INT PRIMARY KEY, msg VARCHAR(20)) ENGINE=MyISAM",
        f"INSERT INTO `{db}`.log VALUES (1, 'x')",
        *_mixed_rollback(server, db),
        f"ALTER TABLE `{db}`.acct ADD COLUMN extra INT",
        f"INSERT INTO `{db}`.acct VALUES (5, 50, 'e', 500)",
        f"ALTER TABLE `{db}`.acct DROP COLUMN note",
        f"UPDATE `{db}`.acct SET extra = 1 WHERE id = 1",
        f"ALTER TABLE `{db}`.acct RENAME COLUMN n TO amount",
        f"DELETE FROM `{db}`.acct WHERE id = 2",
        f"RENAME TABLE `{db}`.acct TO `{db}`.account",
        f"INSERT INTO `{db}`.account VALUES (6, 60, 600)",
        "XA START 'x1'",
        f"INSERT INTO `{db}`.account VALUES (7, 70, 700)",
        "XA END 'x1'",
        "XA PREPARE 'x1'",
        "XA COMMIT 'x1'",
        "XA START 'x2'",
        f"INSERT INTO `{db}`.account VALUES (8, 80, 800)",
        "XA END 'x2'",
        "XA PREPARE 'x2'",
        "XA ROLLBACK 'x2'",
        "XA START 'x3'",
        f"INSERT INTO `{db}`.account VALUES (9, 90, 900)",
        "XA END 'x3'",
        "XA COMMIT 'x3' ONE PHASE",
        f"CREATE TABLE `{db}`.big (id INT PRIMARY KEY, v INT)",
        "BEGIN",
        _big_insert(server, db, f"`{db}`.big"),
        "COMMIT",
    ])
    types_table(server, db)


# (op, table, before, after) per change, one list per delivered transaction, in order.
EXPECTED_TRANSACTIONS: list[list[tuple[str, str | None, Any, Any]]] = [
    [("ddl", "acct", None, None)],
    [("insert", "acct", None, {"id": 1, "n": 10, "note": "a"})],
    [("insert", "acct", None, {"id": 2, "n": 20, "note": "b"}),
     ("update", "acct", {"id": 1, "n": 10, "note": "a"}, {"id": 1, "n": 11, "note": "a"})],
    [("ddl", "log", None, None)],
    [("insert", "log", None, {"id": 1, "msg": "x"})],
    [("insert", "log", None, {"id": 2, "msg": "kept"})],
    [("ddl", "acct", None, None)],
    [("insert", "acct", None, {"id": 5, "n": 50, "note": "e", "extra": 500})],
    [("ddl", "acct", None, None)],
    [("update", "acct", {"id": 1, "n": 11, "extra": None}, {"id": 1, "n": 11, "extra": 1})],
    [("ddl", "acct", None, None)],
    [("delete", "acct", {"id": 2, "amount": 20, "extra": None}, None)],
    [("ddl", "acct", None, None)],
    [("insert", "account", None, {"id": 6, "amount": 60, "extra": 600})],
    [("insert", "account", None, {"id": 7, "amount": 70, "extra": 700})],
    [("insert", "account", None, {"id": 9, "amount": 90, "extra": 900})],
    [("ddl", "big", None, None)],
    [("insert", "big", None, {"id": i, "v": 2 * i}) for i in range(1, BIG_ROWS + 1)],
    [("ddl", "types", None, None)],
    [("insert", "types", None, None)],  # values checked separately
]

TYPES_JSON = {
    "id": 1, "ti": -128, "tu": 255, "si": -32768, "su": 65535, "mi": -8388608,
    "mu": 16777215, "i": -2147483648, "iu": 4294967295, "bi": -9223372036854775808,
    "bu": 18446744073709551615, "de": "-12345678901234567890.0123456789", "f": 1.5,
    "d": -2.25, "dt": "2024-02-29T23:59:59.123456", "ts": "2024-01-01T00:00:01.000001+00:00",
    "tm": "-838:59:59.000000", "dte": "1000-01-01", "y": 2155, "c": "ab", "vc": "héllo ✓ 𝄞",
    "bn": base64.b64encode(b"\x01\x02" + b"\0" * 6).decode(),
    "vb": base64.b64encode(b"\x00\xff\x00").decode(), "tx": "text",
    "bl": base64.b64encode(b"\x00\x01\x02").decode(), "en": "b", "st": [], "st2": ["x", "z"],
    "bt": 0b1010101010,
}


def _run(server: Any, db: str, start: tuple[str, int], out: Path, **settings: Any) -> Router:
    router = Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                                   until="caught-up", filter=ChangeFilter(include=[db]),
                                   **settings), JsonLinesSink(out))
    router.run()
    return router


def _records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _by_transaction(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    groups: list[list[dict[str, Any]]] = []
    for r in records:
        if not groups or groups[-1][0]["transaction"]["id"] != r["transaction"]["id"]:
            groups.append([])
        groups[-1].append(r)
    return groups


def test_change_records_follow_the_workload(server: Any, fresh_database: str,
                                            tmp_path: Path) -> None:
    db = fresh_database
    start = server.binlog_position()
    _workload(server, db)
    out = tmp_path / "changes.jsonl"
    router = _run(server, db, start, out, max_buffered_changes=5_000)
    transactions = _by_transaction(_records(out))
    got = [[(r["op"], r["table"], r["before"], r["after"]) for r in t] for t in transactions]
    assert len(got) == len(EXPECTED_TRANSACTIONS)
    for i, (actual, expected) in enumerate(zip(got, EXPECTED_TRANSACTIONS)):
        if expected[0][1] == "types" and expected[0][0] == "insert":
            continue
        assert actual == expected, f"transaction {i}"
    assert all(r["database"] == db for t in transactions for r in t)
    assert router.stats.delivery.transactions_delivered >= len(EXPECTED_TRANSACTIONS)


def test_every_change_carries_its_transaction(server: Any, fresh_database: str,
                                             tmp_path: Path) -> None:
    db = fresh_database
    start = server.binlog_position()
    _workload(server, db)
    out = tmp_path / "changes.jsonl"
    _run(server, db, start, out, max_buffered_changes=5_000, include_sql=True)
    transactions = _by_transaction(_records(out))
    mariadb = "mariadb" in server.url
    seen_ids = set()
    for t in transactions:
        info = t[0]["transaction"]
        assert info["id"] not in seen_ids
        seen_ids.add(info["id"])
        assert info["gtid"] is not None and info["id"] == info["gtid"]
        assert [r["transaction"]["seq"] for r in t] == list(range(len(t)))
        assert [r["transaction"]["last"] for r in t] == [False] * (len(t) - 1) + [True]
        assert {r["transaction"]["size"] for r in t} == {len(t)}
        assert {r["transaction"]["commit_ts"] for r in t} == {info["commit_ts"]}
        assert info["commit_ts"] is not None
    big = next(t for t in transactions if t[0]["table"] == "big" and t[0]["op"] == "insert")
    assert len(big) == BIG_ROWS
    assert big[0]["primary_key"] == {"id": 1}
    assert big[0]["transaction"]["xid"] is not None
    multi = transactions[2]
    assert multi[0]["sql"].startswith("INSERT INTO") and multi[1]["sql"].startswith("UPDATE")
    xa = [t for t in transactions if t[0]["after"] and t[0]["after"].get("id") in (7, 9)]
    assert len(xa) == 2
    assert xa[0][0]["transaction"]["xid"] == "X'7831',X'',1"  # XA id of the two-phase commit
    # MariaDB logs XA ... ONE PHASE as an ordinary transaction (XID event, no XA id).
    assert isinstance(xa[1][0]["transaction"]["xid"], int if mariadb else str)
    types = next(t for t in transactions if t[0]["table"] == "types" and t[0]["op"] == "insert")
    after = types[0]["after"]
    for name, expected in TYPES_JSON.items():
        assert after[name] == expected, name
    if mariadb:
        assert after["js"] == '{"a": [1, 2, {"b": null}]}'
    else:
        assert after["js"] == {"a": [1, 2, {"b": None}]}
        assert after["vec"] == [1.5, 2.0, -3.0]


def test_original_format_and_filters(server: Any, fresh_database: str, tmp_path: Path) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([
        *_mysql_session(server),
        f"CREATE TABLE `{db}`.users (id INT PRIMARY KEY, name VARCHAR(10), secret VARCHAR(10))",
        f"CREATE TABLE `{db}`.skipme (id INT PRIMARY KEY)",
        f"INSERT INTO `{db}`.users VALUES (1, 'ann', 'pw')",
        f"INSERT INTO `{db}`.skipme VALUES (1)",
        f"UPDATE `{db}`.users SET name = 'anna' WHERE id = 1",
    ])
    out = tmp_path / "original.jsonl"
    router = Router(RouterSettings(
        source=server.url, start=f"{start[0]}:{start[1]}", until="caught-up",
        filter=ChangeFilter(include=[db], exclude=[f"{db}.skipme"],
                            exclude_columns=[f"{db}.users.secret"])),
        JsonLinesSink(out, format="original"))
    router.run()
    records = _records(out)
    assert [r["table"] for r in records] == ["users", "users", "users"]
    ddl, insert, update = records
    assert ddl["mutation"] == "DDL"
    assert insert["mutation"] == "INSERT" and insert["row_data"] == {"id": 1, "name": "ann"}
    assert insert["primary_key"] == {"id": 1}
    assert update["mutation"] == "UPDATE"
    assert update["old_row_data"] == {"id": 1, "name": "ann"}
    assert update["row_data"] == {"id": 1, "name": "anna"}
    assert update["transaction"] == {"id": update["transaction"]["id"], "current_row": 0,
                                     "last_mutation": True}
    # Row changes carry no statement unless include_sql is on; DDL always does.
    assert update["query"]["sql"] == "" and insert["query"]["sql"] == ""
    assert ddl["query"]["sql"].startswith("CREATE TABLE")


def test_restart_resumes_after_the_last_delivered_transaction(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)",
                    f"INSERT INTO `{db}`.t VALUES (1)", f"INSERT INTO `{db}`.t VALUES (2)"])
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    _run(server, db, start, out, position_file=str(position))
    first = _records(out)
    server.execute([f"INSERT INTO `{db}`.t VALUES (3)", f"DELETE FROM `{db}`.t WHERE id = 1"])
    _run(server, db, start, out, position_file=str(position))  # start ignored: position saved
    records = _records(out)
    assert records[:len(first)] == first
    rest = [(r["op"], r["after"] or r["before"]) for r in records[len(first):]]
    assert rest == [("insert", {"id": 3}), ("delete", {"id": 1})]
    saved = orjson.loads(position.read_bytes())
    assert saved["file"] and saved["pos"] > start[1] and saved["gtid_set"]


def test_binlog_files_give_the_same_change_records_as_the_live_server(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))",
        f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b')",
        "FLUSH BINARY LOGS",
        f"UPDATE `{db}`.t SET v = 'c' WHERE id = 2",
    ])
    types_table(server, db)
    live, files = tmp_path / "live.jsonl", tmp_path / "files.jsonl"
    _run(server, db, start, live)
    Router(RouterSettings(source=f"file://{server.binlog_dir}",
                          start=f"{start[0]}:{start[1]}", until="caught-up",
                          filter=ChangeFilter(include=[db])), JsonLinesSink(files)).run()

    def comparable(path: Path) -> list[dict[str, Any]]:
        records = _records(path)
        for r in records:
            del r["ts"]
        return records

    # MariaDB's UUID/INET6 come as text from both: the files' own schema history learns
    # the types from the CREATE TABLE they hold.
    assert comparable(files) == comparable(live)
    assert len(comparable(files)) == 6  # 2 DDL, 2 inserts, 1 update, 1 row of every type


@pytest.mark.parametrize("record_format", ["changestream", "original"])
def test_decode_workers_change_no_record(server: Any, fresh_database: str, tmp_path: Path,
                                         record_format: str) -> None:
    """The workload (DDL, XA, rollbacks, MyISAM, a spilled transaction, every type) through
    decode workers and without them: the same records, but for when they were written."""
    db = fresh_database
    start = server.binlog_position()
    _workload(server, db)
    outputs = []
    for workers in (0, 2):
        out = tmp_path / f"workers-{workers}.jsonl"
        router = Router(RouterSettings(
            source=server.url, start=f"{start[0]}:{start[1]}", until="caught-up",
            filter=ChangeFilter(include=[db]), decode_workers=workers,
            decode_workers_wait=True, include_sql=True,
            max_buffered_changes=5_000), JsonLinesSink(out, format=record_format))
        router.run()
        assert (router.stats.reading.worker_segments > 0) == (workers > 0)
        records = _records(out)
        for r in records:
            r.pop("ts", None)
        outputs.append(records)
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) > BIG_ROWS
    if record_format == "changestream":
        # The workers' fast path, segment by segment, against their general path.
        files = server.binlog_files()
        files = files[[f.name for f in files].index(start[0]):]
        segments = worker_segments(files, start[1])
        taken = compare_worker_paths(segments, ChangeFilter(include=[db]), True)
        assert taken is None or taken > 0  # None: the compiled path is not built
