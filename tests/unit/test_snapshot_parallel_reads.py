"""Parallel chunk reads: ranges cut by a boundary finder, read by several readers whose
answers come back out of order, handed on in key order."""

from __future__ import annotations

import itertools
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from changestream.snapshot.chunks import ChunkQuery, upto_condition
from changestream.snapshot.parallel_reads import OrderedRanges, ReaderPool


def test_a_range_chunk_has_both_bounds_and_no_limit() -> None:
    q = ChunkQuery("shop", "orders", ("id", "qty"), ("id",), 1000)
    assert q.select((41,), (1041,)) == (
        "SELECT `id`, `qty` FROM `shop`.`orders` WHERE `id` > %s AND `id` <= %s "
        "ORDER BY `id`", (41, 1041))
    assert q.select(None, (1000,)) == (
        "SELECT `id`, `qty` FROM `shop`.`orders` WHERE `id` <= %s ORDER BY `id`", (1000,))


def test_the_boundary_is_the_limit_th_key_after_the_last_one() -> None:
    q = ChunkQuery("shop", "orders", ("id", "qty"), ("id",), 1000, where="qty % 2 = 0")
    assert q.boundary((41,)) == (
        "SELECT `id` FROM `shop`.`orders` WHERE (qty %% 2 = 0) AND `id` > %s "
        "ORDER BY `id` LIMIT 1 OFFSET 999", (41,))
    assert q.boundary(None)[0] == ("SELECT `id` FROM `shop`.`orders` WHERE (qty %% 2 = 0) "
                                   "ORDER BY `id` LIMIT 1 OFFSET 999")


def test_a_composite_upper_bound_includes_the_key_itself() -> None:
    sql, args = upto_condition(("a", "b"), (1, "x"))
    assert sql == "(`a` < %s OR (`a` = %s AND `b` <= %s))"
    assert args == (1, 1, "x")


@dataclass
class _Chunk:
    keys: list[int]
    last_key: tuple[Any, ...] | None
    done: bool


class _Table:
    """A sorted table of integer keys with a boundary finder and a chunk reader, whose
    reads take random times (so that readers finish out of order)."""

    def __init__(self, keys: list[int], limit: int):
        self.keys = sorted(keys)
        self.limit = limit
        self.readers: set[int] = set()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0

    def boundary(self, after: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        rest = [k for k in self.keys if after is None or k > after[0]]
        return (rest[self.limit - 1],) if len(rest) >= self.limit else None

    def read(self, reader: int, after: tuple[Any, ...] | None,
             upto: tuple[Any, ...] | None) -> _Chunk:
        with self.lock:
            self.readers.add(reader)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(random.uniform(0, 0.01))
        with self.lock:
            self.in_flight -= 1
        rows = [k for k in self.keys
                if (after is None or k > after[0]) and (upto is None or k <= upto[0])]
        if upto is not None:
            return _Chunk(rows, upto, False)
        rows = rows[:self.limit]
        return _Chunk(rows, (rows[-1],) if rows else after, len(rows) < self.limit)


def _pool(size: int) -> ReaderPool[int]:
    numbers = iter(range(100))
    lock = threading.Lock()

    def make() -> int:
        with lock:
            return next(numbers)

    return ReaderPool(make, lambda reader: None, size)


def _read_all(table: _Table, pool: ReaderPool[int], after: tuple[Any, ...] | None = None
              ) -> list[tuple[list[int], tuple[Any, ...] | None]]:
    ranges = OrderedRanges(pool, after, table.boundary, table.read,
                           lambda c: c.last_key, lambda c: c.done)
    chunks = []
    while True:
        chunk, starts_after = ranges.next()
        chunks.append((chunk.keys, starts_after))
        if chunk.done:
            return chunks


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_chunks_come_back_in_key_order_each_row_once(size: int) -> None:
    random.seed(size)
    table = _Table(random.sample(range(10_000), 1_003), limit=50)
    pool = _pool(size)
    try:
        chunks = _read_all(table, pool)
    finally:
        pool.close()
    keys = [k for rows, _ in chunks for k in rows]
    assert keys == table.keys  # in order, each once: a reorder bug would shuffle them
    # Each chunk starts after the last key of the one before (the progress saved).
    for (rows, _), (_, starts_after) in itertools.pairwise(chunks):
        assert starts_after == (rows[-1],)
    assert all(len(rows) <= 50 for rows, _ in chunks)
    assert table.most_in_flight <= size
    if size > 1:
        assert len(table.readers) > 1


def test_a_resumed_table_starts_after_the_key_saved() -> None:
    table = _Table(list(range(1, 501)), limit=40)
    pool = _pool(3)
    try:
        chunks = _read_all(table, pool, after=(123,))
    finally:
        pool.close()
    assert [k for rows, _ in chunks for k in rows] == list(range(124, 501))
    assert chunks[0][1] == (123,)


def test_a_last_chunk_that_comes_back_full_goes_on() -> None:
    """Rows added past the last boundary after it was found: the open last chunk is full
    and the reading goes on after its last key."""
    table = _Table(list(range(1, 101)), limit=30)
    found = table.boundary

    def boundary(after: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        upto = found(after)
        if upto is None and table.keys[-1] < 200:
            table.keys += list(range(101, 201))  # inserted as the last chunk is read
        return upto

    table.boundary = boundary  # type: ignore[method-assign]
    pool = _pool(2)
    try:
        chunks = _read_all(table, pool)
    finally:
        pool.close()
    assert [k for rows, _ in chunks for k in rows] == list(range(1, 201))


def test_a_reader_error_reaches_the_caller_and_drain_waits_for_the_rest() -> None:
    table = _Table(list(range(1, 301)), limit=10)
    read = table.read

    def failing(reader: int, after: tuple[Any, ...] | None,
                upto: tuple[Any, ...] | None) -> _Chunk:
        if after == (50,):
            raise RuntimeError("connection lost")
        return read(reader, after, upto)

    pool = _pool(3)
    ranges = OrderedRanges(pool, None, table.boundary, failing,
                           lambda c: c.last_key, lambda c: c.done)
    try:
        with pytest.raises(RuntimeError, match="connection lost"):
            for _ in range(10):
                ranges.next()
        ranges.drain()
        assert table.in_flight == 0
    finally:
        pool.close()
