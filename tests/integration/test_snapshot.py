"""Snapshots against real servers: tables that hold rows the binlog does not, read in chunks
while other sessions insert, update and delete; the table rebuilt from the records (snapshot
rows and changes applied in order) equals the source, and a snapshot row's record is the
record the same row gets from the binlog."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import generate_latest

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.adapter import SinkCapabilities
from changestream.encoding.records import json_default
from changestream.model.errors import SourceError
from changestream.runtime.router import Router, RouterSettings
from changestream.runtime.stream import TransactionStream
from changestream.sinks.jsonl import JsonLinesSink
from changestream.snapshot.reader import ChunkReader
from changestream.snapshot.row_readers import native
from changestream.snapshot.settings import SnapshotSettings
from changestream.snapshot.values import row_converter
from changestream.transactions.filters import ChangeFilter
from tests.servers import skip_or_fail
from tests.workloads import types_table, wait_for

pytestmark = pytest.mark.integration


def _connect(server: Any) -> Any:
    def connect(**extra: Any) -> Any:
        return server.connect(**extra)

    return connect


def _records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def rebuilt(records: list[dict[str, Any]], table: str,
            key: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A table as the records make it: snapshot rows and inserts upsert, updates move the
    row, deletes remove it (in the order the records come)."""
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in records:
        if r["table"] != table or r["op"] == "ddl":
            continue
        if r["before"] is not None:
            rows.pop(tuple(r["before"][k] for k in key), None)
        if r["after"] is not None:
            rows[tuple(r["after"][k] for k in key)] = r["after"]
    return rows


def assert_the_stream_goes_on_from_snapshot_rows(records: list[dict[str, Any]], table: str,
                                                 key: tuple[str, ...]) -> int:
    """Each snapshot row is the row as it was where the stream delivered it: the next
    change of its key has it as its before image (the columns the image holds). A chunk
    delivered before the stream passed its high watermark fails this: a change the chunk's
    read already saw comes after it. Returns how many rows were checked so."""
    last: dict[tuple[Any, ...], dict[str, Any]] = {}  # key -> snapshot row not yet changed
    checked = 0
    for r in records:
        if r["table"] != table:
            continue
        if r["op"] == "snapshot":
            last[tuple(r["after"][k] for k in key)] = r["after"]
        elif r["before"] is not None:
            row = last.pop(tuple(r["before"][k] for k in key), None)
            if row is not None:
                assert {c: row[c] for c in r["before"]} == r["before"], (row, r)
                checked += 1
    return checked


def rebuilt_multiset(records: list[dict[str, Any]], table: str) -> Counter[bytes]:
    """A table without a key as the records make it: a multiset of rows (a delete removes
    one of the equal rows, as the server did)."""
    rows: Counter[bytes] = Counter()
    for r in records:
        if r["table"] != table or r["op"] == "ddl":
            continue
        if r["before"] is not None:
            rows[orjson.dumps(r["before"], option=orjson.OPT_SORT_KEYS)] -= 1
        if r["after"] is not None:
            rows[orjson.dumps(r["after"], option=orjson.OPT_SORT_KEYS)] += 1
    return Counter({row: n for row, n in rows.items() if n})  # a count below 0 stays wrong


def source_multiset(server: Any, db: str, table: str) -> Counter[bytes]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT g, note FROM `{db}`.`{table}`")
            rows = cur.fetchall()
    finally:
        conn.close()
    return Counter(orjson.dumps({"g": g, "note": note}, option=orjson.OPT_SORT_KEYS)
                   for g, note in rows)


def source_rows(server: Any, db: str, table: str,
                key: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The table as the server has it, each row written as a record writes it."""
    reader = ChunkReader(_connect(server), 1_000_000)
    try:
        plan = reader.plan(db, table)
        assert plan is not None and plan.query is not None
        with reader.conn.cursor() as cur:
            cur.execute(plan.query.select(None)[0])
            raw = cur.fetchall()
        reader.conn.commit()
    finally:
        reader.close()
    convert = row_converter(plan.schema)
    rows = [orjson.loads(orjson.dumps(convert(r), default=json_default)) for r in raw]
    return {tuple(r[k] for k in key): r for r in rows}


def _load(server: Any, db: str) -> None:
    server.execute([
        f"CREATE TABLE `{db}`.k1 (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(10,2))",
        f"CREATE TABLE `{db}`.k2 (a VARCHAR(10), b INT, v INT, PRIMARY KEY (a, b))",
        f"CREATE TABLE `{db}`.u (id INT NOT NULL, x INT, UNIQUE KEY (id))",
        f"CREATE TABLE `{db}`.e (id INT PRIMARY KEY)",
        f"CREATE TABLE `{db}`.n (g INT, note VARCHAR(20))",  # no key, equal rows
    ])
    values = ", ".join(f"({i % 50}, 'n{i % 3}')" for i in range(400))
    server.execute(f"INSERT INTO `{db}`.n VALUES {values}")
    values = ", ".join(f"({i}, 'v{i}', {i}.25)" for i in range(1, 2501))
    server.execute(f"INSERT INTO `{db}`.k1 VALUES {values}")
    # Keys in both cases, ordered by the column's case-insensitive collation.
    values = ", ".join(f"('{chr((65 if i % 2 else 97) + i % 26)}{i % 7}', {i}, {i})"
                       for i in range(700))
    server.execute(f"INSERT INTO `{db}`.k2 VALUES {values}")
    values = ", ".join(f"({i}, {i * 2})" for i in range(300))
    server.execute(f"INSERT INTO `{db}`.u VALUES {values}")


class Churn:
    """Inserts, updates and deletes on k1 and k2 from another session until stopped."""

    def __init__(self, server: Any, db: str):
        self.conn = _connect(server)(autocommit=True)
        self.db = db
        self.stop = threading.Event()
        self.statements = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(7)
        next_id = 10_000
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                choice = rng.random()
                i = rng.randint(1, 2600)
                if choice < 0.3:
                    cur.execute(f"UPDATE `{self.db}`.k1 SET v = %s, n = n + 1 WHERE id = %s",
                                (f"u{rng.random():.5f}", i))
                elif choice < 0.45:
                    cur.execute(f"DELETE FROM `{self.db}`.k1 WHERE id = %s", (i,))
                elif choice < 0.6:
                    cur.execute(f"INSERT IGNORE INTO `{self.db}`.k1 VALUES (%s, 'new', 1)",
                                (next_id,))
                    next_id += 1
                elif choice < 0.7:  # a key moves (into a chunk read already, or not yet)
                    cur.execute(f"UPDATE IGNORE `{self.db}`.k1 SET id = %s WHERE id = %s",
                                (rng.randint(1, 30_000), i))
                elif choice < 0.85:
                    cur.execute(f"UPDATE `{self.db}`.k2 SET v = v + 1 WHERE b = %s",
                                (rng.randint(0, 700),))
                elif choice < 0.9:  # a table without a key: equal rows come and go
                    cur.execute(f"INSERT INTO `{self.db}`.n VALUES (%s, 'n0')",
                                (rng.randint(0, 49),))
                elif choice < 0.95:
                    cur.execute(f"DELETE FROM `{self.db}`.n WHERE g = %s LIMIT 1",
                                (rng.randint(0, 49),))
                else:
                    cur.execute(f"UPDATE `{self.db}`.n SET note = 'moved' WHERE g = %s "
                                "LIMIT 1", (rng.randint(0, 49),))
                self.statements += 1

    def __enter__(self) -> Churn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.conn.close()


@pytest.mark.parametrize("readers", [1, 3])
def test_a_snapshot_under_concurrent_changes_rebuilds_every_table(
        server: Any, fresh_database: str, tmp_path: Path, readers: int) -> None:
    """One reader, or three reading each table's chunks at once (each chunk its own
    consistent snapshot and window): the tables rebuilt equal the source, and every
    table's snapshot rows come in key order, chunk after chunk."""
    db = fresh_database
    _load(server, db)
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"

    def router() -> Router:
        return Router(RouterSettings(source=server.url, until="caught-up",
                                     filter=ChangeFilter(include=[db]), decode_workers=2,
                                     position_file=str(position),
                                     snapshot=SnapshotSettings(chunk_rows=97,
                                                               readers=readers)),
                      JsonLinesSink(out))

    first = router()
    with Churn(server, db) as churn:
        first.start()
        while not (first.status()["snapshot"] or {}).get("finished") and \
                not first.wait(0.05):
            pass
    first.wait(120)
    assert (first.status()["snapshot"] or {}).get("finished"), "the router ended first"
    assert churn.statements > 20
    status = first.status()["snapshot"]
    metrics = generate_latest(first.metrics_registry).decode()
    assert f"changestream_snapshot_rows {float(status['rows'])}" in metrics
    assert f"changestream_snapshot_tables_done {float(status['tables_total'])}" in metrics
    # What the other session did after the first router stopped: the next run resumes.
    again = router()
    again.run()
    assert again.status()["snapshot"] is None
    assert orjson.loads(position.read_bytes())["snapshot"]["tables"] == []  # finished
    assert status["tables_done"] == status["tables_total"] == 5
    records = _records(out)
    ops = {r["op"] for r in records}
    assert "snapshot" in ops and {"insert", "update", "delete"} & ops
    for table, key in (("k1", ("id",)), ("k2", ("a", "b")), ("u", ("id",)), ("e", ("id",))):
        assert rebuilt(records, table, key) == source_rows(server, db, table, key), table
    assert rebuilt_multiset(records, "n") == source_multiset(server, db, "n")
    snap = [r for r in records if r["op"] == "snapshot"]
    assert all(r["transaction"]["id"].startswith(f"snapshot-{status['id']}-") for r in snap)
    assert {r["table"] for r in snap} == {"k1", "k2", "u", "n"}
    # Chunks delivered in key order (a reorder buffer that let a later chunk through first
    # would break it), numbered in that order.
    for table in ("k1", "u"):
        ids = [r["after"]["id"] for r in snap if r["table"] == table]
        assert ids == sorted(ids) and len(ids) == len(set(ids)), table
    numbers = [int(r["transaction"]["id"].rsplit("-", 1)[1]) for r in snap]
    assert numbers == sorted(numbers)
    assert assert_the_stream_goes_on_from_snapshot_rows(records, "k1", ("id",)) > 0
    # The keyless table (about 400 rows, in pieces of 97): one transaction, numbered
    # through, its size on every record and its end on the last.
    keyless = [r["transaction"] for r in snap if r["table"] == "n"]
    assert len(keyless) > 300 and len({t["id"] for t in keyless}) == 1
    assert [t["seq"] for t in keyless] == list(range(len(keyless)))
    assert {t["size"] for t in keyless} == {len(keyless)}
    assert [t["last"] for t in keyless] == [False] * (len(keyless) - 1) + [True]


def test_a_snapshot_row_is_the_record_the_binlog_gives(server: Any, fresh_database: str,
                                                        tmp_path: Path) -> None:
    """Every column type: the row's snapshot record and its insert record from the binlog
    hold the same values."""
    db = fresh_database
    start = server.binlog_position()
    types_table(server, db)
    from_binlog, from_snapshot = tmp_path / "binlog.jsonl", tmp_path / "snapshot.jsonl"
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up", filter=ChangeFilter(include=[f"{db}.types"])),
           JsonLinesSink(from_binlog)).run()
    Router(RouterSettings(source=server.url, until="caught-up",
                          filter=ChangeFilter(include=[f"{db}.types"])),
           JsonLinesSink(from_snapshot)).run()
    inserted = [r for r in _records(from_binlog) if r["op"] == "insert"]
    snapshot = [r for r in _records(from_snapshot) if r["op"] == "snapshot"]
    assert len(inserted) == len(snapshot) == 1
    assert snapshot[0]["after"] == inserted[0]["after"]
    assert snapshot[0]["primary_key"] == inserted[0]["primary_key"]
    # The original format maps them too, and the embedded library delivers them.
    original = tmp_path / "original.jsonl"
    Router(RouterSettings(source=server.url, until="caught-up",
                          filter=ChangeFilter(include=[f"{db}.types"])),
           JsonLinesSink(original, format="original")).run()
    (mapped,) = _records(original)
    assert mapped["mutation"] == "SNAPSHOT" and mapped["row_data"] == inserted[0]["after"]
    with TransactionStream(RouterSettings(source=server.url, until="caught-up",
                                          filter=ChangeFilter(include=[f"{db}.types"]))) as s:
        parts = list(s)
    assert [(c.op, c.table) for p in parts for c in p.changes] == [("snapshot", "types")]


# Values where the server's text and a record's JSON differ or could: NULLs, zero dates,
# ZEROFILL, zero and negative DECIMALs, TIME past 24 hours and below zero, YEAR 0, text
# that JSON escapes, a JSON null document; DATETIME and TIMESTAMP with and without
# fractions. A column the filter leaves out (``secret``) is in no record.
_EDGE_COLUMNS = (
    "id INT PRIMARY KEY, z INT(6) ZEROFILL, zd DECIMAL(8,2) ZEROFILL, de DECIMAL(6,2), "
    "d0 DECIMAL(5,0), dt0 DATETIME, dt3 DATETIME(3), ts0 TIMESTAMP NULL, dte DATE, "
    "tm TIME, tm2 TIME(2), y YEAR, vc VARCHAR(40), tx TEXT, bn VARBINARY(8), js JSON, "
    "f FLOAT, secret VARCHAR(10)")
_EDGE_ROWS = [
    "(1, 5, 1.5, -0.50, 0, '0000-00-00 00:00:00', '2024-01-01 00:00:00.000', NULL, "
    "'0000-00-00', '838:59:59', '-00:00:01.50', 0, 'quote \" back \\\\ tab \t', "
    "'line\nbreak \u00e9', X'00', 'null', 0.1, 's1')",
    "(2, 0, 0, 0, 7, '2024-02-30 00:00:00', '1999-12-31 23:59:59.999', "
    "'2038-01-19 03:14:07', '2024-00-01', '-838:59:59', '00:00:00', 1901, '', '', '', "
    "'[]', -3.5e20, 's2')",
    "(3, 123456, 123456.78, -9999.99, -12345, '9999-12-31 23:59:59', NULL, "
    "'1970-01-01 00:00:01', '1000-01-01', '24:00:00', '-12:34:56.78', 2155, "
    "'héllo ✓ 𝄞', REPEAT('x', 300), X'FFFE', '{\"a\": null}', NULL, 's3')",
    "(4" + ", NULL" * 17 + ")",
]


@pytest.mark.parametrize("path", ["compiled", "python"])
def test_records_written_from_the_servers_text_are_the_records_of_the_decoders_values(
        server: Any, fresh_database: str, tmp_path: Path, path: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON-lines sink gets snapshot records written straight from the server's text
    (changestream.snapshot.row_readers, compiled or in Python); every other sink gets the
    decoder's values. The records of both are the same bytes (but for ``ts``, when they
    were written), on every column type and on values where the server's text and JSON
    differ."""
    if path == "python":
        monkeypatch.setenv("CHANGESTREAM_PURE_PYTHON", "1")
    elif native() is None:
        skip_or_fail("the compiled module is not built (scripts/install.sh builds it)")
    db = fresh_database
    types_table(server, db)
    server.execute(["SET SESSION sql_mode = ''",
                    f"CREATE TABLE `{db}`.edge ({_EDGE_COLUMNS})",
                    f"INSERT INTO `{db}`.edge VALUES {', '.join(_EDGE_ROWS)}"])
    settings = RouterSettings(source=server.url, until="caught-up",
                              filter=ChangeFilter(include=[db],
                                                  exclude_columns=[f"{db}.edge.secret"]),
                              snapshot=SnapshotSettings(chunk_rows=2))
    encoded, changes = tmp_path / "encoded.jsonl", tmp_path / "changes.jsonl"
    Router(settings, JsonLinesSink(encoded)).run()
    values_sink = JsonLinesSink(changes)
    values_sink.capabilities = SinkCapabilities(durable_state=True)  # takes changes only
    Router(settings, values_sink).run()

    def without_ts(path: Path) -> list[bytes]:
        """The records but for when they were written and read (and so the snapshot's
        id, a time)."""
        text = path.read_bytes()
        text = re.sub(rb'"id":"snapshot-[^"]+"', b'"id":"snapshot"', text)
        text = re.sub(rb'"commit_ts":"[^"]+"', b'"commit_ts":""', text)
        return [line.rsplit(b',"ts":', 1)[0] for line in text.splitlines()]

    lines = without_ts(encoded)
    assert len(lines) == 5  # types: 1 row; edge: 4 rows in chunks of 2
    assert lines == without_ts(changes)
    assert not any(b"secret" in line for line in lines)
    edge = [orjson.loads(line + b"}") for line in lines if b'"table":"edge"' in line]
    assert edge[0]["after"]["z"] == 5 and edge[0]["after"]["zd"] == "1.50"
    # MariaDB's JSON is text; MySQL's a JSON null document.
    assert edge[0]["after"]["js"] == ("null" if "mariadb" in server.url else {"$json": None})


@pytest.mark.parametrize("readers", [1, 3])
def test_a_table_altered_in_the_middle_of_its_snapshot_is_read_on_as_it_is_now(
        server: Any, fresh_database: str, tmp_path: Path, readers: int) -> None:
    """ALTERs while a table is snapshotted (a column added and filled, a DECIMAL's scale
    changed): the chunks read after each are read with the table's new shape, and the
    table rebuilt from the records equals the source."""
    from decimal import Decimal

    db = fresh_database
    _load(server, db)
    for base in range(30_000, 70_000, 20_000):
        values = ", ".join(f"({i}, 'w{i}', 0.5)" for i in range(base, base + 20_000))
        server.execute(f"INSERT INTO `{db}`.k1 VALUES {values}")
    out = tmp_path / "out.jsonl"
    router = Router(RouterSettings(source=server.url, until="caught-up",
                                   filter=ChangeFilter(include=[f"{db}.k1"]),
                                   snapshot=SnapshotSettings(chunk_rows=100,
                                                             readers=readers)),
                    JsonLinesSink(out))
    altered = threading.Event()

    def alter() -> None:
        wait_for(lambda: ((router.status()["snapshot"] or {}).get("rows") or 0) > 3000, 60)
        server.execute([f"ALTER TABLE `{db}`.k1 ADD COLUMN extra VARCHAR(10) NULL",
                        f"UPDATE `{db}`.k1 SET extra = 'x' WHERE id % 7 = 0",
                        f"ALTER TABLE `{db}`.k1 MODIFY n DECIMAL(12,3)"])
        altered.set()

    thread = threading.Thread(target=alter, daemon=True)
    router.start()
    thread.start()
    thread.join(120)
    assert router.wait(300)
    assert altered.is_set()
    records = _records(out)
    ddl = [i for i, r in enumerate(records) if r["op"] == "ddl"]
    snapshot = [i for i, r in enumerate(records) if r["op"] == "snapshot"]
    assert len(ddl) == 2 and snapshot[0] < ddl[0] and ddl[-1] < snapshot[-1], \
        "the ALTERs came in the middle of the snapshot"
    late = [r["after"] for r in records[ddl[-1]:] if r["op"] == "snapshot"]
    assert all(len(a["n"].split(".")[1]) == 3 and "extra" in a for a in late)

    def normal(row: dict[str, Any]) -> dict[str, Any]:
        return {"id": row["id"], "v": row["v"], "n": Decimal(row["n"]),
                "extra": row.get("extra")}

    got = {k: normal(r) for k, r in rebuilt(records, "k1", ("id",)).items()}
    want = {k: normal(r) for k, r in source_rows(server, db, "k1", ("id",)).items()}
    assert len(want) == 42_500 and got == want


@pytest.mark.parametrize("readers", [1, 3])
def test_a_snapshot_killed_again_and_again_goes_on_from_its_last_chunk(
        server: Any, fresh_database: str, tmp_path: Path, readers: int) -> None:
    """kill -9 of `changestream run` in the middle of a snapshot, while another session
    changes rows: each restart goes on with the same snapshot after the last chunk the
    position file holds, and the tables rebuilt from everything written equal the source
    (one reader, or three reading a table's chunks at once)."""
    db = fresh_database
    _load(server, db)
    for base in range(30_000, 110_000, 20_000):
        values = ", ".join(f"({i}, 'w{i}', 0.5)" for i in range(base, base + 20_000))
        server.execute(f"INSERT INTO `{db}`.k1 VALUES {values}")
    # The keyless table in 100 pieces of one transaction: kills land inside it too.
    values = ", ".join(f"({i % 50}, 'm{i % 7}')" for i in range(20_000))
    server.execute(f"INSERT INTO `{db}`.n VALUES {values}")
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    command = [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
               "--include", db, "--position-file", str(position), "--sink", f"jsonl:{out}",
               "--batch-changes", "300"]
    env = {**os.environ, "CHANGESTREAM_SNAPSHOT_CHUNK_ROWS": "200",
           "CHANGESTREAM_SNAPSHOT_READERS": str(readers)}
    rng = random.Random(11)
    kills = 0
    with Churn(server, db):
        while kills < 6:
            process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE)
            deadline = time.monotonic() + 60
            while not position.exists() and process.poll() is None and \
                    time.monotonic() < deadline:
                time.sleep(0.01)  # the first kill after a position was saved
            time.sleep(rng.uniform(0.3, 1.2))
            if process.poll() is not None:
                raise AssertionError(process.stderr.read().decode() if process.stderr else "")
            process.kill()
            process.wait()
            kills += 1
            saved = orjson.loads(position.read_bytes()) if position.exists() else {}
            if saved.get("snapshot") and not saved["snapshot"]["tables"]:
                break  # finished
    done = subprocess.run([*command, "--until", "caught-up"], env=env, capture_output=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    assert orjson.loads(position.read_bytes())["snapshot"]["tables"] == []
    # Exactly once (a JSON-lines file kept with a position file): no change twice, and the
    # records taken in their order rebuild every table, the keyless one included.
    records = list(_records(out))
    keys = [(r["transaction"]["id"], r["transaction"]["seq"]) for r in records]
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} records twice"
    ids = {r["transaction"]["id"].split("-")[1] for r in records if r["op"] == "snapshot"}
    assert len(ids) == 1, f"one snapshot, resumed after each kill: {ids}"
    assert kills >= 2
    for table, key in (("k1", ("id",)), ("k2", ("a", "b")), ("u", ("id",))):
        assert rebuilt(records, table, key) == source_rows(server, db, table, key), table
    assert rebuilt_multiset(records, "n") == source_multiset(server, db, "n")


def test_a_snapshot_asked_for_while_running_through_the_control_endpoint_and_the_cli(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """A router following the server from now (no snapshot at the start) is asked, with its
    token, for a snapshot of one table while another session changes it; the table rebuilt
    from the records equals the source. Without the token, for a table without a key, or
    while a snapshot runs, the request is refused."""
    from changestream.runtime.control import ControlServer

    db = fresh_database
    _load(server, db)
    out = tmp_path / "out.jsonl"
    router = Router(RouterSettings(source=server.url, start="latest",
                                   filter=ChangeFilter(include=[db]),
                                   snapshot=SnapshotSettings("never", chunk_rows=50)),
                    JsonLinesSink(out))
    control = ControlServer(router, 0, "s3cret")
    control.start()
    url = f"http://127.0.0.1:{control.port}/snapshot"

    def post(body: Any, token: str | None = "s3cret") -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(url, orjson.dumps(body), method="POST",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, orjson.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, orjson.loads(exc.read())

    def ask_by_cli(table: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "changestream.cli", "snapshot", table, "--control-port",
             str(control.port)], capture_output=True, text=True, timeout=60,
            env={**os.environ, "CHANGESTREAM_CONTROL_TOKEN": "s3cret"})

    try:
        router.start()
        deadline = time.monotonic() + 30
        while not router.status()["connected"] and time.monotonic() < deadline:
            time.sleep(0.05)
        with Churn(server, db):
            assert post({"tables": [f"{db}.k1"]}, token="wrong")[0] == 401
            assert post({"tables": "k1"})[0] == 400
            code, body = post({"tables": [f"{db}.k1"]})
            assert code == 202, body
            assert body["tables"] == [f"{db}.k1"]
            busy, _ = post({"tables": [f"{db}.k2"]})
            assert busy == 409 or (router.status()["snapshot"] or {}).get("finished")
            while not (router.status()["snapshot"] or {}).get("finished"):
                assert not router.wait(0.05), "the router ended"
        keyless = ask_by_cli(f"{db}.n")
        assert keyless.returncode == 2 and "no primary key" in keyless.stderr, keyless.stderr
        head = server.binlog_position()
        while True:  # every change made until now delivered
            delivered = router.status()["delivered_position"] or {}
            if delivered and (delivered["file"], delivered["pos"]) >= head:
                break
            assert not router.wait(0.05), "the router ended"
        by_cli = ask_by_cli(f"{db}.u")
        assert by_cli.returncode == 0 and "started" in by_cli.stdout, by_cli.stderr
        while (router.status()["snapshot"] or {}).get("tables_total") != 1 or \
                not router.status()["snapshot"]["finished"]:
            assert not router.wait(0.05), "the router ended"
    finally:
        router.stop()
        router.wait(60)
        control.stop()
    records = _records(out)
    assert rebuilt(records, "k1", ("id",)) == source_rows(server, db, "k1", ("id",))
    assert rebuilt(records, "u", ("id",)) == source_rows(server, db, "u", ("id",))


def _inside_keyless_pieces(out: Path) -> bool:
    """Whether the last record written is a keyless snapshot row that does not end its
    transaction (read from the file's end)."""
    if not out.exists():
        return False
    with out.open("rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
        lines = f.read().splitlines()
    if len(lines) < 2:
        return False
    try:
        record = orjson.loads(lines[-1])
    except orjson.JSONDecodeError:  # a line being written
        record = orjson.loads(lines[-2])
    return record["table"] == "n" and record["op"] == "snapshot" and \
        not record["transaction"]["last"]


def test_a_keyless_table_killed_inside_its_pieces_is_delivered_once(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """kill -9 while a table without a key is being delivered (its pieces written in
    batches without a position): the restart reads it whole again, and the file, cut back
    to the saved position, holds its transaction once, whole."""
    db = fresh_database
    server.execute(f"CREATE TABLE `{db}`.n (g INT, note VARCHAR(40))")
    for base in range(0, 200_000, 20_000):
        values = ", ".join(f"({i % 50}, 'row {i % 13}')" for i in range(base, base + 20_000))
        server.execute(f"INSERT INTO `{db}`.n VALUES {values}")
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    command = [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
               "--include", db, "--position-file", str(position), "--sink", f"jsonl:{out}",
               "--batch-changes", "1000", "--snapshot", "initial-only"]
    env = {**os.environ, "CHANGESTREAM_SNAPSHOT_CHUNK_ROWS": "1000"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _inside_keyless_pieces(out):
            assert process.poll() is None, process.stderr.read().decode() \
                if process.stderr else ""
            assert time.monotonic() < deadline, "the pieces were not seen being written"
            time.sleep(0.002)
    finally:
        process.kill()
        process.wait()
    lines = out.read_bytes().splitlines()
    killed = [orjson.loads(line)["transaction"] for line in lines[:-1]]  # the last: torn?
    assert killed and not any(t["last"] for t in killed), "killed after the last piece"
    done = subprocess.run([*command, "-v"], env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    assert "jsonl sink: cut" in done.stderr.decode()  # the pieces never acknowledged
    records = [r for r in _records(out) if r["op"] == "snapshot"]
    transactions = [r["transaction"] for r in records]
    assert len({t["id"] for t in transactions}) == 1
    assert [t["seq"] for t in transactions] == list(range(200_000))
    assert [t["last"] for t in transactions].count(True) == 1 and transactions[-1]["last"]
    assert rebuilt_multiset(records, "n") == source_multiset(server, db, "n")


def _big_keyless_table(server: Any, db: str) -> None:
    """Table ``n`` without a key, 240,000 rows of about 70 bytes (a 20 MB result)."""
    server.execute(f"CREATE TABLE `{db}`.n (g INT, note VARCHAR(80))")
    for base in range(0, 240_000, 20_000):
        values = ", ".join(f"({i % 50}, '{'x' * 60} {i % 13}')"
                           for i in range(base, base + 20_000))
        server.execute(f"INSERT INTO `{db}`.n VALUES {values}")


def test_a_consumer_slower_than_the_server_s_write_timeout_still_gets_a_keyless_table(
        server: Any, fresh_database: str) -> None:
    """A table without a key is read as its pieces are delivered: a consumer that keeps the
    stream waiting longer than the server's net_write_timeout (2 s here) while the rest of
    a 20 MB result waits on the connection still gets every row."""
    db = fresh_database
    _big_keyless_table(server, db)
    server.execute("SET GLOBAL net_write_timeout = 2")  # the router's connections take it
    try:
        rows, waited = 0, False
        with TransactionStream(RouterSettings(
                source=server.url, until="caught-up", filter=ChangeFilter(include=[db]),
                batch=BatchSettings(max_changes=2000),  # the pieces wait for the consumer
                snapshot=SnapshotSettings(mode="initial-only", chunk_rows=1000))) as stream:
            for part in stream:
                rows += len(part.changes)
                if not waited:
                    time.sleep(5)
                    waited = True
    finally:
        server.execute("SET GLOBAL net_write_timeout = 60")
    assert rows == 240_000


def test_a_snapshot_whose_connection_the_server_kills_fails_naming_the_table(
        server: Any, fresh_database: str) -> None:
    """The server ends the snapshot's connection in the middle of a table (``KILL``): the
    router stops with a source error that names the table and says what the server did,
    not a driver's traceback."""
    db = fresh_database
    _big_keyless_table(server, db)
    stream = TransactionStream(RouterSettings(
        source=server.url, until="caught-up", filter=ChangeFilter(include=[db]),
        batch=BatchSettings(max_changes=2000),  # the pieces wait for the consumer
        snapshot=SnapshotSettings(mode="initial-only", chunk_rows=1000)))
    killed = False
    with pytest.raises(SourceError) as failed, stream:
        for _ in stream:  # the read waits on its connection while the first part is taken
            if not killed:
                reading = [row[0] for row in server.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE "
                    f"'SELECT %FROM `{db}`.`n`'")]
                assert reading, "the table's read was not found"
                server.execute(f"KILL {reading[0]}")
                killed = True
    assert str(failed.value).startswith(f"snapshot of {db}.n: reading from the server "
                                        "failed: "), failed.value


def test_a_snapshot_asked_for_is_taken_up_again_by_a_router_killed_before_its_first_chunk(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """A request accepted is in the next saved position, before any of its rows: another
    session holds the table locked so that no chunk can be read, the router is killed -9,
    and the restarted router (asked nothing) takes the snapshot up and rebuilds the table."""
    db = fresh_database
    _load(server, db)
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    command = [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
               "--include", db, "--position-file", str(position), "--sink", f"jsonl:{out}",
               "--snapshot", "never", "--start", "latest", "--batch-seconds", "0.2"]
    env = {**os.environ, "CHANGESTREAM_CONTROL_TOKEN": "s3cret"}
    port = _free_port()
    process = subprocess.Popen([*command, "--control-port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    locker = _connect(server)(autocommit=True)
    try:
        status_url = f"http://127.0.0.1:{port}/status"

        def connected() -> bool:
            request = urllib.request.Request(
                status_url, headers={"Authorization": "Bearer s3cret"})
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return bool(orjson.loads(response.read())["connected"])
            except OSError:
                return False

        wait_for(connected, 60)
        with locker.cursor() as cur:
            cur.execute(f"LOCK TABLES `{db}`.k1 WRITE")  # no chunk of k1 can be read
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/snapshot", orjson.dumps({"tables": [f"{db}.k1"]}),
            method="POST", headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 202

        def announced() -> bool:
            saved = orjson.loads(position.read_bytes()) if position.exists() else {}
            return (saved.get("snapshot") or {}).get("tables") == [f"{db}.k1"]

        wait_for(announced, 30)
        process.kill()
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        locker.close()  # unlocks
    assert not any(r["op"] == "snapshot" for r in _records(out)) if out.exists() else True
    done = subprocess.run([*command, "--until", "caught-up"], capture_output=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    records = _records(out)
    assert sum(r["op"] == "snapshot" for r in records) == 2500
    assert rebuilt(records, "k1", ("id",)) == source_rows(server, db, "k1", ("id",))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_when_needed_takes_a_new_snapshot_after_the_saved_position_was_purged(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """The saved position's binlog file is purged while the router is stopped, with changes
    in it no binlog holds any more: `when-needed` takes a new snapshot and streams on, and
    what that run delivers rebuilds the tables as the source has them."""
    db = fresh_database
    _load(server, db)
    position = tmp_path / "position.json"

    def run(out: Path) -> Router:
        router = Router(RouterSettings(source=server.url, until="caught-up",
                                       filter=ChangeFilter(include=[db]),
                                       position_file=str(position),
                                       snapshot=SnapshotSettings("when-needed",
                                                                 chunk_rows=300)),
                        JsonLinesSink(out))
        router.run()
        return router

    first = run(tmp_path / "first.jsonl")
    first_id = first.status()["snapshot"]["id"]
    old_file = orjson.loads(position.read_bytes())["file"]
    server.execute([f"UPDATE `{db}`.k1 SET v = 'lost' WHERE id <= 100",
                    f"DELETE FROM `{db}`.k1 WHERE id > 2400",
                    f"INSERT INTO `{db}`.k1 VALUES (5000, 'gone with the binlog', 1)",
                    "FLUSH BINARY LOGS"])
    current, _ = server.binlog_position()
    dumps = [row[0] for row in server.execute("SHOW PROCESSLIST")
             if row[4] and "Binlog Dump" in str(row[4])]
    if dumps:
        server.execute([f"KILL CONNECTION {thread}" for thread in dumps])

    def purged() -> bool:
        server.execute(f"PURGE BINARY LOGS TO '{current}'")
        return old_file not in [str(row[0]) for row in server.execute("SHOW BINARY LOGS")]

    wait_for(purged)
    second_out = tmp_path / "second.jsonl"
    second = run(second_out)
    status = second.status()["snapshot"]
    assert status["id"] != first_id and status["finished"]
    records = _records(second_out)
    for table, key in (("k1", ("id",)), ("k2", ("a", "b")), ("u", ("id",))):
        assert rebuilt(records, table, key) == source_rows(server, db, table, key), table
    assert rebuilt_multiset(records, "n") == source_multiset(server, db, "n")


_PEAK = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(code)")


@pytest.mark.parametrize("key", ["PRIMARY KEY", ""], ids=["keyed", "keyless"])
def test_a_million_row_table_is_snapshotted_whole_in_bounded_memory(
        mariadb: Any, tmp_path: Path, key: str) -> None:
    """1,000,000 rows through `changestream run --snapshot initial-only`: every row once,
    and the router's peak memory bounded by its chunks, not the table; a table without
    a key too (read whole, as one transaction delivered in pieces)."""
    server, db = mariadb, "snapshot_million"
    server.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}",
                    f"CREATE TABLE {db}.t (id INT {key}, k INT, v VARCHAR(40), "
                    "amount DECIMAL(12,2), at DATETIME(6))"])
    with server.connect(autocommit=False) as conn, conn.cursor() as cur:
        for first in range(1, 1_000_001, 20_000):
            cur.execute(f"INSERT INTO {db}.t VALUES " + ", ".join(
                f"({i}, {i % 97}, 'row {i}', {i * 0.37:.2f}, "
                f"'2024-01-01 00:00:00.{i % 999999:06d}')" for i in range(first, first + 20_000)))
            conn.commit()
    out = tmp_path / "million.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", _PEAK, sys.executable, "-m", "changestream.cli", "run",
         "--source", server.url, "--include", db, "--snapshot", "initial-only",
         "--sink", f"jsonl:{out}", "--no-preflight"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    peak_mb = int(result.stdout.split()[-1]) / 1024
    ids = bytearray(1_000_001)
    rows = 0
    transactions = set()
    with out.open("rb") as f:
        for line in f:
            record = orjson.loads(line)
            assert record["op"] == "snapshot"
            ids[record["after"]["id"]] += 1
            transaction = record["transaction"]
            transactions.add(transaction["id"])
            if not key:
                assert transaction["seq"] == rows and transaction["size"] == 1_000_000
                assert transaction["last"] == (rows == 999_999)
            rows += 1
    server.execute(f"DROP DATABASE {db}")
    assert rows == 1_000_000 and ids.count(1) == 1_000_000
    assert len(transactions) == (1 if not key else 100)
    assert peak_mb < 300, f"peak {peak_mb:.0f} MB"
