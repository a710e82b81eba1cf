"""The schema history of one router run: opened at the start or when first needed, handed
to :class:`~changestream.schema.column_info.ColumnInfo`, saved with each position, closed at the
end (see :mod:`changestream.schema.startup` for how it is opened).

It is stored where the positions are: inside the sink's target for a sink that keeps its
own position and offers a :class:`~changestream.schema.store.HistoryStorage` (the Iceberg
landing), else beside the position file."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pymysql

from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import EventHeader
from changestream.model.changes import Position
from changestream.model.errors import ConfigError
from changestream.model.record import record
from changestream.schema.column_info import CatalogLookup, ColumnInfo
from changestream.schema.deferred_shadow import ShadowStart
from changestream.schema.history_settings import HistorySettings
from changestream.schema.shadow import ShadowServer, remove_stale
from changestream.schema.startup import (
    SCANNED_TYPES,
    open_history,
    open_history_at,
    scan_queries,
    scan_server_id,
)
from changestream.schema.store import HistoryHome, HistoryStorage
from changestream.schema.tracker import SchemaTracker
from changestream.sources.live import LiveSource, StartPosition

log = logging.getLogger("changestream")


def history_settings(settings: HistorySettings, store: HistoryHome | None
                     ) -> HistorySettings:
    """``settings`` as a router uses them: the shadow's files beside the position file
    when no folder is set."""
    if not settings.shadow_dir and store is not None:
        return replace(settings, shadow_dir=str(store.path) + ".shadow")
    return settings


def opens_at_start(settings: HistorySettings, saved: Position | None, wanted: bool) -> bool:
    """Whether the history of a router reading a server opens before the first event
    (:func:`~changestream.schema.startup.open_history`; ``wanted``: the sink asks for
    it), not when the first rows without column names come."""
    if settings.history == "off":
        return False
    return settings.history == "on" or wanted or (
        saved is not None and saved.schema_history is not None)


@record(frozen=True)
class HistorySource:
    """The server a schema history reads: ``connection`` (PyMySQL's arguments), ``connect``
    (a connection, with the router's error messages), the router's replica ``server_id``
    and whether events' checksums are verified."""

    connection: dict[str, Any]
    connect: Callable[[], pymysql.Connection[Any]]
    server_id: int
    verify_checksums: bool


class HistoryOpener:
    r"""Opens and owns the schema history of a router reading ``source``.

    ``store`` is the position file (the
    history is stored beside it); ``scope`` the databases to keep; ``saved`` the position the
    file held at the start; ``wanted`` whether the sink asks for a history even when the binlog
    names every column. ``sink_storage``: where the sink keeps the history beside its own
    position (then ``saved`` is the sink's, and each batch's position is :meth:`stamp`\ ed
    with the state there before the sink writes it)."""

    def __init__(self, settings: HistorySettings, source: HistorySource,
                 store: HistoryHome | None, scope: Callable[[str], bool],
                 saved: Position | None, wanted: bool,
                 sink_storage: HistoryStorage | None = None,
                 shadows: ShadowStart = ShadowServer):
        settings = history_settings(settings, store)
        if settings.shadow_dir:
            remove_stale(Path(settings.shadow_dir))
        self.shadows = shadows
        self.sink_storage = sink_storage
        self.storage: HistoryStorage | None = sink_storage or (
            store.history_store if store is not None else None)
        self._pruned: str | None = saved.schema_history if saved is not None else None
        self.settings = settings
        self.source = source
        self._connect = source.connect
        self.store = store
        self.scope = scope
        self.saved = saved
        self.wanted = wanted
        self.tracker: SchemaTracker | None = None
        self._closed = False

    def column_info(self, resume: Position | None, start: StartPosition,
                    catalog: Callable[[], CatalogLookup | None]) -> ColumnInfo:
        """Where rows get their column names, reading from ``start`` (``resume``: the same as
        a position, when known); ``catalog`` makes the information_schema lookup that only
        a router with the history off uses."""
        history_store = self.storage

        def open_at(header: EventHeader, from_start: bool) -> SchemaTracker:
            at = start if from_start else StartPosition("file", file=header.file,
                                                        pos=header.offset)
            return self._opened(open_history_at(self.settings, self._connect, self._scan, at,
                                                None, history_store, self.scope,
                                                shadows=self.shadows))

        if self.wanted and self.settings.history == "auto":
            try:
                tracker = self._opened(open_history_at(
                    self.settings, self._connect, self._scan, start, resume, history_store,
                    self.scope, self.saved, self.shadows))
                return ColumnInfo(None, tracker, mariadb=tracker.history.flavor == "mariadb")
            except ConfigError as exc:
                log.warning("the sink follows DDL best with a schema history, which cannot be "
                            "kept: %s; its tables change shape when rows of the new shape "
                            "come", exc)
        result = open_history(self.settings, self._connect, self._scan, start, resume,
                              history_store, self.scope, self.saved, self.shadows)
        mariadb = result.flavor == "mariadb"
        if result.tracker is not None:
            return ColumnInfo(None, self._opened(result.tracker), mariadb=mariadb)
        if result.lazy:
            return ColumnInfo(None, None, open_at, mariadb=mariadb)
        return ColumnInfo(catalog(), mariadb=mariadb)

    def close(self) -> None:
        """Stop the shadow server (the history is stored with the positions already; the
        tracker stays for the router's last status)."""
        if self.tracker is not None and not self._closed:
            self.tracker.shadow.close()
            self._closed = True

    def stamp(self, position: Position) -> Position:
        """``position`` naming the history's state there, which is stored first in the
        sink's storage (unchanged when the history is not kept there)."""
        tracker = self.tracker
        if tracker is None or self.sink_storage is None:
            return position
        digest, data = tracker.history.stored_at(position.file, position.pos)
        self.sink_storage.save(digest, data)
        return replace(position, schema_history=digest)

    def stored(self, position: Position) -> None:
        """The sink stored ``position``: states no position names any more are removed."""
        digest = position.schema_history
        if self.sink_storage is None or digest is None or digest == self._pruned:
            return
        self.sink_storage.prune(keep=digest)
        self._pruned = digest

    def _opened(self, tracker: SchemaTracker) -> SchemaTracker:
        self.tracker = tracker
        if self.sink_storage is None and self.store is not None:
            self.store.keep_history(tracker.history)
        tracker.skip = set(self.settings.skip) | (
            self.storage.skips() if self.storage is not None else set())
        return tracker

    def _scan(self, begin: StartPosition, head: tuple[str, int]) -> Iterator[Any]:
        # A second replica connection while the router's own may be open: another id.
        source = self.source
        return scan_queries(LiveSource(source.connection, begin,
                                       server_id=scan_server_id(source.server_id),
                                       blocking=False, verify_checksums=source.verify_checksums,
                                       decoder=EventDecoder(), wanted_types=SCANNED_TYPES,
                                       skip_begin_commit=True, until=head), head)
