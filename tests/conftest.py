"""Shared fixtures: one private MariaDB and one private MySQL server per test run.

The servers start on first use and stop at the end of the session. Tests share them, so
a test works in a database of its own (see ``fresh_database``) and must not assume the
binlog holds only its own events: read from ``server.binlog_position()`` taken first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from changestream.embedded import EmbeddedMariaDB, ServerNotAvailableError
from tests.servers import PrivateMySQL, require_server, skip_or_fail


@pytest.fixture(scope="session")
def mariadb() -> Iterator[EmbeddedMariaDB]:
    """A private MariaDB server (ROW binlog, full row metadata), started once per run."""
    try:
        server = EmbeddedMariaDB()
    except ServerNotAvailableError as error:
        skip_or_fail(str(error))
    require_server(server)
    yield server
    server.close()


@pytest.fixture(scope="session")
def mysql() -> Iterator[PrivateMySQL]:
    """A private MySQL 9.x server (ROW binlog, full row metadata, GTIDs), started once per run."""
    try:
        server = PrivateMySQL()
    except ServerNotAvailableError as error:
        skip_or_fail(str(error))
    require_server(server)
    yield server
    server.close()


@pytest.fixture(params=["mariadb", "mysql"])
def server(request: pytest.FixtureRequest) -> EmbeddedMariaDB | PrivateMySQL:
    """Each of the shared servers in turn."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def fresh_database(request: pytest.FixtureRequest, server: EmbeddedMariaDB | PrivateMySQL) -> str:
    """An empty database named after the test, on ``server``."""
    name = re.sub(r"\W", "_", request.node.name)[:64]
    server.execute([f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`"])
    return name
