"""The whole machine's CPU time over a stretch of a bench: every process counts (decode
workers, the JVM, the database server), so a ratio of two runs' CPU-seconds says how much
more work one did than the other, whatever ran where."""

from __future__ import annotations

import os
import time
from types import TracebackType

_TICKS = os.sysconf("SC_CLK_TCK")


def busy_seconds() -> float:
    """CPU-seconds all CPUs have spent not idle (nor waiting on I/O) since boot."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICKS


class MachineCpu:
    """A context manager: ``cpu_seconds`` (the machine's busy CPU-seconds), ``seconds``
    (wall) and ``share`` (busy over what the CPUs could have done) of its block."""

    def __init__(self) -> None:
        self.cpu_seconds = 0.0
        self.seconds = 0.0

    def __enter__(self) -> MachineCpu:
        self._busy = busy_seconds()
        self._began = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.seconds = time.perf_counter() - self._began
        self.cpu_seconds = busy_seconds() - self._busy

    @property
    def share(self) -> float:
        """Busy CPU-seconds over wall seconds times the machine's CPUs."""
        return self.cpu_seconds / max(self.seconds * (os.cpu_count() or 1), 1e-9)
