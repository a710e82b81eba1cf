"""The schema history against a randomized workload of row changes and DDL of every kind.

The same seeded workload runs twice on each server: in databases ``m_*`` while the server
logs ``binlog_row_metadata=MINIMAL`` (no column names: the router must take them from its
schema history) and in ``f_*`` while it logs ``FULL`` (the names are in every TABLE_MAP).
The change records must be equal but for the database names. The MINIMAL side is read in
chunks, the router stopping at random points and restarting behind the DDL that ran while
it was stopped; and once through ``changestream run`` killed with SIGKILL again and again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.schema.tracker import SchemaHistoryError
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.schema_workload import DDL_KINDS, SchemaWorkload
from tests.servers import shadow_command

pytestmark = pytest.mark.integration

SEED = 20261123


@pytest.fixture
def metadata(server: Any) -> Iterator[Callable[[str], None]]:
    """Sets the server's binlog_row_metadata; FULL again afterwards."""
    yield lambda value: server.execute(f"SET GLOBAL binlog_row_metadata = {value}")
    server.execute("SET GLOBAL binlog_row_metadata = FULL")


def _settings(server: Any, prefix: str, start: tuple[str, int],
              position: Path | None, history: str = "auto") -> RouterSettings:
    return RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up",
                          filter=ChangeFilter(include=[f"{prefix}a", f"{prefix}b"]),
                          position_file=str(position) if position else None,
                          schema=HistorySettings(history, shadow_command(server)))


def _run(server: Any, prefix: str, start: tuple[str, int], out: Path,
         position: Path | None = None, history: str = "auto") -> Router:
    router = Router(_settings(server, prefix, start, position, history), JsonLinesSink(out))
    router.run()
    return router


def _changes(out: Path, prefix: str, dedupe: bool = False) -> list[tuple[Any, ...]]:
    """The records without what differs between the two runs (database names, positions,
    GTIDs, times); with ``dedupe`` a transaction delivered twice counts once."""
    seen: set[tuple[str, int]] = set()
    changes = []
    for line in out.read_bytes().splitlines():
        record = orjson.loads(line)
        key = (record["transaction"]["id"], record["transaction"]["seq"])
        if dedupe and key in seen:
            continue
        seen.add(key)
        database = (record["database"] or "").removeprefix(prefix)
        if record["op"] == "ddl":
            changes.append(("ddl", database, record["table"]))
        else:
            changes.append((record["op"], database, record["table"], record["before"],
                            record["after"], record["primary_key"]))
    return changes


def _workload(server: Any, prefix: str) -> SchemaWorkload:
    return SchemaWorkload(server.execute, prefix, SEED, server.flavor)


def _chunks(workload: SchemaWorkload) -> list[Callable[[], None]]:
    """The workload cut at random points: set-up, every DDL kind once, then random steps."""
    cuts = random.Random(SEED)
    steps: list[Callable[[], None]] = [workload.create]
    steps.append(workload.run_every_ddl_kind)
    steps += [workload.step] * 40
    chunks, current = [], []
    for step in steps:
        current.append(step)
        if cuts.random() < 0.2:
            chunks.append(current)
            current = []
    chunks.append(current)

    def runner(chunk: list[Callable[[], None]]) -> Callable[[], None]:
        return lambda: [step() for step in chunk] and None

    return [runner(c) for c in chunks if c]


# MariaDB 10.11's MINIMAL metadata is held by the kill-again test below and the Spark DDL
# test (tests/spark_e2e/test_schema_ddl.py); the suite's time is bounded.
@pytest.mark.parametrize("server", ["mariadb11", "mysql"], indirect=True)
def test_minimal_metadata_gives_the_records_full_metadata_gives_across_restarts(
        server: Any, metadata: Callable[[str], None], tmp_path: Path) -> None:
    minimal, full = _workload(server, "m_"), _workload(server, "f_")

    metadata("FULL")
    full_start = server.binlog_position()
    for chunk in _chunks(full):
        chunk()
    _run(server, "f_", full_start, tmp_path / "full.jsonl")

    metadata("MINIMAL")
    start = server.binlog_position()
    out, position = tmp_path / "minimal.jsonl", tmp_path / "position.json"
    restarts = 0
    for chunk in _chunks(minimal):
        chunk()  # DDL runs while the router is stopped: it restarts behind it
        _run(server, "m_", start, out, position)
        restarts += 1
    metadata("FULL")

    assert minimal.kinds_run == full.kinds_run == set(DDL_KINDS), \
        set(DDL_KINDS) - minimal.kinds_run
    assert restarts >= 5
    full_changes = _changes(tmp_path / "full.jsonl", "f_")
    assert sum(1 for c in full_changes if c[0] != "ddl") > 100
    assert _changes(out, "m_") == full_changes
    stored = list(tmp_path.glob("position.json.schema-*.json"))
    assert len(stored) == 1, "one stored history state, the one the position names"
    assert orjson.loads(position.read_bytes())["schema_history"] in stored[0].name

    # The server's binlog files, read as files (no server to seed from): the history is
    # learnt from the DDL they hold, and the records are the same.
    files_out = tmp_path / "files.jsonl"
    files = Router(RouterSettings(
        source=f"file://{server.binlog_dir}", start=f"{start[0]}:{start[1]}",
        until="caught-up", filter=ChangeFilter(include=["m_a", "m_b"]),
        schema=HistorySettings("auto", shadow_command(server))), JsonLinesSink(files_out))
    files.run()
    assert (files.status()["schema_history"] or {}).get("origin") == "binlog"
    assert _changes(files_out, "m_") == full_changes


# MariaDB 11.8 is held to the same history by the test above; the kills run on two
# servers to keep the suite's time in bounds.
@pytest.mark.parametrize("server", ["mariadb", "mysql"], indirect=True)
def test_a_router_killed_again_and_again_in_ddl_heavy_stretches_loses_nothing(
        server: Any, metadata: Callable[[str], None], tmp_path: Path) -> None:
    metadata("MINIMAL")
    start = server.binlog_position()
    workload = _workload(server, "k_")
    workload.create()
    for _ in range(5):
        workload.run_every_ddl_kind()
    metadata("FULL")
    reference = tmp_path / "reference.jsonl"
    _run(server, "k_", start, reference, history="on")

    out, position = tmp_path / "killed.jsonl", tmp_path / "position.json"
    env = {**os.environ, "CHANGESTREAM_SCHEMA_SHADOW_SERVER": shadow_command(server) or "",
           "CHANGESTREAM_SOURCE_DECODE_WORKERS": "0"}
    command = [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
               "--start", f"{start[0]}:{start[1]}", "--until", "caught-up",
               "--include", "k_a", "--include", "k_b", "--position-file", str(position),
               "--sink", f"jsonl:{out}", "--batch-changes", "3"]
    delays = random.Random(SEED)
    kills = 0
    # Killed at random moments, each run getting a little further: a whole run takes about
    # a second here, its start under half of it (the shadow server's start got shorter, and
    # later delays let runs finish unkilled).
    for _ in range(6):
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
        try:
            process.wait(timeout=delays.uniform(0.35, 0.9))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
            kills += 1
            continue
        stderr = process.stderr.read().decode() if process.stderr else ""
        assert process.returncode == 0, stderr
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert kills >= 3, "the router finished before it could be killed three times"
    time.sleep(0.5)  # the shadow servers die with their routers
    stray = subprocess.run(["pgrep", "-f", f"{position}.shadow"], capture_output=True)
    assert stray.stdout == b"", "a shadow server outlived its router"
    assert not any(Path(f"{position}.shadow").iterdir()), "shadow files left behind"
    assert _changes(out, "k_", dedupe=True) == _changes(reference, "k_")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "changestream.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_ddl_the_shadow_cannot_run_stops_the_router_and_can_be_skipped_or_reseeded(
        mariadb11: Any, tmp_path: Path) -> None:
    """MariaDB 11.8's VECTOR type, with the host's MariaDB 10.11 as the shadow (which does
    not know it): the router stops naming the statement and its position; `changestream
    schema skip` lets it go on (that table then unknown), `reseed` takes it from the server."""
    server = mariadb11
    server.execute(["SET GLOBAL binlog_row_metadata = MINIMAL", "DROP DATABASE IF EXISTS vec",
                    "CREATE DATABASE vec", "CREATE TABLE vec.t (id INT PRIMARY KEY, a INT)"])
    try:
        start = server.binlog_position()
        server.execute(["INSERT INTO vec.t VALUES (1, 10)",
                        "CREATE TABLE vec.v (id INT PRIMARY KEY, e VECTOR(3))",
                        "INSERT INTO vec.t VALUES (2, 20)"])
        ddl_at = next(f"{e.header.file.rsplit('/', 1)[-1]}:{e.header.offset}"
                      for e in _query_events(server, start) if "VECTOR" in e.query)
        out, position = tmp_path / "out.jsonl", tmp_path / "position.json"

        def run() -> None:
            Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                                  until="caught-up", filter=ChangeFilter(include=["vec"]),
                                  position_file=str(position),
                                  schema=HistorySettings("on", None)),  # the host's 10.11
                   JsonLinesSink(out)).run()

        with pytest.raises(SchemaHistoryError) as error:
            run()
        message = str(error.value)
        assert ddl_at in message and "CREATE TABLE vec.v" in message
        assert f"changestream schema skip {ddl_at}" in message

        # The configuration's schema.skip does it too (for a history a sink keeps).
        config_out = tmp_path / "config-skip.jsonl"
        Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                              until="caught-up", filter=ChangeFilter(include=["vec"]),
                              schema=HistorySettings("on", None, skip=(ddl_at,))),
               JsonLinesSink(config_out)).run()
        assert [r["after"] for r in map(orjson.loads, config_out.read_bytes().splitlines())
                if r["op"] == "insert"] == [{"id": 1, "a": 10}, {"id": 2, "a": 20}]

        skipped = _cli("schema", "skip", ddl_at, "--position-file", str(position))
        assert skipped.returncode == 0, skipped.stderr
        run()
        rows = [r["after"] for r in map(orjson.loads, out.read_bytes().splitlines())
                if r["op"] == "insert"]
        assert rows == [{"id": 1, "a": 10}, {"id": 2, "a": 20}]

        shown = _cli("schema", "show", "--position-file", str(position), "vec.t")
        assert shown.returncode == 0, shown.stderr
        assert "vec.t: primary key (id)" in shown.stdout and "  a int(11)" in shown.stdout
        assert _cli("schema", "show", "--position-file", str(position),
                    "vec.v").returncode == 2  # skipped: not in the history

        reseeded = _cli("schema", "reseed", "--position-file", str(position), "--source",
                        server.url, "--shadow-server", shadow_command(server) or "")
        assert reseeded.returncode == 0, reseeded.stderr
        shown = _cli("schema", "show", "--position-file", str(position), "--format", "json")
        tables = orjson.loads(shown.stdout)["tables"]["vec"]
        assert [c["column_type"] for c in tables["v"]["columns"]] == ["int(11)", "vector(3)"]
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")


def _query_events(server: Any, start: tuple[str, int]) -> list[Any]:
    from changestream.decoding.events import QueryEvent
    from changestream.sources.files import FileSource

    return [e for e in FileSource(server.binlog_files(), start_file=start[0],
                                  start_pos=start[1]) if isinstance(e, QueryEvent)]


def test_binlog_files_learn_tables_from_their_ddl_and_resume_with_the_stored_history(
        mariadb: Any, tmp_path: Path) -> None:
    """Files without row metadata: a table created in them is named from its CREATE TABLE
    (and followed through an ALTER made while the router was stopped: the restart restores
    the history stored with the position); a table older than the files gets positional
    names, never another table's or another time's."""
    server = mariadb
    server.execute(["DROP DATABASE IF EXISTS fh", "CREATE DATABASE fh",
                    "CREATE TABLE fh.old (id INT PRIMARY KEY, a INT)"])
    server.execute(["SET GLOBAL binlog_row_metadata = MINIMAL", "FLUSH BINARY LOGS"])
    start = server.binlog_position()
    server.execute(["CREATE TABLE fh.t (id INT PRIMARY KEY, a INT, b VARCHAR(5))",
                    "INSERT INTO fh.t VALUES (1, 10, 'x')", "INSERT INTO fh.old VALUES (1, 7)"])
    out, position = tmp_path / "files.jsonl", tmp_path / "position.json"

    def run() -> Router:
        router = Router(RouterSettings(
            source=f"file://{server.binlog_dir}", start=f"{start[0]}:{start[1]}",
            until="caught-up", filter=ChangeFilter(include=["fh"]),
            position_file=str(position),
            schema=HistorySettings("auto", shadow_command(server))), JsonLinesSink(out))
        router.run()
        return router

    try:
        assert (run().status()["schema_history"] or {}).get("origin") == "binlog"
        server.execute(["ALTER TABLE fh.t MODIFY b VARCHAR(5) AFTER id",
                        "INSERT INTO fh.t (id, a, b) VALUES (2, 20, 'y')"])
        assert (run().status()["schema_history"] or {}).get("origin") == "stored"
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")
    rows = [(r["table"], r["after"]) for r in map(orjson.loads, out.read_bytes().splitlines())
            if r["op"] == "insert"]
    assert rows == [("t", {"id": 1, "a": 10, "b": "x"}), ("old", {"@1": 1, "@2": 7}),
                    ("t", {"id": 2, "b": "y", "a": 20})]
