"""The router when things go wrong or stop: the server drops the connection, the position
was purged, an XA transaction is prepared across a restart, SIGTERM, bad settings."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.model.errors import PurgedPositionError
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.workloads import complete_lines, wait_for

pytestmark = pytest.mark.integration


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "changestream.cli", "run", *args]


def test_reconnects_after_the_server_drops_the_connection(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    out = tmp_path / "out.jsonl"
    router = Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                                   filter=ChangeFilter(include=[db]), heartbeat_seconds=1,
                                   position_file=str(tmp_path / "position.json")),
                    JsonLinesSink(out))
    router.start()
    try:
        server.execute([f"INSERT INTO `{db}`.t VALUES ({i})" for i in range(1, 51)])
        wait_for(lambda: complete_lines(out) >= 51)
        dumps = [row[0] for row in server.execute("SHOW PROCESSLIST")
                 if row[4] and "Binlog Dump" in str(row[4])]
        assert dumps, "no binlog dump thread to kill"
        server.execute([f"KILL CONNECTION {thread}" for thread in dumps])
        server.execute([f"INSERT INTO `{db}`.t VALUES ({i})" for i in range(51, 101)])
        wait_for(lambda: complete_lines(out) >= 101)
        time.sleep(0.3)  # anything delivered twice would show up by now
    finally:
        router.stop()
        router.wait(30)
    ids = [r["after"]["id"] for r in _records(out) if r["op"] == "insert"]
    assert ids == list(range(1, 101))
    assert router.stats.reading.reconnects >= 1


def test_a_purged_position_is_a_clear_error(server: Any, fresh_database: str,
                                            tmp_path: Path) -> None:
    old_file, _ = server.binlog_position()
    server.execute(["FLUSH BINARY LOGS"])
    current, _ = server.binlog_position()
    # A server keeps a file a replica still reads (a router of an earlier test whose dump
    # thread has not noticed yet that it is gone): none may be reading it.
    dumps = [row[0] for row in server.execute("SHOW PROCESSLIST")
             if row[4] and "Binlog Dump" in str(row[4])]
    if dumps:
        server.execute([f"KILL CONNECTION {thread}" for thread in dumps])
    wait_for(lambda: not any(row[4] and "Binlog Dump" in str(row[4])
                             for row in server.execute("SHOW PROCESSLIST")))

    def purged() -> bool:
        # MariaDB also keeps a file until its binlog checkpoint is written (the storage
        # engine has made its commits durable): it may take a moment under load.
        server.execute(f"PURGE BINARY LOGS TO '{current}'")
        return old_file not in [str(row[0]) for row in server.execute("SHOW BINARY LOGS")]

    wait_for(purged)
    router = Router(RouterSettings(source=server.url, start=f"{old_file}:4",
                                   until="caught-up"), JsonLinesSink(tmp_path / "o.jsonl"))
    with pytest.raises(PurgedPositionError) as error:
        router.run()
    message = str(error.value)
    assert old_file in message and "purged" in message and "restart from" in message
    result = subprocess.run(_cli("--source", server.url, "--start", f"{old_file}:4",
                                 "--until", "caught-up", "--sink", "stdout"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    assert result.stdout == ""
    assert result.stderr.startswith("changestream run: ") and "purged" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_prepared_xa_transaction_is_delivered_after_a_restart(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)",
                    "XA START 'held'", f"INSERT INTO `{db}`.t VALUES (1)", "XA END 'held'",
                    "XA PREPARE 'held'"])  # the prepared transaction outlives the session
    server.execute(f"INSERT INTO `{db}`.t VALUES (2)")
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"

    def run() -> None:
        Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                              until="caught-up", position_file=str(position),
                              filter=ChangeFilter(include=[db])), JsonLinesSink(out)).run()

    run()
    assert [r["after"] for r in _records(out) if r["op"] == "insert"] == [{"id": 2}]
    saved = orjson.loads(position.read_bytes())
    assert list(saved["pending_xa"]) == ["X'68656c64',X'',1"]
    server.execute(["XA COMMIT 'held'", f"INSERT INTO `{db}`.t VALUES (3)"])
    run()
    inserts = [r for r in _records(out) if r["op"] == "insert"]
    assert [r["after"] for r in inserts] == [{"id": 2}, {"id": 1}, {"id": 3}]
    assert inserts[1]["transaction"]["xid"] == "X'68656c64',X'',1"
    assert orjson.loads(position.read_bytes())["pending_xa"] == {}


def test_sigterm_delivers_what_is_read_saves_the_position_and_exits_0(
        server: Any, fresh_database: str, tmp_path: Path) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    process = subprocess.Popen(_cli("--source", server.url, "--start",
                                    f"{start[0]}:{start[1]}", "--sink", f"jsonl:{out}",
                                    "--position-file", str(position), "--include", db),
                               stderr=subprocess.PIPE)
    try:
        server.execute([f"INSERT INTO `{db}`.t VALUES ({i})" for i in range(1, 21)])
        wait_for(lambda: complete_lines(out) >= 21)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr.decode()
    saved = orjson.loads(position.read_bytes())
    last = _records(out)[-1]["position"]
    assert saved["file"] == last["file"] and saved["pos"] > last["pos"]
    rerun = subprocess.run(_cli("--source", server.url, "--sink", f"jsonl:{out}",
                                "--position-file", str(position), "--include", db,
                                "--until", "caught-up"), capture_output=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert len(_records(out)) == 21  # nothing delivered twice


@pytest.mark.parametrize(("args", "code", "words"), [
    (["--source", "postgres://x@h"], 2, "use mysql://"),
    (["--source", "mysql://root@127.0.0.1:1"], 3, "cannot connect to 127.0.0.1:1"),
    (["--source", "file:///nonexistent/binlogs"], 2, "does not exist"),
    (["--source", "mysql://root@h", "--sink", "nosuch:thing"], 2, "unknown sink"),
    (["--source", "mysql://root@h", "--start", "yesterday"], 2, "start"),
])
def test_bad_settings_exit_with_a_clear_one_line_error(args: list[str], code: int,
                                                       words: str) -> None:
    result = subprocess.run(_cli(*args, "--until", "caught-up"), capture_output=True,
                            text=True, timeout=60, env={**os.environ})
    assert result.returncode == code, result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_slow_sink_slows_the_reader_down(server: Any, fresh_database: str) -> None:
    from changestream.actors.batch_settings import BatchSettings
    from changestream.sinks.callback import CallbackSink

    db = fresh_database
    start = server.binlog_position()
    server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)"] +
                    [f"INSERT INTO `{db}`.t VALUES ({i})" for i in range(1, 3001)])
    delivered: list[int] = []

    def slow(batch: Any) -> None:
        time.sleep(0.05)
        delivered.extend(c.after["id"] for c in batch.iter_changes() if c.op == "insert")

    router = Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                                   until="caught-up", filter=ChangeFilter(include=[db]),
                                   batch=BatchSettings(max_changes=20), batch_events=50),
                    CallbackSink(slow))
    router.start()
    ahead = []
    while not router.wait(0.05):
        depths = router.queue_depths()
        assert all(depth <= 4 for depth in depths.values()), depths
        # events read but not yet delivered: bounded by what the queues can hold
        ahead.append(router.stats.reading.events_read - 4 * len(delivered))
    assert delivered == list(range(1, 3001))
    assert max(ahead) < 4 * 50 * 4 * 2, max(ahead)
