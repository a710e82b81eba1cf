"""Where a batch's landing time goes: seconds per stage, for the benchmark and debug logs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class StageClock:
    """Adds up the seconds spent in named stages (``with clock("mirror merge"): ...``);
    stages timed on several threads at once add up to more than the time that passed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - began
            with self._lock:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + spent

    def take(self) -> dict[str, float]:
        """The seconds so far, and a fresh start."""
        with self._lock:
            seconds, self.seconds = self.seconds, {}
        return seconds
