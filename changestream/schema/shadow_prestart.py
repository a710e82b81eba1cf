"""A shadow server started while the router opens its sink.

A router whose schema history opens at the start (a sink that follows DDL, such as the
Iceberg landing; ``schema.history = "on"``; a stored history to restore) needs a shadow
server before it reads the first event: a new data directory and a server start, about a
second. The sink's open can take longer (Spark's start: seconds), so the shadow is started
beside it, on a thread of its own, and handed to the history when it opens with the same
settings (:meth:`ShadowPrestart.server`). Anything that goes wrong here is not reported:
the history then starts its shadow itself, and that start says what failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pymysql

from changestream.schema.history_settings import HistorySettings
from changestream.schema.shadow import ShadowServer, ShadowSettings
from changestream.schema.startup import server_facts


class ShadowPrestart:
    """Starts a shadow server for the source ``connect`` reaches, with ``settings``."""

    def __init__(self, settings: HistorySettings,
                 connect: Callable[[], pymysql.Connection[Any]]):
        self._started: tuple[ShadowSettings, ShadowServer] | None = None
        self._ready = threading.Event()
        self._release = threading.Event()
        # The thread lives as long as the server: the server process is started with a
        # parent-death signal, which Linux sends when the *thread* that started it ends.
        self._thread = threading.Thread(target=self._run, args=(settings, connect),
                                        daemon=True, name="changestream-shadow-start")
        self._thread.start()

    def _run(self, settings: HistorySettings,
             connect: Callable[[], pymysql.Connection[Any]]) -> None:
        try:
            conn = connect()
            try:
                flavor, lower_case = server_facts(conn)
            finally:
                conn.close()
            wanted = ShadowSettings(flavor, settings.shadow_server or None, lower_case,
                                    settings.shadow_dir or None)
            self._started = (wanted, ShadowServer(wanted))
        except Exception:  # see the module docstring
            self._started = None
        finally:
            self._ready.set()
        self._release.wait()

    def server(self, wanted: ShadowSettings) -> ShadowServer:
        """The server started here when it was started with ``wanted`` (it is the
        caller's then), else a new one."""
        self._ready.wait()
        started, self._started = self._started, None
        if started is not None:
            if started[0] == wanted:
                return started[1]
            started[1].close()
        return ShadowServer(wanted)

    def close(self) -> None:
        """Stop a server nobody took; after the server handed out is closed, end the
        thread (see ``__init__``)."""
        self._ready.wait()
        started, self._started = self._started, None
        if started is not None:
            started[1].close()
        self._release.set()
