"""Following binlog files as the server writes them: ``FileSource(..., follow=True)`` sees
new transactions arrive, crosses a ROTATE into the next file, and ``stop()`` ends it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from changestream.decoding.events import Event
from changestream.sources.files import FileSource
from tests.workloads import inserted_ids

pytestmark = pytest.mark.integration


@contextmanager
def _following(source: FileSource) -> Iterator[list[Event]]:
    """Run ``source`` in a thread; on exit stop it and check it ended cleanly and quickly."""
    seen: list[Event] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            seen.extend(source)  # list.extend appends one by one: visible while it runs
        except BaseException as exc:  # reported below
            failure.append(exc)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    try:
        yield seen
    finally:
        source.stop()
        reader.join(5)
    assert not reader.is_alive(), "stop() did not end a following file source"
    assert not failure, failure


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def table(server: Any, fresh_database: str) -> str:
    server.execute(f"CREATE TABLE `{fresh_database}`.t (id INT PRIMARY KEY)")
    return fresh_database


def _current_file(server: Any) -> tuple[Path, int]:
    name, pos = server.binlog_position()
    (path,) = [p for p in server.binlog_files() if p.name == name]
    return path, pos


def test_following_a_file_sees_new_transactions_and_stops(server: Any, table: str) -> None:
    path, pos = _current_file(server)
    source = FileSource([path], start_pos=pos, follow=True)
    with _following(source) as seen:
        for i in (1, 2, 3):
            server.execute(f"INSERT INTO `{table}`.t VALUES ({i})")
            assert _wait_for(lambda i=i: inserted_ids(list(seen), table)[-1:] == [i]), (
                f"row {i} did not arrive")
    assert inserted_ids(seen, table) == [1, 2, 3]
    assert {e.header.file for e in seen} == {str(path)}


def test_following_crosses_rotate_into_the_next_file(server: Any, table: str) -> None:
    path, pos = _current_file(server)
    source = FileSource([path], start_pos=pos, follow=True)  # one file named, not the folder
    with _following(source) as seen:
        server.execute(f"INSERT INTO `{table}`.t VALUES (1)")
        server.execute("FLUSH BINARY LOGS")
        server.execute(f"INSERT INTO `{table}`.t VALUES (2)")
        server.execute("FLUSH BINARY LOGS")
        server.execute(f"INSERT INTO `{table}`.t VALUES (3)")
        assert _wait_for(lambda: inserted_ids(list(seen), table) == [1, 2, 3]), (
            inserted_ids(list(seen), table))
    files = server.binlog_files()
    expected = [str(p) for p in files[files.index(path):]]
    assert list(dict.fromkeys(e.header.file for e in seen)) == expected


def test_following_a_directory_goes_on_after_the_start_file(server: Any, table: str) -> None:
    server.execute("FLUSH BINARY LOGS")  # so that older files precede the start file
    path, pos = _current_file(server)
    source = FileSource([server.binlog_dir], start_file=path.name, start_pos=pos, follow=True)
    with _following(source) as seen:
        server.execute(f"INSERT INTO `{table}`.t VALUES (1)")
        server.execute("FLUSH BINARY LOGS")
        server.execute(f"INSERT INTO `{table}`.t VALUES (2)")
        assert _wait_for(lambda: inserted_ids(list(seen), table) == [1, 2]), (
            inserted_ids(list(seen), table))
    names = [Path(e.header.file or "").name for e in seen]
    files = [p.name for p in server.binlog_files()]
    assert list(dict.fromkeys(names)) == files[files.index(path.name):]
