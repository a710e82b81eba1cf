"""Where a batch's landing time goes: seconds per stage, for the benchmark and debug logs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StageClock:
    """Adds up the seconds spent in named stages (``with clock("mirror merge"): ...``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - began

    def take(self) -> dict[str, float]:
        """The seconds so far, and a fresh start."""
        seconds, self.seconds = self.seconds, {}
        return seconds
