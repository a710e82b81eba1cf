"""The server fails under a running router: killed -9 and back within the reconnect window
(the router reconnects, nothing lost or doubled), or down for longer (a clear exit, and a
restart later delivers the rest, exactly once)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import Writer, router, stop, wait_for
from tests.faults.ledger import committed, count
from tests.workloads import complete_lines as lines

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _kill(server: Any) -> None:
    assert server._process is not None
    server._process.send_signal(signal.SIGKILL)
    server._process.wait()
    server._process = None


def test_the_server_killed_and_back_costs_nothing(private_mariadb: Any,
                                                  tmp_path: Path) -> None:
    server = private_mariadb
    start = server.binlog_position()
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    process = router(server.url, out, position)
    writer = Writer(server, 600, 12)
    writer.start()
    for _ in range(2):  # twice, a few seconds apart, while the writer commits
        wait_for(lambda: lines(out) > 200 or process.poll() is not None, 60, "changes")
        time.sleep(2)
        _kill(server)
        time.sleep(1.5)
        server.start()
    writer.join(180)
    assert writer.error is None, writer.error
    expected = committed(server.binlog_files(), "faults", start)
    wanted = sum(expected.values())
    wait_for(lambda: lines(out) >= wanted or process.poll() is not None, 120, "every change")
    assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
    stderr = stop(process)
    assert process.returncode == 0, stderr
    ledger = count(expected, out, "faults")
    assert writer.failures >= 1 and ledger.exactly_once, ledger


def test_a_server_down_longer_than_the_reconnect_window_is_a_clear_exit(
        private_mariadb: Any, tmp_path: Path) -> None:
    server = private_mariadb
    start = server.binlog_position()
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    Writer(server, 100, 0.5).run()
    window = {"CHANGESTREAM_SOURCE_RECONNECT_SECONDS": "4",
              "CHANGESTREAM_SOURCE_HEARTBEAT_SECONDS": "1"}
    process = router(server.url, out, position, env=window)
    wait_for(lambda: lines(out) >= sum(committed(server.binlog_files(), "faults",
                                                 start).values()), 60, "the changes")
    _kill(server)
    began = time.monotonic()
    _, err = process.communicate(timeout=120)
    stderr = err.decode()
    assert process.returncode == 3, stderr
    assert "Traceback" not in stderr and "reconnect" in stderr.lower(), stderr
    assert time.monotonic() - began < 60
    server.start()
    Writer(server, 100, 0.5, seed=2, first_id=10_000).run()
    again = router(server.url, out, position, "--until", "caught-up")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err.decode()
    ledger = count(committed(server.binlog_files(), "faults", start), out, "faults")
    assert ledger.exactly_once, ledger
