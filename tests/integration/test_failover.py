"""Failover to a replica by GTID, on private servers the tests start (a primary and a
replica of MariaDB 10.11 and of MySQL 9.x): the primary killed under load or stopped, the
replica promoted; a lagging replica refused or waited for; a restart on the other server.
The router is ``changestream run`` with both servers in ``--source``, into a JSON-lines sink:
every row the surviving server holds is delivered exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.devserver import EmbeddedServer
from tests.replication import (
    applied_all_received,
    apply_again,
    caught_up,
    kill9,
    primary_and_replica,
    promote,
    received_up_to,
    stop_applying,
    wait_until,
)
from tests.workloads import NumberedRowWriter

pytestmark = [pytest.mark.integration, pytest.mark.faults]
FLAVORS = pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
DB = "failover"


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    data = path.read_bytes()
    return [orjson.loads(line) for line in data[:data.rfind(b"\n") + 1].splitlines()]


def _ids(path: Path) -> list[int]:
    return [r["after"]["id"] for r in _records(path) if r["op"] == "insert"]


def _table(server: EmbeddedServer) -> list[int]:
    return sorted(row[0] for row in server.execute(f"SELECT id FROM `{DB}`.t"))


def _source(*servers: EmbeddedServer) -> str:
    return f"{servers[0].flavor}://root@" + ",".join(f"{s.host}:{s.port}" for s in servers)


def _router(source: str, out: Path, position: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "changestream.cli", "run", "--source", source,
            "--sink", f"jsonl:{out}", "--position-file", str(position), "--include", DB,
            "--batch-changes", "20", *extra]


def _env(wait: float) -> dict[str, str]:
    return {**os.environ, "CHANGESTREAM_FAILOVER_WAIT_SECONDS": str(wait),
            "CHANGESTREAM_FAILOVER_CHECK_SECONDS": "0.5", "PYTHONUNBUFFERED": "1"}


def _prepare(primary: EmbeddedServer, replica: EmbeddedServer) -> str:
    """The table, on both servers; the primary's binlog position before it (a start)."""
    file, pos = primary.binlog_position()
    primary.execute([f"CREATE DATABASE `{DB}`",
                     f"CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, v VARCHAR(40))"])
    wait_until(lambda: caught_up(replica, primary), what="the replica to catch up")
    return f"{file}:{pos}"


def _insert(server: EmbeddedServer, first: int, count: int, per_tx: int = 3) -> None:
    statements = []
    for n in range(first, first + count, per_tx):
        rows = ",".join(f"({i}, 'row {i}')" for i in range(n, min(n + per_tx, first + count)))
        statements += ["BEGIN", f"INSERT INTO `{DB}`.t VALUES {rows}", "COMMIT"]
    server.execute(statements)


def _exactly_once(out: Path, survivor: EmbeddedServer) -> None:
    """The sink holds every row of the surviving server once, and each GTID once."""
    expected = _table(survivor)
    wait_until(lambda: sorted(_ids(out)) == expected or len(_ids(out)) > len(expected),
               timeout=90, what=f"{len(expected)} rows in the sink")
    time.sleep(0.5)  # anything delivered twice would show up by now
    ids = _ids(out)
    assert sorted(ids) == expected, (len(ids), len(expected))
    assert len(set(ids)) == len(ids)
    seqs = Counter((r["transaction"]["gtid"], r["transaction"]["seq"]) for r in _records(out)
                   if r["op"] == "insert")
    assert max(seqs.values()) == 1, [k for k, n in seqs.items() if n > 1][:5]


def _start(source: str, out: Path, *extra: str, wait: float = 30.0) -> subprocess.Popen[bytes]:
    """The router, following the source; its stderr goes to ``out`` + ``.err``."""
    with open(f"{out}.err", "wb") as err:
        return subprocess.Popen(_router(source, out, out.with_suffix(".position"), *extra),
                                stderr=err, env=_env(wait))


def _stop(process: subprocess.Popen[bytes], out: Path) -> str:
    """Stop the router (SIGTERM, then SIGKILL); what it wrote to stderr."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = Path(f"{out}.err").read_text()
    print(text)  # shown when the test fails
    return text


@FLAVORS
def test_the_primary_killed_under_load_then_the_replica_promoted(flavor: str,
                                                                 tmp_path: Path) -> None:
    with primary_and_replica(flavor) as (primary, replica):
        start = _prepare(primary, replica)
        out = tmp_path / "out.jsonl"
        router = _start(_source(primary, replica), out, "--start", start)
        try:
            writer = NumberedRowWriter(primary, f"`{DB}`.t")
            writer.start()
            wait_until(lambda: len(_ids(out)) >= 300, timeout=60, what="rows delivered")
            # Replication is asynchronous: the router may read transactions the replica has
            # not received yet, and then rightly refuses it (exit 3, a test of its own). So
            # the router is held while the replica receives all it may have read; the writer
            # goes on, and the primary dies under it.
            router.send_signal(signal.SIGSTOP)
            try:
                file, pos = primary.binlog_position()
                wait_until(lambda: received_up_to(replica, file, pos),
                           what="the replica to receive what the router may have read")
                kill9(primary)
            finally:
                router.send_signal(signal.SIGCONT)
            writer.join(10)
            wait_until(lambda: applied_all_received(replica), what="the relay log applied")
            promote(replica)
            _insert(replica, 1_000_000, 60)
            _exactly_once(out, replica)
            assert router.poll() is None
        finally:
            stderr = _stop(router, out)
        assert router.returncode == 0, stderr
        assert f"reading from {replica.host}:{replica.port} now" in stderr
        # 300 or more rows before the kill (the writer may not have gone past 300 by then),
        # 60 after it; _exactly_once compared them with the surviving table.
        assert 1_000_000 in _ids(out) and len(_ids(out)) >= 360


@FLAVORS
def test_a_planned_switch_over(flavor: str, tmp_path: Path) -> None:
    with primary_and_replica(flavor) as (primary, replica):
        start = _prepare(primary, replica)
        out = tmp_path / "out.jsonl"
        router = _start(_source(primary, replica), out, "--start", start)
        try:
            _insert(primary, 1, 90)
            wait_until(lambda: len(_ids(out)) == 90, what="rows delivered")
            primary.execute("SET GLOBAL read_only = ON")
            wait_until(lambda: caught_up(replica, primary), what="the replica")
            primary.stop()  # a clean shutdown
            promote(replica)
            _insert(replica, 1_000, 30)
            _exactly_once(out, replica)
        finally:
            stderr = _stop(router, out)
        assert router.returncode == 0, stderr
        assert _ids(out) == [*range(1, 91), *range(1_000, 1_030)]


@FLAVORS
def test_a_demoted_primary_that_stays_up_is_left_for_the_writable_one(
        flavor: str, tmp_path: Path) -> None:
    """The primary made read-only and left running, alone (not replicating from the new
    primary): the caught-up router finds it demoted and reads on from the promoted
    replica, every row once."""
    with primary_and_replica(flavor) as (primary, replica):
        start = _prepare(primary, replica)
        out = tmp_path / "out.jsonl"
        router = _start(_source(primary, replica), out, "--start", start)
        try:
            _insert(primary, 1, 60)
            wait_until(lambda: len(_ids(out)) == 60, what="rows delivered")
            primary.execute("SET GLOBAL read_only = ON")
            wait_until(lambda: caught_up(replica, primary), what="the replica")
            promote(replica)
            _insert(replica, 1_000, 30)
            _exactly_once(out, replica)
            assert primary.running  # left because demoted, not because it went away
        finally:
            stderr = _stop(router, out)
        assert router.returncode == 0, stderr
        assert _ids(out) == [*range(1, 61), *range(1_000, 1_030)]
        assert "was demoted (read_only is ON)" in stderr, stderr


@FLAVORS
def test_a_lagging_replica_is_refused_after_the_wait_with_one_line(
        flavor: str, tmp_path: Path) -> None:
    with primary_and_replica(flavor) as (primary, replica):
        start = _prepare(primary, replica)
        _insert(primary, 1, 30)
        wait_until(lambda: caught_up(replica, primary), what="the replica")
        stop_applying(replica)
        _insert(primary, 100, 30)  # the replica receives these but does not apply them
        out = tmp_path / "out.jsonl"
        router = _start(_source(primary, replica), out, "--start", start, wait=2)
        try:
            wait_until(lambda: len(_ids(out)) == 60, what="rows delivered")
            kill9(primary)
            router.wait(timeout=60)
        finally:
            stderr = _stop(router, out)
        assert router.returncode == 3, stderr
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("changestream run: no server of the set has every "
                               "transaction delivered after waiting 2s"), last
        assert f"{replica.host}:{replica.port} lacks " in last
        assert f"{primary.host}:{primary.port} does not answer" in last
        assert "Traceback" not in stderr
        assert sorted(_ids(out)) == [*range(1, 31), *range(100, 130)]


@FLAVORS
def test_a_lagging_replica_is_waited_for(flavor: str, tmp_path: Path) -> None:
    with primary_and_replica(flavor) as (primary, replica):
        start = _prepare(primary, replica)
        stop_applying(replica)
        _insert(primary, 1, 60)
        out = tmp_path / "out.jsonl"
        router = _start(_source(primary, replica), out, "--start", start, wait=60)
        try:
            wait_until(lambda: len(_ids(out)) == 60, what="rows delivered")
            wait_until(lambda: replica_received_all(replica, primary), what="relay log")
            kill9(primary)
            time.sleep(3)  # the router waits for the replica
            assert router.poll() is None
            apply_again(replica)
            wait_until(lambda: applied_all_received(replica), what="the relay log applied")
            promote(replica)
            _insert(replica, 1_000, 30)
            _exactly_once(out, replica)
        finally:
            stderr = _stop(router, out)
        assert router.returncode == 0, stderr
        assert sorted(_ids(out)) == [*range(1, 61), *range(1_000, 1_030)]


def replica_received_all(replica: EmbeddedServer, primary: EmbeddedServer) -> bool:
    """Whether the replica's IO thread has received all the primary wrote (the primary's
    binlog position, as the replica read it)."""
    from tests.replication import replica_status

    s = replica_status(replica)
    key = ("Master_Log_File", "Read_Master_Log_Pos") if replica.flavor == "mariadb" else (
        "Source_Log_File", "Read_Source_Log_Pos")
    return (s.get(key[0]), s.get(key[1])) == primary.binlog_position()


@FLAVORS
def test_a_restart_on_the_other_server_resumes_by_gtid(flavor: str, tmp_path: Path) -> None:
    with primary_and_replica(flavor) as (primary, replica):
        start = _prepare(primary, replica)
        out, position = tmp_path / "out.jsonl", tmp_path / "position.json"

        def run(source: str, *extra: str) -> str:
            result = subprocess.run(_router(source, out, position, "--until", "caught-up",
                                            *extra), capture_output=True, env=_env(10),
                                    timeout=120)
            assert result.returncode == 0, result.stderr.decode()
            return result.stderr.decode()

        _insert(primary, 1, 45)
        run(_source(primary, replica), "--start", start)
        assert _ids(out) == list(range(1, 46))
        saved = orjson.loads(position.read_bytes())
        assert saved["gtid_set"]
        _insert(primary, 100, 45)
        wait_until(lambda: caught_up(replica, primary), what="the replica")
        run(_source(replica, primary))  # the replica first: read from it by GTID
        assert _ids(out) == [*range(1, 46), *range(100, 145)]
        _insert(primary, 200, 45)
        wait_until(lambda: caught_up(replica, primary), what="the replica")
        kill9(primary)
        promote(replica)
        _insert(replica, 300, 15)
        run(_source(primary, replica))  # the primary is gone: the replica takes over
        _exactly_once(out, replica)
        assert _ids(out) == [*range(1, 46), *range(100, 145), *range(200, 245),
                             *range(300, 315)]


@FLAVORS
def test_a_clean_shutdown_of_the_only_server_is_a_lost_connection(flavor: str,
                                                                  tmp_path: Path) -> None:
    """MySQL sends its replicas an EOF packet as it shuts down: the router reconnects once
    the server is back, rather than ending as if the source had ended."""
    from tests.replication import new_server
    from tests.servers import require_server

    server = require_server(new_server(flavor, 1))
    try:
        file, pos = server.binlog_position()
        server.execute([f"CREATE DATABASE `{DB}`",
                        f"CREATE TABLE `{DB}`.t (id INT PRIMARY KEY, v VARCHAR(40))"])
        out = tmp_path / "out.jsonl"
        router = _start(_source(server), out, "--start", f"{file}:{pos}")
        try:
            _insert(server, 1, 30)
            wait_until(lambda: len(_ids(out)) == 30, what="rows delivered")
            server.stop()
            time.sleep(1)
            assert router.poll() is None, "the router ended with the server"
            server.start()
            _insert(server, 100, 30)
            wait_until(lambda: len(_ids(out)) == 60, what="rows after the restart")
        finally:
            stderr = _stop(router, out)
        assert router.returncode == 0, stderr
        assert _ids(out) == [*range(1, 31), *range(100, 130)]
    finally:
        server.close()
