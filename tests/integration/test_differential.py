"""The randomized differential test (see :mod:`tests.differential`): random tables and
workloads under FULL and MINIMAL row metadata and every row image, on MariaDB 10.11, 11.8
and MySQL 9.7; the records read live and from files, with and without decode workers,
rebuild tables equal to the server's ``SELECT`` value by value. CI runs these fixed seeds;
``bench/differential.py`` runs as many as it is given time for and prints any seed that
differs, to be replayed here with ``CHANGESTREAM_DIFFERENTIAL_SEEDS=seed,...``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.differential import differences, read_records, rebuild, run_workload

pytestmark = pytest.mark.integration

SEEDS = [int(s) for s in os.environ.get("CHANGESTREAM_DIFFERENTIAL_SEEDS", "1,2").split(",")]


@pytest.mark.parametrize("seed", SEEDS)
def test_records_rebuild_the_tables_the_server_holds(
        server: Any, fresh_database: str, tmp_path: Path, seed: int) -> None:
    start = server.binlog_position()
    work = run_workload(server, seed, fresh_database)
    found: dict[str, list[str]] = {}
    for source in ("live", "files"):
        for workers in (0, 2):
            out = tmp_path / f"{source}-{workers}.jsonl"
            records = read_records(server, fresh_database, start, out, source, workers)
            diff = differences(server, work, rebuild(work, records))
            if diff:
                found[f"{source}, {workers} decode workers"] = diff[:6]
    assert not found, f"seed {seed} on {server.flavor}: {found}"
