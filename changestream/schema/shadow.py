"""The shadow server: a private, empty server of the source's flavour on which every DDL of
the binlog is replayed, so that what it means is decided by the same code that decided it
on the source (the way TiDB DM's schema tracker works).

It holds the tables' definitions only (no rows, no binlog). Each statement runs under the
session the source logged with it (``sql_mode``, character sets, default database, the
utf8mb4 default collation); afterwards the tables it touched are read back from
``information_schema``. Starting it takes about a second; a DDL a few milliseconds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pymysql

from changestream.decoding.query_status import QueryStatus
from changestream.model.record import record
from changestream.schema.catalog import collation_ids, quote, read_definition
from changestream.schema.definition import TableDefinition, TableKey

if TYPE_CHECKING:
    from changestream.devserver import EmbeddedServer

# The private server programs (changestream.devserver) are imported where a shadow server is
# made: most runs never start one, and a router's start should not import them.

log = logging.getLogger("changestream")

#: Databases that are the server's own: never tracked, never replayed into.
SYSTEM_DATABASES = frozenset({"mysql", "sys", "information_schema", "performance_schema"})

# Errors that say a table or database the statement names is not in the shadow: the
# history did not know it (it predates the history), so it is not an error of the DDL.
ER_BAD_DB = 1049
ER_BAD_TABLE = 1051
ER_NO_SUCH_TABLE = 1146
ER_DB_DROP_EXISTS = 1008
UNKNOWN_OBJECT_ERRORS = frozenset({ER_BAD_DB, ER_BAD_TABLE, ER_NO_SUCH_TABLE,
                                   ER_DB_DROP_EXISTS})

# Small and quick: the shadow holds no rows and need not survive a crash (it is rebuilt
# from the stored history).
_MARIADB_OPTIONS = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=16M",
                    "--innodb-flush-log-at-trx-commit=0", "--performance-schema=OFF",
                    "--skip-name-resolve", "--max-connections=10"]
_MYSQL_OPTIONS = ["--innodb-buffer-pool-size=16M", "--innodb-flush-log-at-trx-commit=0",
                  "--innodb-doublewrite=OFF", "--performance-schema=OFF",
                  "--skip-name-resolve", "--max-connections=10"]


class ShadowError(Exception):
    """The shadow server refused a statement; ``code`` is the server's error number."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@record(frozen=True)
class ShadowSettings:
    """How to run the shadow server.

    ``command`` runs the server program (the last word; what comes before it is a launcher,
    e.g. another root's dynamic loader): ``None`` means the host's ``mariadbd`` or ``mysqld``
    as found on the PATH. ``lower_case_table_names`` must be the source's. ``base_dir``
    holds its files, in a folder named after the process (the router uses
    ``<position file>.shadow``: what a router killed with SIGKILL left there is removed by
    the next one; the server itself dies with its router).
    """

    flavor: str
    command: str | None = None
    lower_case_table_names: int = 0
    base_dir: str | None = None  # emptied and reused (None: a new temporary directory)


class ShadowServer:
    """A started shadow server; see the module docstring."""

    def __init__(self, settings: ShadowSettings):
        self.settings = settings
        self.flavor = settings.flavor
        self.server = _make_server(settings)
        self.server.start()
        self._conn: pymysql.Connection[Any] = self.server.connect(charset="utf8mb4")
        self._session: tuple[Any, ...] | None = None
        self._collations: dict[str, int] = {}  # name -> id
        self._charsets: dict[int, tuple[str, str]] = {}  # id -> (collation, character set)
        for name, (number, charset) in collation_ids(self._query).items():
            self._collations[name] = number
            self._charsets[number] = (name, charset)

    def close(self) -> None:
        with contextlib.suppress(pymysql.MySQLError):
            self._conn.close()
        self.server.discard()  # its files are removed: no clean shutdown to wait for
        if self.settings.base_dir:
            shutil.rmtree(self.server.base_dir, ignore_errors=True)

    # -- statements ------------------------------------------------------------------

    def replay(self, statement: bytes, database: str, status: QueryStatus) -> None:
        """Run one logged DDL statement as the source ran it. Raises :class:`ShadowError`."""
        self._set_session(database, status)
        try:
            self._conn.query(statement)
        except pymysql.MySQLError as exc:
            raise _shadow_error(exc) from None

    def run(self, sql: str) -> None:
        """Run a statement of changestream's own (restoring tables, dropping unknown ones).
        Raises :class:`ShadowError`."""
        self._session = None
        try:
            with self._conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = 'NO_DIR_IN_CREATE'")
                cur.execute("SET NAMES utf8mb4")
                cur.execute("SET SESSION foreign_key_checks = 0")
                cur.execute(sql)
        except pymysql.MySQLError as exc:
            raise _shadow_error(exc) from None

    def _set_session(self, database: str, status: QueryStatus) -> None:
        session = (database, status)
        if session == self._session:
            return
        # The shadow may lack an engine the source has, and the source's DATA DIRECTORY.
        modes = [m for m in status.sql_mode_names(self.flavor)
                 if m not in ("NO_ENGINE_SUBSTITUTION", "NO_DIR_IN_CREATE")]
        modes.append("NO_DIR_IN_CREATE")
        settings = [f"sql_mode = '{','.join(modes)}'", "foreign_key_checks = 0"]
        if status.client_charset is not None:
            settings += [f"character_set_client = {self._charset_of(status.client_charset)}",
                         f"collation_connection = {self._collation(status.connection_collation)}",
                         f"collation_server = {self._collation(status.server_collation)}"]
        if status.database_collation is not None:
            settings.append(f"collation_database = {self._collation(status.database_collation)}")
        if self.flavor == "mysql":
            if status.explicit_defaults_for_timestamp is not None:
                settings.append("explicit_defaults_for_timestamp = "
                                f"{int(status.explicit_defaults_for_timestamp)}")
            if status.default_collation_for_utf8mb4 is not None:
                settings.append("default_collation_for_utf8mb4 = "
                                f"{status.default_collation_for_utf8mb4}")
        with self._conn.cursor() as cur:
            cur.execute("SET NAMES utf8mb4")
            if database:
                try:
                    cur.execute(f"USE {quote(database)}")
                except pymysql.MySQLError:
                    # The statement may not need it (CREATE DATABASE of that very name).
                    cur.execute("CREATE DATABASE IF NOT EXISTS _changestream_nodb")
                    cur.execute("USE _changestream_nodb")
            for setting in settings:
                cur.execute(f"SET SESSION {setting}")
        self._session = session

    def _collation(self, number: int | None) -> str:
        """A collation id as the shadow names it (the id itself when it does not know it)."""
        known = self._charsets.get(number or 0)
        return f"'{known[0]}'" if known else str(number)

    def _charset_of(self, number: int) -> str:
        known = self._charsets.get(number)
        return f"'{known[1]}'" if known else str(number)

    # -- the catalog -----------------------------------------------------------------

    def database_names(self) -> set[str]:
        """The names of the shadow's databases (system ones included)."""
        return {str(n) for (n,) in self._query("SHOW DATABASES")}

    def databases(self) -> dict[str, str]:
        """Every database of the shadow but the system ones: its CREATE DATABASE text."""
        names = [str(n) for (n,) in self._query("SHOW DATABASES")]
        return {name: str(self._query(f"SHOW CREATE DATABASE {quote(name)}")[0][1])
                for name in names if name.lower() not in SYSTEM_DATABASES
                and name != "_changestream_nodb"}

    def tables(self, database: str) -> list[str]:
        """The base tables of ``database`` (none when it does not exist)."""
        return [str(n) for (n,) in self._query(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
            "AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')", (database,))]

    def read(self, keys: Iterable[TableKey]) -> dict[TableKey, TableDefinition | None]:
        """The definitions of ``keys`` as the shadow has them now (``None``: no such table)."""
        return {key: self._definition(*key) for key in keys}

    def _definition(self, database: str, table: str) -> TableDefinition | None:
        return read_definition(self._query, self._collations, database, table)

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._conn.cursor() as cur:
            if self._session is not None:
                cur.execute("SET NAMES utf8mb4")
                self._session = None
            cur.execute(sql, args)
            return list(cur.fetchall())


def shadow_problem(flavor: str, command: str | None) -> str | None:
    """Why no shadow server of ``flavor`` can run here (``None``: one can)."""
    from changestream.devserver import ServerNotAvailableError

    try:
        _make_server(ShadowSettings(flavor, command))
    except ServerNotAvailableError as exc:
        return str(exc)
    return None


def _shadow_error(exc: pymysql.MySQLError) -> ShadowError:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    message = exc.args[1] if len(exc.args) > 1 else str(exc)
    return ShadowError(str(message), code)


def remove_stale(parent: Path) -> None:
    """Remove what shadow servers of routers that are gone left in ``parent`` (a router
    killed with SIGKILL cannot clean up; its shadow server dies with it, but a bootstrap it
    was running may still be writing in its folder for a moment). A router calls it when it
    starts, whether or not it will need a shadow itself."""
    if not parent.is_dir():
        return
    for stale in parent.iterdir():
        if stale.name.isdigit() and int(stale.name) != os.getpid():
            from changestream.devserver.process import alive

            if not alive(int(stale.name)):
                _remove_while_written(stale)


def _remove_while_written(folder: Path, seconds: float = 5.0) -> None:
    """Remove ``folder``, again while a dying shadow server still writes files into it
    (a removal it races leaves the folder behind)."""
    deadline = time.monotonic() + seconds
    while True:
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists() or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _private_dir(parent: Path) -> Path:
    """``parent/<pid>``, emptied, after :func:`remove_stale`."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale(parent)
    own = parent / str(os.getpid())
    shutil.rmtree(own, ignore_errors=True)
    return own



def _make_server(settings: ShadowSettings) -> EmbeddedServer:
    from changestream.devserver import EmbeddedMariaDB, EmbeddedMySQL

    words = shlex.split(settings.command) if settings.command else []
    program, launcher = (words[-1], words[:-1]) if words else (None, [])
    lower = ([f"--lower-case-table-names={settings.lower_case_table_names}"]
             if settings.lower_case_table_names else [])
    base_dir = _private_dir(Path(settings.base_dir)) if settings.base_dir else None
    if settings.flavor == "mysql":
        return EmbeddedMySQL(binlog=False, mysqld=program, launcher=launcher,
                             options=[*_MYSQL_OPTIONS, *lower], base_dir=base_dir,
                             dies_with_parent=True)
    return EmbeddedMariaDB(binlog=False, mariadbd=program, launcher=launcher,
                           options=[*_MARIADB_OPTIONS, *lower], base_dir=base_dir,
                           dies_with_parent=True)
