"""The connection between the router and the server fails, through a TCP proxy of the
test's own: reset in the middle of an event, trickling bytes, frozen without a word. The
router reconnects at the last transaction boundary it read and delivers every committed
change exactly once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import Writer, router, stop, wait_for
from tests.faults.ledger import committed, count
from tests.faults.proxy import FaultyProxy
from tests.workloads import complete_lines as lines

pytestmark = [pytest.mark.faults, pytest.mark.integration]

FAST_HEARTBEAT = {"CHANGESTREAM_SOURCE_HEARTBEAT_SECONDS": "1"}


@dataclass
class Proxied:
    """A private MariaDB behind a proxy of the test's own, where its binlog stood when the
    test began, and the router's output and position files."""

    server: Any
    proxy: FaultyProxy
    start: tuple[str, int]
    out: Path
    position: Path

    def router(self, **env: str) -> Any:
        return router(self.proxy.url(self.server.url), self.out, self.position, env=env)

    def finish(self, process: Any) -> None:
        _finish(self.server, process, self.out, self.start)


@pytest.fixture
def proxied(private_mariadb: Any, tmp_path: Path) -> Iterator[Proxied]:
    with FaultyProxy(private_mariadb.port) as proxy:
        yield Proxied(private_mariadb, proxy, private_mariadb.binlog_position(),
                      tmp_path / "out.jsonl", tmp_path / "position.json")


def _finish(server: Any, process: Any, out: Path, start: tuple[str, int]) -> None:
    expected = committed(server.binlog_files(), "faults", start)
    wanted = sum(expected.values())
    wait_for(lambda: lines(out) >= wanted or process.poll() is not None, 120, "every change")
    assert process.poll() is None, process.stderr.read().decode()
    stderr = stop(process)
    assert process.returncode == 0, stderr
    ledger = count(expected, out, "faults")
    assert ledger.exactly_once, ledger


def test_connections_reset_in_the_middle_of_events(proxied: Proxied) -> None:
    proxy, out = proxied.proxy, proxied.out
    process = proxied.router(**FAST_HEARTBEAT)
    writer = Writer(proxied.server, 600, 20)  # the resets need the server's bytes flowing
    writer.start()
    for cut in (2_000, 9_000, 4_444):  # bytes into the stream: inside events
        wait_for(lambda: lines(out) > 50, 60, "changes")
        resets = proxy.resets
        proxy.reset_after(cut)
        wait_for(lambda resets=resets: proxy.resets > resets, 30, "a reset")
        time.sleep(1)
    writer.join(120)
    assert proxy.connections >= 4  # the router came back after each reset
    proxied.finish(process)


def test_a_trickling_connection_delivers_everything(proxied: Proxied) -> None:
    proxied.proxy.trickle = True
    process = proxied.router()
    Writer(proxied.server, 200, 4).run()
    proxied.finish(process)


def test_a_frozen_connection_is_noticed_and_replaced(proxied: Proxied) -> None:
    proxy = proxied.proxy
    process = proxied.router(**FAST_HEARTBEAT)
    Writer(proxied.server, 50, 1).run()
    wait_for(lambda: lines(proxied.out) > 0, 60, "changes")
    before = proxy.connections
    proxy.freeze()
    Writer(proxied.server, 50, 1, seed=2, first_id=10_000).run()
    # Silence for three heartbeats (at least 10 s) counts as a lost connection.
    wait_for(lambda: proxy.connections > before, 40, "a new connection")
    proxied.finish(process)
