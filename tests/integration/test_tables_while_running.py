"""Changes while running, against a real server and `changestream run` processes: a table
added to the included set (its snapshot, then its stream), a table paused and resumed, a
snapshot of part of a table (``--where``), each through the CLI and the control endpoint,
each surviving a kill -9 in the middle: the restarted router, asked nothing, goes on with
the change, and the tables rebuilt from the records equal the source."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.integration.test_snapshot import _free_port, _records, rebuilt, source_rows
from tests.workloads import wait_for

pytestmark = pytest.mark.integration

TOKEN = "s3cret"


class RouterProcess:
    """A `changestream run` of ``db``'s tables ``include`` into JSON lines, with a position
    file and a control endpoint."""

    def __init__(self, server: Any, tmp_path: Path, include: str):
        self.out, self.position = tmp_path / "out.jsonl", tmp_path / "position.json"
        self.command = [sys.executable, "-m", "changestream.cli", "run", "--source",
                        server.url, "--include", include, "--position-file",
                        str(self.position), "--sink", f"jsonl:{self.out}", "--snapshot",
                        "never", "--start", "latest", "--batch-seconds", "0.2"]
        self.env = {**os.environ, "CHANGESTREAM_CONTROL_TOKEN": TOKEN}
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> None:
        self.port = _free_port()
        self.process = subprocess.Popen([*self.command, "--control-port", str(self.port)],
                                        env=self.env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
        wait_for(lambda: bool((self.status() or {}).get("connected")), 60)

    def status(self) -> dict[str, Any] | None:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/status",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return dict(orjson.loads(response.read()))
        except OSError:
            return None

    def post(self, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                         orjson.dumps(body), method="POST",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, orjson.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, orjson.loads(exc.read())

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "changestream.cli", *args,
                               "--control-port", str(self.port)], capture_output=True,
                              text=True, timeout=60, env=self.env)

    def saved(self) -> dict[str, Any]:
        return dict(orjson.loads(self.position.read_bytes())) if self.position.exists() \
            else {}

    def caught_up_with(self, server: Any) -> None:
        """Wait until every change the server has now is delivered."""
        head = server.binlog_position()

        def delivered() -> bool:
            at = (self.status() or {}).get("delivered_position") or {}
            return bool(at) and (at["file"], at["pos"]) >= head

        wait_for(delivered, 60)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(60)

    def run_until_caught_up(self) -> None:
        done = subprocess.run([*self.command, "--until", "caught-up"], capture_output=True,
                              timeout=300, env=self.env)
        assert done.returncode == 0, done.stderr.decode()


def _tables(server: Any, db: str) -> None:
    server.execute([
        f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v VARCHAR(20))",
        f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        f"CREATE TABLE `{db}`.bag (g INT)",
        f"INSERT INTO `{db}`.b VALUES " + ", ".join(f"({i}, 'b{i}', {i})"
                                                    for i in range(1, 1201)),
    ])


def _b_changes(server: Any, db: str, first: int) -> None:
    """Inserts, updates and deletes of ``b`` (and an insert into ``a``)."""
    server.execute([
        f"INSERT INTO `{db}`.b VALUES " + ", ".join(f"({i}, 'new', {i})"
                                                    for i in range(first, first + 50)),
        f"UPDATE `{db}`.b SET v = 'upd', n = n + 1 WHERE id % 7 = 0",
        f"DELETE FROM `{db}`.b WHERE id % 11 = 0",
        f"INSERT INTO `{db}`.a VALUES ({first}, 'a')",
    ])


def test_a_table_added_while_running_is_snapshotted_then_streamed_across_a_kill(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """``b`` (outside the included set) is added through the CLI while its chunks cannot be
    read (another session holds it locked); the position saved says so, the router is
    killed -9, ``b`` changes, and the router restarted (asked nothing) reads it and streams
    its changes: ``b`` rebuilt from the records equals the source. A keyless table is
    refused with a snapshot, a table of a database the schema history does not keep too."""
    db = fresh_database
    _tables(server, db)
    router = RouterProcess(server, tmp_path, f"{db}.a")
    locker = server.connect(autocommit=True)
    try:
        router.start()
        refused = router.cli("tables", "add", f"{db}.bag")
        assert refused.returncode == 2 and "no primary key" in refused.stderr, refused.stderr
        outside = router.cli("tables", "add", "elsewhere.t")
        assert outside.returncode == 2 and "schema history" in outside.stderr, outside.stderr
        _b_changes(server, db, 5000)  # before the add: in b's snapshot, not its stream
        with locker.cursor() as cur:
            cur.execute(f"LOCK TABLES `{db}`.b WRITE")
        added = router.cli("tables", "add", f"{db}.b")
        assert added.returncode == 0, added.stderr
        assert "snapshot" in added.stdout and f"added: {db}.b" in added.stdout

        def announced() -> bool:
            saved = router.saved()
            return (saved.get("tables") or {}).get("added") == [f"{db}.b"] and \
                (saved.get("snapshot") or {}).get("tables") == [f"{db}.b"]

        wait_for(announced, 30)
        router.kill()
    finally:
        router.kill()
        locker.close()  # unlocks
    assert not any(r["table"] == "b" for r in _records(router.out)) \
        if router.out.exists() else True
    _b_changes(server, db, 6000)  # after the add: streamed
    router.run_until_caught_up()
    records = _records(router.out)
    assert rebuilt(records, "b", ("id",)) == source_rows(server, db, "b", ("id",))
    assert {r["after"]["id"] for r in records if r["table"] == "b" and r["op"] == "insert"} \
        == set(range(6000, 6050))
    assert not any(r["table"] == "bag" for r in records)


def test_a_paused_table_stays_paused_across_a_kill_and_is_read_again_when_resumed(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """``b`` is paused through the endpoint: its changes are not delivered (``a``'s are),
    also by the router restarted after a kill -9; resumed through the CLI, it is read
    again by a snapshot and streamed: ``b`` rebuilt from the records equals the source."""
    db = fresh_database
    _tables(server, db)
    router = RouterProcess(server, tmp_path, db)
    try:
        router.start()
        code, body = router.post("/tables", {"action": "pause", "tables": [f"{db}.b"]})
        assert code == 202 and body["tables"]["paused"] == [f"{db}.b"], body
        assert router.post("/tables", {"action": "stop", "tables": [f"{db}.b"]})[0] == 400
        assert router.post("/tables", {"action": "pause", "tables": ["b"]})[0] == 400
        wait_for(lambda: (router.saved().get("tables") or {}).get("paused") == [f"{db}.b"],
                 30)
        assert (router.status() or {})["tables"]["paused"] == [f"{db}.b"]
        _b_changes(server, db, 5000)
        router.caught_up_with(server)
        router.kill()
        _b_changes(server, db, 6000)
        router.start()  # paused still, from the position
        _b_changes(server, db, 7000)
        router.caught_up_with(server)
        records = _records(router.out)
        assert not any(r["table"] == "b" for r in records)
        assert {r["after"]["id"] for r in records if r["table"] == "a"} == {5000, 6000, 7000}
        resumed = router.cli("tables", "resume", f"{db}.b")
        assert resumed.returncode == 0, resumed.stderr
        wait_for(lambda: ((router.status() or {}).get("snapshot") or {}).get("finished"), 60)
        _b_changes(server, db, 8000)
        router.caught_up_with(server)
    finally:
        router.stop()
        router.kill()
    records = _records(router.out)
    assert rebuilt(records, "b", ("id",)) == source_rows(server, db, "b", ("id",))
    assert router.saved().get("tables") is None  # nothing added or paused any more


def test_a_snapshot_of_part_of_a_table_goes_on_with_its_condition_after_a_kill(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    """``changestream snapshot --where`` reads only the rows the condition holds for; asked
    with a condition that makes its chunk slow (``SLEEP`` per row), then killed -9 before
    the chunk is read, the restarted router reads them with the condition (kept in the
    position). A condition the server refuses is a 400 with its words."""
    db = fresh_database
    _tables(server, db)
    router = RouterProcess(server, tmp_path, db)
    where = "id <= 300 AND v LIKE 'b%' AND SLEEP(0.02) = 0"
    try:
        router.start()
        bad = router.cli("snapshot", f"{db}.b", "--where", "no_such_column > 1")
        assert bad.returncode == 2 and "no_such_column" in bad.stderr, bad.stderr
        asked = router.cli("snapshot", f"{db}.b", "--where", where)
        assert asked.returncode == 0 and "where id <= 300" in asked.stdout, asked.stderr
        wait_for(lambda: (router.saved().get("snapshot") or {}).get("where") == {
            f"{db}.b": where}, 30)
        router.kill()
    finally:
        router.kill()
    assert not any(r["op"] == "snapshot" for r in _records(router.out)) \
        if router.out.exists() else True
    router.run_until_caught_up()
    snapshot = [r["after"]["id"] for r in _records(router.out) if r["op"] == "snapshot"]
    assert sorted(snapshot) == list(range(1, 301))
