"""A shadow server started when the schema history first needs one.

A history read from the source's catalog or restored from the position file knows every
table's definition without a shadow server; the shadow is needed only to replay a DDL. So
the history's tracker gets a :class:`DeferredShadow`: the server is started at the first DDL
the history applies (a MariaDB shadow takes about 0.3 s to start, a MySQL 9 one seconds),
the history's state at that moment is created on it, and the DDL replayed there. A run
whose stretch of binlog holds no DDL never starts one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from changestream.decoding.query_status import QueryStatus
from changestream.model.errors import ConfigError
from changestream.schema.catalog import quote
from changestream.schema.definition import TableDefinition, TableKey
from changestream.schema.history import SchemaState
from changestream.schema.shadow import ShadowError, ShadowServer, ShadowSettings

log = logging.getLogger("changestream")

ShadowStart = Callable[[ShadowSettings], ShadowServer]
"""What starts a shadow server with given settings (:class:`ShadowServer` itself, or a
prestart's :meth:`~changestream.schema.shadow_prestart.ShadowPrestart.server`)."""


class DeferredShadow:
    """The shadow server of ``settings``, started by ``start`` when first used and given
    ``state()`` (the history's tables then) before anything runs on it. It has the
    interface of :class:`ShadowServer` that :class:`~changestream.schema.tracker.SchemaTracker`
    uses."""

    def __init__(self, settings: ShadowSettings, start: ShadowStart,
                 state: Callable[[], SchemaState]):
        self.settings = settings
        self.flavor = settings.flavor
        self._start = start
        self._state = state
        self._server: ShadowServer | None = None

    @property
    def started(self) -> bool:
        return self._server is not None

    def server(self) -> ShadowServer:
        """The shadow server, started (and given the history's state) on the first call."""
        if self._server is None:
            from changestream.devserver import ServerNotAvailableError, ServerStartError

            began = time.monotonic()
            try:
                shadow = self._start(self.settings)
            except (ServerNotAvailableError, ServerStartError) as exc:
                raise ConfigError(
                    f"the schema history needs a {self.flavor} server program on this host "
                    f"for its shadow server, to replay a DDL ({exc}); install one or set "
                    "schema.shadow_server, or set binlog_row_metadata=FULL on the source"
                ) from None
            try:
                state = self._state()
                restore(shadow, state, skip_failures=True)
            except BaseException:
                shadow.close()
                raise
            self._server = shadow
            log.info("schema history: shadow %s server started for a DDL, %d tables created "
                     "on it in %.2fs", self.flavor, len(state.tables),
                     time.monotonic() - began)
        return self._server

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def replay(self, statement: bytes, database: str, status: QueryStatus) -> None:
        self.server().replay(statement, database, status)

    def run(self, sql: str) -> None:
        self.server().run(sql)

    def database_names(self) -> set[str]:
        return self.server().database_names()

    def databases(self) -> dict[str, str]:
        return self.server().databases()

    def tables(self, database: str) -> list[str]:
        return self.server().tables(database)

    def read(self, keys: Iterable[TableKey]) -> dict[TableKey, TableDefinition | None]:
        return self.server().read(keys)


def restore(shadow: ShadowServer, state: SchemaState, skip_failures: bool = False) -> None:
    """Create ``state``'s databases and tables on the (empty) shadow. With
    ``skip_failures`` a table the shadow cannot create is left off it, with a warning (a
    later DDL on it then makes it unknown to the history)."""
    for create in state.databases.values():
        shadow.run(create)
    made = set(state.databases)
    for (database, _), definition in sorted(state.tables.items()):
        if database not in made:  # a history learnt from files may not know its CREATE
            shadow.run(f"CREATE DATABASE IF NOT EXISTS {quote(database)}")
            made.add(database)
        shadow.run(f"USE {quote(database)}")
        try:
            shadow.run(definition.create_sql)
        except ShadowError as exc:
            if not skip_failures:
                raise
            log.warning("schema history: the shadow %s server cannot create %s.%s (%s); a "
                        "DDL on it will make it unknown to the history", shadow.flavor,
                        database, definition.table, exc)
