"""Shared fixtures: one private server per flavour and version per test run: MariaDB 10.11
(Debian's), MariaDB 11.8 and MySQL 9.7 (each from a Debian sid root).

The servers start on first use and stop at the end of the session. Tests share them, so
a test works in a database of its own (see ``fresh_database``) and must not assume the
binlog holds only its own events: read from ``server.binlog_position()`` taken first.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from changestream.devserver import EmbeddedMariaDB, ServerNotAvailableError
from tests.servers import PrivateMariaDB11, PrivateMySQL, require_server, skip_or_fail

#: What the ``server`` fixture yields.
Server = EmbeddedMariaDB | PrivateMySQL


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
def mariadb11() -> Iterator[PrivateMariaDB11]:
    """A private MariaDB 11.8 server (Debian sid's), set up as ``mariadb``, started once per run."""
    try:
        server = PrivateMariaDB11()
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


@pytest.fixture(params=["mariadb", "mariadb11", "mysql"])
def server(request: pytest.FixtureRequest) -> Server:
    """Each of the shared servers in turn (``server.flavor`` is "mariadb" for both MariaDBs)."""
    return request.getfixturevalue(request.param)


@pytest.fixture(params=["FULL", "MINIMAL"])
def row_metadata(request: pytest.FixtureRequest, server: Server) -> Iterator[str]:
    """``server``'s binlog_row_metadata while a test writes its workload (FULL after it)."""
    server.execute(f"SET GLOBAL binlog_row_metadata = {request.param}")
    try:
        yield request.param
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")


@pytest.fixture
def fresh_database(request: pytest.FixtureRequest, server: Server) -> str:
    """An empty database named after the test, on ``server``."""
    name = re.sub(r"\W", "_", request.node.name)[:64]
    server.execute([f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`"])
    return name


def jdbc_driver_jars() -> list[Path]:
    """The JDBC drivers of the catalogs tests keep in PostgreSQL and SQLite, where
    installed (scripts/install.sh installs them)."""
    from changestream.sinks.spark.iceberg.catalog import JDBC_DRIVERS

    return [Path(JDBC_DRIVERS[db][0]) for db in ("postgresql", "sqlite")
            if Path(JDBC_DRIVERS[db][0]).is_file()]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session (with the Iceberg runtime) for every Spark test of the run.

    Spark hands TIMESTAMP values to Python as naive local times: local time is made UTC.
    """
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None:
        skip_or_fail("no java: the Spark sink tests need a JRE")
    from changestream.sinks.spark.jvm.jars import iceberg_jars
    from changestream.sinks.spark.session import start_session

    os.environ["TZ"] = "UTC"
    time.tzset()
    session = start_session("local[2]", {"spark.sql.shuffle.partitions": "2",
                                         "spark.default.parallelism": "2",
                                         "spark.ui.showConsoleProgress": "false"},
                            iceberg_jars() + jdbc_driver_jars(), "changestream-tests")
    yield session
    session.stop()
    os.environ.pop("SPARK_LOCAL_IP", None)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A private PostgreSQL server (tests/postgres.py) for the tests' JDBC catalogs."""
    from tests.postgres import PrivatePostgres

    server = PrivatePostgres().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hive_metastore(postgres: Any) -> Iterator[Any]:
    """A private Hive Metastore (tests/metastore.py) on the private PostgreSQL, for the
    tests' Hive catalogs."""
    from tests.metastore import PrivateHiveMetastore

    metastore = PrivateHiveMetastore(postgres).start()
    yield metastore
    metastore.stop()
