"""The schema history of a router reading binlog files (``file://``).

With no server to seed it from, it begins empty where reading begins and learns each table
from the DDL the files hold, replayed on a shadow server of the files' flavour. Rows of a
table the files never created, or whose DDL the shadow refused, keep positional names
(``@1``, ``@2`` ...) with a warning. It is stored beside the position file and restored
from there, and opened at the first TABLE_MAP without names (``schema.history`` ``auto``),
at the start (``on``) or never (``off``): docs/schema-history.md, "Binlog files as the
source"."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import EventHeader, FormatDescriptionEvent
from changestream.model.changes import Position, binlog_order
from changestream.model.errors import ConfigError
from changestream.schema.column_info import ColumnInfo
from changestream.schema.history import SchemaHistory, SchemaState
from changestream.schema.history_settings import HistorySettings
from changestream.schema.shadow import ShadowServer, ShadowSettings, remove_stale
from changestream.schema.startup import (
    catch_up,
    scan_queries,
    stored_history,
)
from changestream.schema.store import HistoryHome
from changestream.schema.tracker import SchemaTracker
from changestream.sources.files import FileSource
from changestream.sources.live import StartPosition

log = logging.getLogger("changestream")


class FileHistoryOpener:
    """Opens and owns the schema history of a router reading ``paths`` (see the module
    docstring); ``store`` is the position file (the history is stored beside it), ``saved``
    the position it held at the start, ``scope`` the databases whose tables are kept."""

    def __init__(self, settings: HistorySettings, paths: Iterable[str | Path],
                 store: HistoryHome | None, scope: Callable[[str], bool],
                 saved: Position | None):
        if not settings.shadow_dir and store is not None:
            settings = replace(settings, shadow_dir=str(store.path) + ".shadow")
        if settings.shadow_dir:
            remove_stale(Path(settings.shadow_dir))
        self.settings = settings
        self.paths = list(paths)
        self.store = store
        self.scope = scope
        self.saved = saved
        self.tracker: SchemaTracker | None = None
        self._closed = False

    def column_info(self, start: StartPosition) -> ColumnInfo:
        """Where rows get their column names, reading from ``start``."""
        if self.settings.history == "off":
            return ColumnInfo(None)
        flavor = self._flavor(start.file if start.kind == "file" else None)
        mariadb = flavor == "mariadb"
        saved = self.saved
        stored = saved is not None and saved.schema_history is not None and \
            self.store is not None and start.kind == "file" and \
            binlog_order(start.file or "", start.pos) == binlog_order(saved.file, saved.pos)
        if stored or self.settings.history == "on":
            try:
                tracker = self._open(flavor, start, None, from_start=True)
                return ColumnInfo(None, tracker, mariadb=mariadb, positional_fallback=True)
            except ConfigError as exc:
                if self.settings.history == "on":
                    raise
                log.warning("no schema history for binlog files: %s", exc)
                return ColumnInfo(None, mariadb=mariadb)

        def open_at(header: EventHeader, from_start: bool) -> SchemaTracker:
            return self._open(flavor, start, header, from_start)

        return ColumnInfo(None, None, open_at, mariadb=mariadb, positional_fallback=True)

    def close(self) -> None:
        """Stop the shadow server (the tracker stays for the router's last status)."""
        if self.tracker is not None and not self._closed:
            self.tracker.shadow.close()
            self._closed = True

    def stamp(self, position: Position) -> Position:
        return position  # stored with the position file (HistoryHome.keep_history)

    def stored(self, position: Position) -> None:
        pass

    def _open(self, flavor: str, start: StartPosition, header: EventHeader | None,
              from_start: bool) -> SchemaTracker:
        """A history valid at ``start`` (``from_start``), else at ``header``: the one
        stored with the saved position, or an empty one (brought to ``header`` by the DDL
        the files hold from ``start``)."""
        from changestream.devserver import ServerNotAvailableError, ServerStartError

        try:
            shadow = ShadowServer(ShadowSettings(flavor, self.settings.shadow_server or None, 0,
                                                 self.settings.shadow_dir or None))
        except (ServerNotAvailableError, ServerStartError) as exc:
            raise ConfigError(
                f"naming the columns of binlog files without row metadata takes a {flavor} "
                f"server program on this host for the schema history's shadow server ({exc}); "
                "install one or set schema.shadow_server") from None
        try:
            saved = self.saved if self.store is not None else None
            history = stored_history(flavor, shadow, saved, saved,
                                     self.store.history_store if self.store else None)
            tracker = SchemaTracker(history or SchemaHistory(flavor, SchemaState({}, {}),
                                                             origin="binlog"),
                                    shadow, self.scope, lenient=True)
            if not from_start and header is not None:
                catch_up(tracker, scan_queries(self._source(start),
                                               (header.file or "", header.offset)))
        except BaseException:
            shadow.close()
            raise
        self.tracker = tracker
        if self.store is not None:
            self.store.keep_history(tracker.history)
            tracker.skip = self.store.history_store.skips()
        tracker.skip |= set(self.settings.skip)
        return tracker

    def _source(self, start: StartPosition) -> FileSource:
        return FileSource(self.paths, start_file=start.file if start.kind == "file" else None,
                          start_pos=start.pos if start.kind == "file" else 4,
                          decoder=EventDecoder())

    def _flavor(self, start_file: str | None) -> str:
        """The flavour of the server that wrote the files (from the first one read)."""
        source = FileSource(self.paths, start_file=start_file, decoder=EventDecoder())
        try:
            for raw in source.raw_events():
                if raw is None:
                    continue
                assert source.decoder is not None
                event = source.decoder.decode(raw.data, raw.file, raw.offset)
                if isinstance(event, FormatDescriptionEvent):
                    return "mariadb" if event.is_mariadb else "mysql"
                break
        finally:
            source.stop()
        return "mysql"

