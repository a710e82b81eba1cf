"""The heartbeat statement: SQL the router runs on the source every so often while it
reads a live server (as Debezium's ``heartbeat.action.query``), so that a server whose
included tables are quiet still writes transactions and the saved position moves on
(see docs/operations.md, "Quiet tables and purged binlogs")."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from changestream.model.record import record
from changestream.model.setting import check_section, positive_seconds, setting

log = logging.getLogger("changestream")


def _not_blank(value: str) -> str | None:
    return "is blank (leave it empty to turn the heartbeat statement off)" \
        if value and not value.strip() else None


@record
class HeartbeatSettings:
    """The ``[heartbeat]`` section: the statement run to keep quiet servers writing
    (``statement`` ""; off) and how often."""

    statement: str = setting("", check=_not_blank, doc=(
        "A statement the router runs on the live source every interval_seconds, on a "
        "connection of its own, so that a server whose included tables are quiet "
        "(and which writes nothing else) still writes transactions and the saved "
        "position moves on before the binlog it names is purged (as Debezium's "
        "heartbeat.action.query). Off while empty. A failure is a warning (the "
        "statement and the server's error), never a stop. E.g., with a table the "
        "user made:\n"
        'statement = "INSERT INTO ops.changestream_heartbeat (id, ts) VALUES (1, '
        'NOW(6)) ON DUPLICATE KEY UPDATE ts = NOW(6)"'))
    interval_seconds: float = setting(60.0, check=positive_seconds)

    def __post_init__(self) -> None:
        check_section(self, "heartbeat.")  # made by a program: the configuration's checks

    @property
    def enabled(self) -> bool:
        return bool(self.statement)


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
