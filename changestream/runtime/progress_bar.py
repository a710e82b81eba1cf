"""A snapshot's progress on a terminal: one line on stderr, redrawn twice a second while a
snapshot runs (only when stderr is a terminal; logs and `/status` say the same otherwise)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

WIDTH = 30


def render(snapshot: dict[str, Any]) -> str:
    """One line for the snapshot part of ``/status``."""
    estimated = max(int(snapshot.get("rows_estimated") or 0), int(snapshot.get("rows") or 0))
    rows = int(snapshot.get("rows") or 0)
    share = 1.0 if snapshot.get("finished") else (rows / estimated if estimated else 0.0)
    filled = int(share * WIDTH)
    bar = "#" * filled + "." * (WIDTH - filled)
    table = snapshot.get("current_table") or ""
    return (f"snapshot [{bar}] {share:4.0%}  tables {snapshot.get('tables_done', 0)}/"
            f"{snapshot.get('tables_total', 0)}  rows {rows:,}/~{estimated:,}"
            f"{'  ' + table if table else ''}")


class ProgressBar:
    """Draws :func:`render` of ``status()["snapshot"]`` on ``stream`` until stopped."""

    def __init__(self, status: Callable[[], dict[str, Any]], stream: TextIO | None = None,
                 interval: float = 0.5):
        self.status = status
        self.stream = stream or sys.stderr
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="changestream-progress",
                                        daemon=True)
        self._width = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            snapshot = self.status().get("snapshot")
            if not snapshot:
                continue
            self._draw(render(snapshot))
            if snapshot.get("finished"):
                self.stream.write("\n")
                self.stream.flush()
                return

    def _draw(self, line: str) -> None:
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)
