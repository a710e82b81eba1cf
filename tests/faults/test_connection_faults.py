"""The connection between the router and the server fails, through a TCP proxy of the
test's own: reset in the middle of an event, trickling bytes, frozen without a word. The
router reconnects at the last transaction boundary it read and delivers every committed
change exactly once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import Writer, lines, router, stop, wait_for
from tests.faults.ledger import committed, count
from tests.faults.proxy import FaultyProxy

pytestmark = [pytest.mark.faults, pytest.mark.integration]

FAST_HEARTBEAT = {"CHANGESTREAM_SOURCE_HEARTBEAT_SECONDS": "1"}


def _finish(server: Any, process: Any, out: Path, start: tuple[str, int]) -> None:
    expected = committed(server.binlog_files(), "faults", start)
    wanted = sum(expected.values())
    wait_for(lambda: lines(out) >= wanted or process.poll() is not None, 120, "every change")
    assert process.poll() is None, process.stderr.read().decode()
    stderr = stop(process)
    assert process.returncode == 0, stderr
    ledger = count(expected, out, "faults")
    assert ledger.exactly_once, ledger


def test_connections_reset_in_the_middle_of_events(private_mariadb: Any,
                                                   tmp_path: Path) -> None:
    server = private_mariadb
    start = server.binlog_position()
    out = tmp_path / "out.jsonl"
    with FaultyProxy(server.port) as proxy:
        process = router(proxy.url(server.url), out, tmp_path / "position.json",
                         env=FAST_HEARTBEAT)
        writer = Writer(server, 600, 20)  # the resets need the server's bytes flowing
        writer.start()
        for cut in (2_000, 9_000, 4_444):  # bytes into the stream: inside events
            wait_for(lambda: lines(out) > 50, 60, "changes")
            resets = proxy.resets
            proxy.reset_after(cut)
            wait_for(lambda resets=resets: proxy.resets > resets, 30, "a reset")
            time.sleep(1)
        writer.join(120)
        assert proxy.connections >= 4  # the router came back after each reset
        _finish(server, process, out, start)


def test_a_trickling_connection_delivers_everything(private_mariadb: Any,
                                                    tmp_path: Path) -> None:
    server = private_mariadb
    start = server.binlog_position()
    out = tmp_path / "out.jsonl"
    with FaultyProxy(server.port) as proxy:
        proxy.trickle = True
        process = router(proxy.url(server.url), out, tmp_path / "position.json")
        Writer(server, 200, 4).run()
        _finish(server, process, out, start)


def test_a_frozen_connection_is_noticed_and_replaced(private_mariadb: Any,
                                                     tmp_path: Path) -> None:
    server = private_mariadb
    start = server.binlog_position()
    out = tmp_path / "out.jsonl"
    with FaultyProxy(server.port) as proxy:
        process = router(proxy.url(server.url), out, tmp_path / "position.json",
                         env=FAST_HEARTBEAT)
        Writer(server, 50, 1).run()
        wait_for(lambda: lines(out) > 0, 60, "changes")
        before = proxy.connections
        proxy.freeze()
        Writer(server, 50, 1, seed=2, first_id=10_000).run()
        # Silence for three heartbeats (at least 10 s) counts as a lost connection.
        wait_for(lambda: proxy.connections > before, 40, "a new connection")
        _finish(server, process, out, start)
