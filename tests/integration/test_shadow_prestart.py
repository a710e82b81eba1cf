"""The schema history's shadow server, started beside the sink's open (real servers)."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.schema.shadow import ShadowSettings
from changestream.schema.shadow_prestart import ShadowPrestart
from changestream.schema.startup import server_facts
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command

pytestmark = pytest.mark.integration


def _wanted(server: Any, folder: Path) -> ShadowSettings:
    with server.connect() as conn:
        flavor, lower_case = server_facts(conn)
    return ShadowSettings(flavor, shadow_command(server), lower_case, str(folder))


def test_a_prestarted_shadow_is_handed_over_and_outlives_a_while(server: Any,
                                                                 tmp_path: Path) -> None:
    prestart = ShadowPrestart(HistorySettings("on", shadow_command(server), str(tmp_path)),
                              server.connect)
    shadow = prestart.server(_wanted(server, tmp_path))
    try:
        assert (tmp_path / str(os.getpid())).is_dir()  # the one started on the thread
        # It runs with a parent-death signal tied to the thread that started it: the
        # thread must still be there, and the server still answer, a while later.
        time.sleep(1.0)
        shadow.run("CREATE DATABASE prestarted")
        assert "prestarted" in shadow.database_names()
    finally:
        shadow.close()
        prestart.close()
    prestart._thread.join(10)
    assert not prestart._thread.is_alive()


def test_a_prestart_with_other_settings_is_stopped_and_a_new_shadow_started(
        server: Any, tmp_path: Path) -> None:
    prestart = ShadowPrestart(HistorySettings("on", shadow_command(server),
                                              str(tmp_path / "first")), server.connect)
    prestart._ready.wait(120)
    assert prestart._started is not None
    first = prestart._started[1]
    shadow = prestart.server(_wanted(server, tmp_path / "second"))
    try:
        assert shadow is not first
        assert first.server._process is None  # stopped
        shadow.run("CREATE DATABASE second_one")
    finally:
        shadow.close()
        prestart.close()


class _SlowOpening(JsonLinesSink):
    """A sink whose open waits for the router's shadow server to appear: a router that
    started it only after the open would never get past it."""

    def __init__(self, out: Path, shadow_dir: Path):
        super().__init__(out)
        self.capabilities = replace(self.capabilities, wants_schema_history=True)
        self.shadow_dir = shadow_dir

    def open(self) -> Any:
        deadline = time.monotonic() + 60
        while not (self.shadow_dir / str(os.getpid()) / "data").is_dir():
            if time.monotonic() > deadline:
                raise AssertionError("no shadow server was started during the sink's open")
            time.sleep(0.05)
        return super().open()


def test_the_router_starts_the_shadow_during_the_sink_s_open(server: Any, tmp_path: Path,
                                                             fresh_database: str) -> None:
    db = fresh_database
    server.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        start = server.binlog_position()
        server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))",
                        f"INSERT INTO `{db}`.t VALUES (1, 'one')"])
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")
    shadow_dir = tmp_path / "shadow"
    out = tmp_path / "out.jsonl"
    settings = RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                              until="caught-up", filter=ChangeFilter(include=[db]),
                              schema=HistorySettings("auto", shadow_command(server),
                                                     str(shadow_dir)))
    Router(settings, _SlowOpening(out, shadow_dir)).run()
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    inserted = [r for r in rows if r["op"] == "insert"]
    assert [r["after"] for r in inserted] == [{"id": 1, "v": "one"}]  # names: the history's
    assert not (shadow_dir / str(os.getpid())).exists() or not any(
        (shadow_dir / str(os.getpid())).iterdir())


def test_a_closed_shadow_is_killed_and_its_files_removed(server: Any, tmp_path: Path) -> None:
    prestart = ShadowPrestart(HistorySettings("on", shadow_command(server), str(tmp_path)),
                              server.connect)
    shadow = prestart.server(_wanted(server, tmp_path))
    process, folder = shadow.server._process, shadow.server.base_dir
    assert process is not None and folder.is_dir()
    shadow.run("CREATE DATABASE thrown_away")
    shadow.close()  # its files are removed: no clean shutdown (a fifth of a second)
    prestart.close()
    assert process.returncode == -signal.SIGKILL
    assert not folder.exists()
