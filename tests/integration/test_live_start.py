"""Where a live source starts: a GTID set (MySQL), a GTID state (MariaDB), ``latest``, and
``FILE:POS``. Each time a first batch of transactions is written before the start point and a
second batch after it; exactly the second batch must arrive."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from changestream.cli.scan import scan_transactions
from changestream.decoding import event_types as et
from changestream.decoding.events import Event
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource, StartPosition
from tests.workloads import inserted_ids

pytestmark = pytest.mark.integration

BEFORE = (1, 2, 3)
AFTER = (4, 5, 6)


def _connection(server: Any) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": server.port, "user": "root", "password": ""}


def _write(server: Any, db: str, ids: tuple[int, ...]) -> None:
    """One transaction per id, the last one with two statements."""
    for i in ids[:-1]:
        server.execute(f"INSERT INTO `{db}`.t VALUES ({i})")
    server.execute(["BEGIN", f"INSERT INTO `{db}`.t VALUES ({ids[-1]})",
                    f"UPDATE `{db}`.t SET id = id WHERE id = {ids[-1]}", "COMMIT"])


def _gtids(events: list[Event]) -> list[str]:
    return [t.gtid for t in scan_transactions(events, on_warning=lambda m: None) if t.gtid]


def _gtids_in_files_after(server: Any, position: tuple[str, int]) -> list[str]:
    return _gtids(list(FileSource(server.binlog_files(), start_file=position[0],
                                  start_pos=position[1])))


@pytest.fixture
def table(server: Any, fresh_database: str) -> str:
    server.execute(f"CREATE TABLE `{fresh_database}`.t (id INT PRIMARY KEY)")
    return fresh_database


def _read_to_end(server: Any, start: str) -> list[Event]:
    return list(LiveSource(_connection(server), StartPosition.parse(start), blocking=False))


@pytest.mark.parametrize("server", ["mysql"], indirect=True)
def test_from_mysql_gtid_set_only_later_transactions_arrive(server: Any, table: str) -> None:
    _write(server, table, BEFORE)
    executed = server.execute("SELECT @@global.gtid_executed")[0][0]
    after = server.binlog_position()
    _write(server, table, AFTER)
    events = _read_to_end(server, f"gtid:{executed}")
    assert inserted_ids(events, table) == list(AFTER)
    assert _gtids(events) == _gtids_in_files_after(server, after)
    assert len(_gtids(events)) == len(AFTER)


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)
def test_from_mariadb_gtid_state_only_later_transactions_arrive(server: Any, table: str) -> None:
    _write(server, table, BEFORE)
    state = server.execute("SELECT @@global.gtid_binlog_pos")[0][0]
    after = server.binlog_position()
    _write(server, table, AFTER)
    events = _read_to_end(server, f"gtid:{state}")
    assert inserted_ids(events, table) == list(AFTER)
    assert _gtids(events) == _gtids_in_files_after(server, after)
    assert len(_gtids(events)) == len(AFTER)


def test_from_file_and_position_only_later_transactions_arrive(server: Any, table: str) -> None:
    _write(server, table, BEFORE)
    file, pos = server.binlog_position()
    _write(server, table, AFTER)
    events = _read_to_end(server, f"{file}:{pos}")
    assert inserted_ids(events, table) == list(AFTER)
    assert _gtids(events) == _gtids_in_files_after(server, (file, pos))
    first = next(e for e in events if not e.header.artificial
                 and e.header.type_code != et.FORMAT_DESCRIPTION)  # the server sends it first
    assert (first.header.file, first.header.offset) == (file, pos)


def test_from_latest_nothing_older_arrives_and_new_writes_do(server: Any, table: str) -> None:
    _write(server, table, BEFORE)
    # No heartbeat during the test: stop() alone must wake the blocked read.
    source = LiveSource(_connection(server), StartPosition.parse("latest"), blocking=True,
                        heartbeat_seconds=30.0)
    seen: list[Event] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            for event in source:
                seen.append(event)
        except BaseException as exc:  # reported by the test below
            failure.append(exc)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    deadline = time.monotonic() + 10
    while source.file is None and reader.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)  # until the start position is resolved and the dump requested
    assert source.file is not None, failure
    _write(server, table, AFTER)
    while inserted_ids(list(seen), table) != list(AFTER) and time.monotonic() < deadline:
        time.sleep(0.05)
    stopped = time.monotonic()
    source.stop()
    reader.join(5)
    assert not reader.is_alive(), "stop() did not end a blocked live source"
    assert time.monotonic() - stopped < 2.0
    assert not failure, failure
    assert inserted_ids(seen, table) == list(AFTER)
    assert len(_gtids(seen)) == len(AFTER)


@pytest.mark.parametrize(("server", "foreign"), [
    ("mariadb", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"), ("mysql", "0-1-5")],
    indirect=["server"])
def test_a_gtid_set_of_the_other_flavour_is_refused_by_name(server: Any, foreign: str) -> None:
    """A position saved from another server's stream (two jobs sharing a position): one
    line naming the set and both flavours, not the server's bare parse error."""
    from changestream.model.errors import SourceError

    with pytest.raises(SourceError) as caught:
        _read_to_end(server, f"gtid:{foreign}")
    message = str(caught.value)
    assert foreign in message and "another server's stream" in message
    assert ("MySQL's form and the server is MariaDB" if server.flavor == "mariadb"
            else "MariaDB's form and the server is MySQL") in message
