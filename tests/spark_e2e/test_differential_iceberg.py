"""The randomized differential test (:mod:`tests.differential`) through the Spark sink: the
seed's random tables and workload (full row images: a mirror needs every column) landed in
many batches into Iceberg, live, with the decode workers' Arrow frames and without; every
mirror equals the server's ``SELECT`` value by value in Spark's types (docs/sinks.md)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.plugins import make_sink
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.transactions.filters import ChangeFilter
from tests.differential import run_workload, spark_differences
from tests.servers import shadow_command

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SEEDS = [int(s) for s in os.environ.get("CHANGESTREAM_DIFFERENTIAL_SEEDS", "1").split(",")]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("arrow_workers", ["true", "false"])
def test_iceberg_mirrors_equal_the_tables_the_server_holds(
        server: Any, spark: Any, fresh_database: str, tmp_path: Path, seed: int,
        arrow_workers: str, request: pytest.FixtureRequest) -> None:
    start = server.binlog_position()
    work = run_workload(server, seed, fresh_database, images=("FULL",))
    catalog = "differential_" + re.sub(r"\W", "_", request.node.callspec.id)
    sink = make_sink("spark:iceberg", spark=spark, catalog=catalog,
                     warehouse=tmp_path / "warehouse", arrow_workers=arrow_workers)
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up", filter=ChangeFilter(include=[fresh_database]),
                          batch=BatchSettings(max_changes=60),
                          schema=HistorySettings("auto", shadow_command(server))), sink).run()
    found = spark_differences(server, work, spark, catalog)
    assert not found, f"seed {seed} on {server.flavor}: {found[:6]}"
