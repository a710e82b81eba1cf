"""The schema history of one router run: opened at the start or when first needed, handed
to :class:`~changestream.column_info.ColumnInfo`, saved with each position, closed at the
end (see :mod:`changestream.schema.startup` for how it is opened)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pymysql

from changestream.changes import Position
from changestream.column_info import CatalogLookup, ColumnInfo
from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import EventHeader
from changestream.errors import ConfigError
from changestream.position_store import PositionStore
from changestream.schema.startup import (
    HistorySettings,
    open_history,
    open_history_at,
    scan_queries,
    scan_server_id,
)
from changestream.schema.tracker import SchemaTracker
from changestream.sources.live import LiveSource, StartPosition

log = logging.getLogger("changestream")


class HistoryOpener:
    """Opens and owns the schema history of a router reading a server.

    ``connection``/``server_id``/``verify_checksums`` are the source's (``connect`` opens a
    connection to it, with the router's error messages); ``store`` the
    position file (the history is stored beside it); ``scope`` the databases to keep;
    ``saved`` the position the file held at the start; ``wanted`` whether the sink asks for
    a history even when the binlog names every column (it follows DDL with it).
    """

    def __init__(self, settings: HistorySettings, connection: dict[str, Any],
                 connect: Callable[[], pymysql.Connection[Any]], server_id: int,
                 verify_checksums: bool, store: PositionStore | None,
                 scope: Callable[[str], bool], saved: Position | None, wanted: bool):
        if settings.shadow_dir is None and store is not None:
            settings = replace(settings, shadow_dir=str(store.path) + ".shadow")
        self.settings = settings
        self.connection = connection
        self._connect = connect
        self.server_id = server_id
        self.verify_checksums = verify_checksums
        self.store = store
        self.scope = scope
        self.saved = saved
        self.wanted = wanted
        self.tracker: SchemaTracker | None = None

    def column_info(self, resume: Position | None, start: StartPosition,
                    catalog: Callable[[], CatalogLookup | None]) -> ColumnInfo:
        """Where rows get their column names, reading from ``start`` (``resume``: the same as
        a position, when known); ``catalog`` makes the information_schema lookup that only
        a router with the history off uses."""
        history_store = self.store.history_store if self.store else None

        def open_at(header: EventHeader, from_start: bool) -> SchemaTracker:
            at = start if from_start else StartPosition("file", file=header.file,
                                                        pos=header.offset)
            return self._opened(open_history_at(self.settings, self._connect, self._scan, at,
                                                None, history_store, self.scope))

        if self.wanted and self.settings.mode == "auto":
            try:
                tracker = self._opened(open_history_at(
                    self.settings, self._connect, self._scan, start, resume, history_store,
                    self.scope, self.saved))
                return ColumnInfo(None, tracker, mariadb=tracker.history.flavor == "mariadb")
            except ConfigError as exc:
                log.warning("the sink follows DDL best with a schema history, which cannot be "
                            "kept: %s; its tables change shape when rows of the new shape "
                            "come", exc)
        result = open_history(self.settings, self._connect, self._scan, start, resume,
                              history_store, self.scope, self.saved)
        mariadb = result.flavor == "mariadb"
        if result.tracker is not None:
            return ColumnInfo(None, self._opened(result.tracker), mariadb=mariadb)
        if result.lazy:
            return ColumnInfo(None, None, open_at, mariadb=mariadb)
        return ColumnInfo(catalog(), mariadb=mariadb)

    def close(self) -> None:
        """Stop the shadow server (the history is stored with the positions already)."""
        if self.tracker is not None:
            self.tracker.shadow.close()
            self.tracker = None

    def _opened(self, tracker: SchemaTracker) -> SchemaTracker:
        self.tracker = tracker
        if self.store is not None:
            self.store.keep_history(tracker.history)
            tracker.skip = self.store.history_store.skips()
        return tracker

    def _scan(self, begin: StartPosition, head: tuple[str, int]) -> Iterator[Any]:
        # A second replica connection while the router's own may be open: another id.
        return scan_queries(LiveSource(self.connection, begin,
                                       server_id=scan_server_id(self.server_id),
                                       blocking=False, verify_checksums=self.verify_checksums,
                                       decoder=EventDecoder()), head)
