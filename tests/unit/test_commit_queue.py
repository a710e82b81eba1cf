"""The Iceberg landing's commit queue: commits made in order on their own thread, waited for
per table and before a batch's mark; after a failure nothing given later is made."""

from __future__ import annotations

import threading
import time

import pytest

from changestream.sinks.spark.iceberg.commit_queue import CommitQueue


def test_commits_are_made_in_the_order_given_on_another_thread() -> None:
    queue = CommitQueue()
    made: list[tuple[str, str]] = []

    def commit(table: str, pause: float) -> None:
        time.sleep(pause)  # a slow first commit may not be overtaken
        made.append((table, threading.current_thread().name))

    queue.submit("a", lambda: commit("a", 0.05))
    queue.submit("b", lambda: commit("b", 0.0))
    queue.submit("a", lambda: commit("a2", 0.0))
    queue.drain()
    assert [t for t, _ in made] == ["a", "b", "a2"]
    assert all(name.startswith("changestream-commits") for _, name in made)
    queue.close()


def test_waiting_for_a_table_waits_for_its_last_commit_and_runs_what_follows_it() -> None:
    queue = CommitQueue()
    release = threading.Event()
    results: list[int] = []
    queue.submit("a", lambda: 1, results.append)
    queue.submit("b", lambda: release.wait(5) and 2, results.append)
    queue.wait_for("a")
    assert results == [1]  # b's commit is still under way: not waited for
    assert queue.pending("b") and not queue.pending("a")
    release.set()
    queue.wait_for("b")
    assert results == [1, 2]
    queue.close()


def test_after_a_failed_commit_none_given_later_is_made_and_the_first_error_is_raised() -> None:
    queue = CommitQueue()
    made: list[str] = []

    def fail() -> None:
        raise RuntimeError("commit state unknown")

    queue.submit("a", lambda: made.append("a"))
    queue.submit("b", fail)
    queue.submit("a", lambda: made.append("a again"))
    queue.submit("c", lambda: made.append("c"))
    with pytest.raises(RuntimeError, match="commit state unknown"):
        queue.drain()
    assert made == ["a"]
    assert not queue.pending("a") and not queue.pending("c")
    # The retry of the batch gets a queue that makes commits again.
    queue.submit("a", lambda: made.append("retried"))
    queue.drain()
    assert made == ["a", "retried"]
    queue.close()


def test_a_failure_in_what_follows_a_commit_stops_the_rest_too() -> None:
    queue = CommitQueue()
    made: list[str] = []
    started = threading.Event()
    release = threading.Event()

    def slow() -> None:
        started.set()
        release.wait(5)
        made.append("b")

    def refuse(_: object) -> None:
        raise ValueError("index behind the table")

    queue.submit("a", lambda: "done", refuse)
    queue.submit("b", slow)
    queue.submit("c", lambda: made.append("c"))
    started.wait(5)
    threading.Timer(0.3, release.set).start()  # b ends while the error is handled
    with pytest.raises(ValueError, match="index behind"):
        queue.wait_for("a")
    # b was under way and is waited for before the error is raised; c is not made.
    assert made == ["b"]
    assert not queue.pending("c")
    queue.close()


def test_discard_waits_for_the_commit_under_way_and_forgets_errors() -> None:
    queue = CommitQueue()
    made: list[str] = []
    started = threading.Event()

    def slow() -> None:
        started.set()
        time.sleep(0.3)
        made.append("slow")

    def fail() -> None:
        raise RuntimeError("lost")

    queue.submit("a", slow)
    queue.submit("b", fail)
    queue.submit("c", lambda: made.append("c"))
    started.wait(5)
    queue.discard()
    assert made == ["slow"]  # waited for; c not made after the discard began
    assert not queue.pending("c")
    queue.submit("d", lambda: made.append("d"))
    queue.drain()
    assert made == ["slow", "d"]
    queue.close()
