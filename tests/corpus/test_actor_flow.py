"""The actors' flow on a real binlog: bounded without blocking inside a handler. A slow sink
holds the Transaction actor to its credits (the Sink actor acknowledges each message), the
actor holds the listener back by keeping its credits, the decode workers' answers arrive as
messages, and the records are the same as with a fast sink."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.model.changes import Batch
from changestream.model.errors import SinkError
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.callback import CallbackSink
from changestream.sinks.jsonl import JsonLinesSink
from tests.corpus.reference import CORPUS

BIG = CORPUS / "osheroff/mysql-bin.sakila.gz"  # 47,310 changes
PLAIN = CORPUS / "rust_mysql_common/mariadb-bin.000001"  # transactions for decode workers


def _changes(binlog: Path, workers: int, pause: float,
             depths: list[dict[str, int]] | None = None) -> tuple[list[tuple[Any, ...]], Router]:
    got: list[tuple[Any, ...]] = []
    router: Router

    def write(batch: Batch) -> None:
        if depths is not None:
            depths.append(router.queue_depths())
        time.sleep(pause)
        got.extend((c.op, c.table, c.seq, c.transaction.id if c.transaction else None)
                   for c in batch.iter_changes())

    router = Router(RouterSettings(source=f"file://{binlog}", until="caught-up",
                                   decode_workers=workers,
                                   decode_workers_wait=True, message_changes=100,
                                   batch=BatchSettings(max_changes=300)), CallbackSink(write))
    router.run()
    return got, router


def test_a_slow_sink_bounds_what_is_in_flight_and_loses_nothing() -> None:
    depths: list[dict[str, int]] = []
    slow, _ = _changes(BIG, 0, 0.002, depths)
    assert slow == _changes(BIG, 0, 0.0)[0]
    assert len(slow) == 47_310 and len(depths) > 100
    # Full, never over: the reader was held back rather than queues growing.
    assert max(d["transaction_to_sink"] for d in depths) == 4
    assert max(d["listener_to_transaction"] for d in depths) <= 4


class _SlowLines(JsonLinesSink):
    def write(self, batch: Batch) -> None:
        time.sleep(0.01)
        super().write(batch)


def test_decode_workers_answers_come_as_messages_in_order(tmp_path: Path) -> None:
    def route(workers: int, sink: JsonLinesSink) -> tuple[list[dict[str, Any]], Router]:
        router = Router(RouterSettings(source=f"file://{PLAIN}", until="caught-up",
                                       decode_workers=workers,
                                       decode_workers_wait=True, message_changes=2,
                                       batch=BatchSettings(max_changes=2)), sink)
        router.run()
        assert sink.path is not None
        records = [orjson.loads(line) for line in sink.path.read_bytes().splitlines()]
        return [{k: v for k, v in r.items() if k != "ts"} for r in records], router

    slow, router = route(2, _SlowLines(tmp_path / "slow.jsonl", fsync=False))
    assert router.stats.reading.worker_segments >= 1
    assert slow == route(0, JsonLinesSink(tmp_path / "alone.jsonl", fsync=False))[0]


def test_a_failing_sink_stops_the_router_with_its_error(tmp_path: Path) -> None:
    def fail(batch: Batch) -> None:
        raise OSError("disk gone")

    router = Router(RouterSettings(source=f"file://{PLAIN}", until="caught-up",
                                   batch=BatchSettings(retries=1, retry_backoff_seconds=0.01)),
                    CallbackSink(fail))
    began = time.monotonic()
    with pytest.raises(SinkError, match=r"failed 2 times.*disk gone"):
        router.run()
    assert time.monotonic() - began < 30

