"""The issue's case: ``ALTER TABLE t ADD COLUMN z INT AUTO_INCREMENT UNIQUE`` (and a STORED
generated column) on a table with rows: the server numbers and computes every row without a
row event; the router reads the table again and the Iceberg mirror equals the source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.plugins import make_sink
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command

from .compare import assert_mirror_equals_source

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.mark.parametrize("flavor", ["mariadb", "mysql"])
def test_a_mirror_gets_the_values_a_ddl_gave_existing_rows(
        flavor: str, spark: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    server, db = request.getfixturevalue(flavor), f"refill_{flavor}"
    server.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}",
                    f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT)",
                    f"INSERT INTO {db}.t VALUES (1, 10), (2, 20), (3, 30), (4, 40)"])
    catalog = f"refill_{flavor}"
    sink = make_sink("spark:iceberg", warehouse=str(tmp_path / "warehouse"), spark=spark,
                     catalog=catalog)

    def run() -> Router:
        router = Router(RouterSettings(
            source=server.url, until="caught-up", filter=ChangeFilter(include=[db]),
            batch=BatchSettings(max_changes=50),
            schema=HistorySettings("auto", shadow_command(server))), sink)
        router.run()
        return router

    run()
    server.execute([f"ALTER TABLE {db}.t ADD COLUMN z INT AUTO_INCREMENT UNIQUE",
                    f"INSERT INTO {db}.t (id, a) VALUES (5, 50)",
                    f"ALTER TABLE {db}.t ADD COLUMN s INT AS (a * 2) STORED",
                    f"UPDATE {db}.t SET a = 11 WHERE id = 1"])
    assert run().status()["refills"] == 2
    run()  # goes on with a refill the first run began
    assert [r[0] for r in server.execute(f"SELECT z FROM {db}.t ORDER BY id")] == \
        [1, 2, 3, 4, 5]
    assert_mirror_equals_source(server, spark, db, "t", f"{catalog}.{db}.t", "id")
