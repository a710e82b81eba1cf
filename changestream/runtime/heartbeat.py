"""The heartbeat statement: SQL the router runs on the source every so often while it
reads a live server (as Debezium's ``heartbeat.action.query``), so that a server whose
included tables are quiet still writes transactions and the saved position moves on
(see docs/operations.md, "Quiet tables and purged binlogs")."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from changestream.model.errors import ConfigError

if TYPE_CHECKING:
    from changestream.runtime.config import Config

log = logging.getLogger("changestream")


@dataclass(slots=True, frozen=True)
class HeartbeatSettings:
    """``statement``: the SQL to run (""; off); ``interval_seconds``: how often."""

    statement: str = ""
    interval_seconds: float = 60.0

    def __post_init__(self) -> None:
        if not self.interval_seconds > 0:  # also NaN
            raise ConfigError("heartbeat.interval_seconds: must be positive, got "
                              f"{self.interval_seconds}")
        if self.statement and not self.statement.strip():
            raise ConfigError("heartbeat.statement: is blank (leave it empty to turn the "
                              "heartbeat statement off)")

    @property
    def enabled(self) -> bool:
        return bool(self.statement)

    @classmethod
    def from_config(cls, config: Config) -> HeartbeatSettings:
        """The ``[heartbeat]`` section of a loaded configuration."""
        return cls(config.heartbeat.statement, config.heartbeat.interval_seconds)


class HeartbeatStatement:
    """Runs the statement every ``interval_seconds`` on a connection of its own, in a
    thread, until :meth:`stop`. A failure is one warning line (the statement and the
    server's error), repeated only when the error changes; the next run connects again."""

    def __init__(self, settings: HeartbeatSettings, connect: Callable[[], Any]):
        self.settings = settings
        self.connect = connect
        self.runs = 0  # statements that succeeded
        self._stopping = threading.Event()
        self._connection: Any = None
        self._last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="changestream-heartbeat",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop; a statement still running (waiting for a lock) is left to its thread."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        try:
            while not self._stopping.wait(self.settings.interval_seconds):
                self.run_once()
        finally:
            self._close()

    def run_once(self) -> bool:
        """Run the statement once and commit; whether it succeeded."""
        try:
            if self._connection is None:
                self._connection = self.connect()
            with self._connection.cursor() as cursor:
                cursor.execute(self.settings.statement)
            self._connection.commit()
        except Exception as exc:
            self._close()
            error = str(exc)
            if error != self._last_error:
                log.warning("heartbeat statement %r failed: %s", self.settings.statement,
                            error)
            self._last_error = error
            return False
        if self._last_error is not None:
            log.info("heartbeat statement %r runs again", self.settings.statement)
            self._last_error = None
        self.runs += 1
        return True

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # already gone: nothing to release
                connection.close()
