"""The tables a router delivers: the configured filter, and tables added or paused while it
runs (control endpoint ``POST /tables``, ``changestream tables``), which every position
after the change keeps (:mod:`changestream.model.table_changes`), so a restart goes on with
them. A change takes effect at the stream's next transaction boundary; a table added (or
resumed) is read by a snapshot that starts there, unless asked not to be."""

from __future__ import annotations

import logging
import threading
from typing import Any

from changestream.actors.messages import TablesSwitch
from changestream.model.changes import Position
from changestream.model.errors import ConfigError
from changestream.model.table_changes import TableChanges
from changestream.runtime.listener import Listener
from changestream.runtime.router_snapshots import RouterSnapshots
from changestream.transactions.filters import ChangeFilter

log = logging.getLogger("changestream")

ACTIONS = ("add", "pause", "resume")
_WILDCARDS = frozenset("*?[")


class RouterTables:
    """See the module docstring. ``history`` is the schema history's mode: a table added
    while it is kept must be of a database it keeps."""

    def __init__(self, configured: ChangeFilter, history: str):
        self.configured = configured
        self.history = history
        self.changes = TableChanges()
        self.filter = configured  # the filter now (what requests are checked against)
        self.listener: Listener | None = None
        self.snapshots: RouterSnapshots | None = None
        self._lock = threading.Lock()

    def resume_from(self, position: Position | None) -> ChangeFilter:
        """The filter to start with: the configured one with the changes ``position``
        keeps."""
        self.changes = TableChanges.from_dict(position.tables if position else None)
        if self.changes:
            self.filter = self.configured.with_tables(self.changes.added, self.changes.paused)
            log.info("tables added or paused while running: %s", self.changes.as_dict())
        return self.filter

    def attach(self, listener: Listener, snapshots: RouterSnapshots | None) -> None:
        """The running stream's listener, and the router's snapshots (``None``: a source
        that cannot be snapshotted)."""
        self.listener = listener
        self.snapshots = snapshots

    def change(self, action: str, tables: list[str], snapshot: bool = True) -> dict[str, Any]:
        """Add, pause or resume ``tables`` (``db.table``, patterns too) from the stream's
        next transaction boundary; ``snapshot``: read added or resumed tables by a snapshot
        starting there. Raises :class:`ConfigError` for a request it cannot take (a
        :class:`~changestream.runtime.router_snapshots.SnapshotBusyError` while another
        snapshot runs)."""
        if action not in ACTIONS:
            raise ConfigError(f"tables: {action!r} is not one of {', '.join(ACTIONS)}")
        if not tables or not all(isinstance(t, str) and t.count(".") == 1 and all(
                t.split(".")) for t in tables):
            raise ConfigError('tables: name them as db.table (patterns such as "shop.*" too)')
        listener = self.listener
        if listener is None:
            raise ConfigError("tables: the router is not reading yet")
        with self._lock:
            changes: TableChanges = getattr(self.changes, action)(tables)
            if action == "add":
                self._check_history(tables)
            new_filter = self.configured.with_tables(changes.added, changes.paused)
            reads = snapshot and action != "pause"
            answer: dict[str, Any] | None = None
            progress: dict[str, Any] | None = None
            if reads:
                if self.snapshots is None:
                    raise ConfigError("tables: binlog files hold no table to read; ask with "
                                      '"snapshot": false')
                before, self.filter = self.filter, new_filter  # the snapshot's scope
                try:
                    answer = self.snapshots.request(tables, start=False)
                except ConfigError:
                    self.filter = before
                    raise
                coordinator = self.snapshots.coordinator
                assert coordinator is not None and coordinator.progress is not None
                progress = coordinator.progress.as_dict()
            self.changes, self.filter = changes, new_filter
            listener.switch_tables(
                TablesSwitch(new_filter, changes.as_dict(), progress),
                self.snapshots.start_requested if reads and self.snapshots else None)
        log.info("tables %s: %s%s", action, ", ".join(tables),
                 f" (snapshot {answer['snapshot']})" if answer else "")
        return {"tables": changes.as_dict(), "snapshot": answer}

    def _check_history(self, tables: list[str]) -> None:
        """A table added must be of a database whose DDL the schema history keeps (the
        configured filter's databases), when one is kept."""
        if self.history == "off":
            return
        for name in tables:
            database = name.split(".")[0]
            known = not self.configured.include if _WILDCARDS & set(database) \
                else self.configured.database(database)
            if not known:
                raise ConfigError(
                    f"tables: {name} is in a database whose DDL the schema history does not "
                    "keep (filter.include does not reach it): add it to filter.include and "
                    "restart, or run with schema.history off")

    def status(self) -> dict[str, Any]:
        return self.changes.as_dict()
