"""``/status``'s ``source_position`` is where reading has got to: the end of the last event
read, on both decode paths and after the server drops the connection (it used to fall back
to the end of the FORMAT_DESCRIPTION event a server sends again on every connection, and
with decode workers to stay there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.workloads import wait_for

pytestmark = pytest.mark.integration


def _positions(router: Router) -> tuple[tuple[str, int], tuple[str, int]] | None:
    """Where reading and delivery have got to (``None`` before both are known: a batch's
    changes are counted a moment before its position is saved)."""
    status = router.status()
    read, delivered = status["source_position"], status["delivered_position"]
    if read is None or delivered is None:
        return None
    return (read["file"], read["pos"]), (delivered["file"], delivered["pos"])


def _kill_dump_threads(server: Any) -> None:
    dumps = [row[0] for row in server.execute("SHOW PROCESSLIST")
             if row[4] and "Binlog Dump" in str(row[4])]
    assert dumps, "no binlog dump thread to kill"
    server.execute([f"KILL CONNECTION {thread}" for thread in dumps])


@pytest.mark.parametrize("decode_workers", [0, 2])
def test_source_position_is_the_last_event_read_also_after_a_reconnect(
        server: Any, fresh_database: str, tmp_path: Path, decode_workers: int) -> None:
    db = fresh_database
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v TEXT)")
    start = server.binlog_position()
    # Heartbeats would carry the server's position and hide a stale one: none during the test.
    router = Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                                   filter=ChangeFilter(include=[db]), heartbeat_seconds=60,
                                   decode_workers=decode_workers, decode_workers_wait=True),
                    JsonLinesSink(tmp_path / "out.jsonl"))
    router.start()
    try:
        server.execute([f"INSERT INTO `{db}`.t VALUES ({i}, REPEAT('x', 300))"
                        for i in range(1, 101)])
        end = server.binlog_position()
        wait_for(lambda: router.status()["changes_delivered"] == 100)
        wait_for(lambda: _positions(router) == (end, end), timeout=10)
        assert (router.status()["worker_segments"] > 0) == (decode_workers > 0)

        read_before = router.status()["events_read"]
        _kill_dump_threads(server)
        wait_for(lambda: router.status()["reconnects"] >= 1)
        # What the server sends on the new connection has been read (its FORMAT_DESCRIPTION).
        wait_for(lambda: router.status()["connected"] and
                 router.status()["events_read"] > read_before)
        assert _positions(router) == (end, end), "the read position went back on reconnecting"

        server.execute([f"INSERT INTO `{db}`.t VALUES ({i}, 'y')" for i in range(101, 121)])
        end = server.binlog_position()
        wait_for(lambda: router.status()["changes_delivered"] == 120)
        wait_for(lambda: _positions(router) == (end, end), timeout=10)
        assert router.status()["seconds_behind"] == 0.0
    finally:
        router.stop()
        router.wait(30)
