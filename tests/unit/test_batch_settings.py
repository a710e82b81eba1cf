"""Micro-batch size: as configured, else the sink adapter's own, else 10,000 changes (and
16 MB)."""

from __future__ import annotations

from typing import Any

import pytest

from changestream.actors.batch_settings import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_CHANGES,
    BatchSettings,
)
from changestream.delivery.adapter import SinkCapabilities
from changestream.model.errors import ConfigError
from changestream.sinks.jsonl import JsonLinesSink


class _Adapter:
    def __init__(self, batch_changes: Any = None, batch_bytes: Any = None):
        if batch_changes is not None or batch_bytes is not None:
            self.capabilities = SinkCapabilities(batch_changes=batch_changes,
                                                 batch_bytes=batch_bytes)


def test_the_configured_size_wins() -> None:
    assert BatchSettings(max_changes=7).for_sink(_Adapter(100_000)).max_changes == 7


def test_the_adapter_says_its_size_when_none_is_configured() -> None:
    settings = BatchSettings(max_seconds=2.5).for_sink(_Adapter(100_000))
    assert settings.max_changes == 100_000 and settings.max_seconds == 2.5


def test_the_byte_limit_is_the_configured_one_else_the_adapters() -> None:
    assert BatchSettings(max_bytes=1000).for_sink(_Adapter(None, 5 << 20)).max_bytes == 1000
    settings = BatchSettings(max_changes=7).for_sink(_Adapter(100_000, 5 << 20))
    assert (settings.max_changes, settings.max_bytes) == (7, 5 << 20)
    assert BatchSettings().for_sink(_Adapter(100_000)).max_bytes == DEFAULT_BATCH_BYTES


def test_otherwise_the_default() -> None:
    assert BatchSettings().for_sink(_Adapter()).max_changes == DEFAULT_BATCH_CHANGES == 10_000
    assert BatchSettings().for_sink(_Adapter()).max_bytes == DEFAULT_BATCH_BYTES == 16 << 20
    assert BatchSettings().for_sink(JsonLinesSink("/dev/null")).max_changes == 10_000
    for nonsense in (0, -5, "many", 2.5):
        with pytest.raises(ConfigError, match="batch_changes"):
            _Adapter(nonsense)
        with pytest.raises(ConfigError, match="batch_bytes"):
            _Adapter(None, nonsense)


def test_capabilities_that_are_not_declared_as_such_are_refused() -> None:
    adapter = _Adapter()
    adapter.capabilities = {"batch_changes": 5}  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="SinkCapabilities"):
        BatchSettings().for_sink(adapter)


def test_the_spark_sink_asks_for_bigger_batches() -> None:
    pytest.importorskip("pyarrow", reason="the spark extra is not installed")
    from changestream.sinks.spark import SparkSink

    sink = SparkSink("parquet", path="/tmp/nowhere")
    settings = BatchSettings().for_sink(sink)
    assert (settings.max_changes, settings.max_bytes) == (250_000, 64 << 20)
