"""The Iceberg landing's commit queue: files written on threads of their own, commits made in
order on another, waited for per table and before a batch's mark; after a failure nothing
given later is made, and the error raised is the one that happened."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from changestream.sinks.spark.iceberg.commit_queue import CommitQueue, StagedCommit


def staged(write: Any = None, commit: Any = None) -> StagedCommit[Any]:
    return StagedCommit(write or (lambda: None), commit or (lambda written: written))


def test_commits_are_made_in_the_order_given_whichever_files_are_written_first() -> None:
    queue = CommitQueue(writers=2)
    made: list[tuple[str, str]] = []
    written: list[str] = []

    def write(table: str, pause: float) -> Any:
        def step() -> str:
            time.sleep(pause)  # the first table's files take longest
            written.append(table)
            return table
        return step

    def commit(written_table: str) -> None:
        made.append((written_table, threading.current_thread().name))

    queue.submit("a", staged(write("a", 0.2), commit))
    queue.submit("b", staged(write("b", 0.0), commit))
    queue.submit("a", staged(write("a2", 0.0), commit))
    queue.drain()
    assert written[-1] == "a"  # b's files were written while a's were
    assert [t for t, _ in made] == ["a", "b", "a2"]
    assert all(name.startswith("changestream-commits") for _, name in made)
    queue.close()


def test_files_of_two_commits_are_written_at_once() -> None:
    queue = CommitQueue(writers=2)
    both = threading.Barrier(2, timeout=5)  # each write waits for the other to start
    queue.submit("a", staged(both.wait))
    queue.submit("b", staged(both.wait))
    queue.drain()
    queue.close()


def test_waiting_for_a_table_waits_for_its_last_commit_and_runs_what_follows_it() -> None:
    queue = CommitQueue()
    release = threading.Event()
    results: list[int] = []
    queue.submit("a", staged(commit=lambda _: 1), results.append)
    queue.submit("b", staged(commit=lambda _: release.wait(5) and 2), results.append)
    queue.wait_for("a")
    assert results == [1]  # b's commit is still under way: not waited for
    assert queue.pending("b") and not queue.pending("a")
    release.set()
    queue.wait_for("b")
    assert results == [1, 2]
    queue.close()


def test_after_a_failed_commit_none_given_later_is_made_and_its_error_is_raised() -> None:
    queue = CommitQueue()
    made: list[str] = []

    def fail(_: Any) -> None:
        raise RuntimeError("commit state unknown")

    queue.submit("a", staged(commit=lambda _: made.append("a")))
    queue.submit("b", staged(commit=fail))
    queue.submit("a", staged(commit=lambda _: made.append("a again")))
    queue.submit("c", staged(commit=lambda _: made.append("c")))
    with pytest.raises(RuntimeError, match="commit state unknown"):
        queue.drain()
    assert made == ["a"]
    assert not queue.pending("a") and not queue.pending("c")
    # The retry of the batch gets a queue that makes commits again.
    queue.submit("a", staged(commit=lambda _: made.append("retried")))
    queue.drain()
    assert made == ["a", "retried"]
    queue.close()


def test_a_failed_write_is_the_error_raised_even_where_an_earlier_commit_is_skipped() -> None:
    queue = CommitQueue(writers=2)
    made: list[str] = []
    release = threading.Event()

    def disk_full() -> None:
        raise OSError(28, "No space left on device")

    # a's files take a while; b's fail meanwhile, before a's commit begins: a is not made
    # either, and the error raised (waiting for a) is b's, not a skip.
    queue.submit("a", staged(lambda: release.wait(5), lambda _: made.append("a")))
    queue.submit("b", staged(disk_full, lambda _: made.append("b")))
    time.sleep(0.2)
    release.set()
    with pytest.raises(OSError, match="No space left"):
        queue.wait_for("a")
    assert made == []
    assert not queue.pending("b")
    queue.close()


def test_a_failure_in_what_follows_a_commit_stops_the_rest_too() -> None:
    queue = CommitQueue()
    made: list[str] = []
    started = threading.Event()
    release = threading.Event()

    def slow(_: Any) -> None:
        started.set()
        release.wait(5)
        made.append("b")

    def refuse(_: object) -> None:
        raise ValueError("index behind the table")

    queue.submit("a", staged(commit=lambda _: "done"), refuse)
    queue.submit("b", staged(commit=slow))
    queue.submit("c", staged(commit=lambda _: made.append("c")))
    started.wait(5)
    threading.Timer(0.3, release.set).start()  # b ends while the error is handled
    with pytest.raises(ValueError, match="index behind"):
        queue.wait_for("a")
    # b was under way and is waited for before the error is raised; c is not made.
    assert made == ["b"]
    assert not queue.pending("c")
    queue.close()


def test_discard_waits_for_the_commit_under_way_and_returns_the_first_error() -> None:
    queue = CommitQueue()
    made: list[str] = []
    started = threading.Event()

    def slow(_: Any) -> None:
        started.set()
        time.sleep(0.3)
        made.append("slow")

    def fail(_: Any) -> None:
        raise RuntimeError("lost")

    queue.submit("a", staged(commit=slow))
    queue.submit("b", staged(commit=fail))
    queue.submit("c", staged(commit=lambda _: made.append("c")))
    started.wait(5)
    assert queue.discard() is None  # b is skipped, not failed
    assert made == ["slow"]  # waited for; c not made after the discard began
    assert not queue.pending("c")
    queue.submit("d", staged(commit=lambda _: made.append("d")))
    queue.drain()
    assert made == ["slow", "d"]
    queue.close()


def test_two_tables_commits_are_made_at_once_in_two_lanes() -> None:
    queue = CommitQueue(lanes=2)
    both = threading.Barrier(2, timeout=5)  # each commit waits for the other to start
    lanes: dict[str, str] = {}

    def commit(table: str) -> Any:
        def step(_: Any) -> None:
            both.wait()
            lanes[table] = threading.current_thread().name
        return step

    queue.submit("changelog", staged(commit=commit("changelog")))
    queue.submit("mirror", staged(commit=commit("mirror")))
    queue.drain()
    assert lanes["changelog"] != lanes["mirror"]
    queue.close()


def test_a_table_s_commits_stay_in_its_lane_and_order_while_one_is_under_way() -> None:
    queue = CommitQueue(lanes=2)
    made: list[str] = []
    release = threading.Event()
    results: list[str] = []
    def commit(name: str, wait: bool = False) -> Any:
        def step(_: Any) -> str:
            if wait:
                release.wait(5)
            made.append(name)
            return name
        return step

    queue.submit("a", staged(commit=commit("a1", wait=True)), results.append)
    queue.submit("b", staged(commit=commit("b")), results.append)
    queue.submit("a", staged(commit=commit("a2")), results.append)
    time.sleep(0.2)
    assert made == ["b"]  # the other lane was free; a's second commit waits for its first
    release.set()
    queue.drain()
    assert made == ["b", "a1", "a2"]
    assert results == ["a1", "b", "a2"]  # what follows each commit: in the order given
    queue.close()


def test_after_a_failed_commit_no_lane_begins_another() -> None:
    queue = CommitQueue(lanes=2)
    made: list[str] = []
    failing = threading.Event()

    def fail(_: Any) -> None:
        failing.set()
        raise RuntimeError("commit state unknown")

    queue.submit("a", staged(commit=fail))
    # b's files are written once a's commit failed: its commit, in the other lane, is not
    # begun after that
    queue.submit("b", staged(lambda: failing.wait(5), lambda _: made.append("b")))
    queue.submit("a", staged(commit=lambda _: made.append("a again")))
    with pytest.raises(RuntimeError, match="commit state unknown"):
        queue.drain()
    assert made == []
    queue.close()
