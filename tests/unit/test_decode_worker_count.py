"""How many decode workers the router starts for a sink: one per CPU, less the CPUs the
sink keeps for its own writing (``writer_cpus``), at least one, on one CPU too (where a
worker's compiled walk beats the router's general path)."""

from __future__ import annotations

from typing import Any

import pytest

from changestream.delivery.adapter import SinkCapabilities
from changestream.runtime import settings as settings_module
from changestream.runtime.settings import RouterSettings, decode_workers_for


class _Sink:
    def __init__(self, writer_cpus: int | None = None) -> None:
        self.capabilities = SinkCapabilities(encoded_format="changestream",
                                             writer_cpus=writer_cpus or 0)


@pytest.mark.parametrize(("cpus", "asked", "writer_cpus", "started"), [
    (2, -1, None, 2), (2, -1, 1, 1), (8, -1, 1, 7), (2, -1, 4, 1), (1, -1, 1, 1),
    (1, -1, None, 1), (2, 2, 1, 2), (4, 0, 1, None)])
def test_the_sink_s_writer_cpus_are_left_to_it(monkeypatch: pytest.MonkeyPatch, cpus: int,
                                               asked: int, writer_cpus: int | None,
                                               started: int | None) -> None:
    counts: list[int] = []

    def workers(count: int, *args: Any, **kwargs: Any) -> Any:
        counts.append(count)
        return object()

    monkeypatch.setattr(settings_module, "usable_cpus", lambda: cpus)
    monkeypatch.setattr(settings_module, "DecodeWorkers", workers)
    made = decode_workers_for(RouterSettings(source="file:///x", decode_workers=asked),
                              _Sink(writer_cpus))
    assert (made is None) == (started is None)
    assert counts == ([] if started is None else [started])
