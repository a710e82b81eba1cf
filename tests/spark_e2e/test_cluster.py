"""The Spark sink on a real standalone cluster (a master and two workers, each its own JVM,
see :mod:`tests.spark_cluster`): ``changestream run`` with ``master=spark://...`` lands the
end-to-end workload into Iceberg (mirrors equal to the source tables, changelogs exactly
once) and into Parquet (changelogs exactly once, replaying to the source tables).

The router runs as the command line does, in its own process; the test's Spark session
reads what it landed only after that process has ended.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from changestream.sinks.spark.session import iceberg_conf
from tests.servers import skip_or_fail
from tests.spark_cluster import StandaloneCluster

from .compare import (
    assert_mirror_equals_source,
    assert_same_rows,
    normalized,
    source_columns,
    source_rows,
)
from .test_end_to_end import TABLES, check_changelog, committed_counts, reference, replay
from .workload import steps

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def cluster() -> Iterator[StandaloneCluster]:
    pytest.importorskip("pyspark")
    try:
        with StandaloneCluster(workers=2, cores=1, memory="2g") as running:
            yield running
    except RuntimeError as exc:
        skip_or_fail(f"no Spark standalone cluster: {exc}")


def _run(server: Any, db: str, start: tuple[str, int], cluster: StandaloneCluster,
         mode: str, where: Path, catalog: str) -> str:
    """``changestream run`` into ``mode`` on the cluster until caught up; its stderr."""
    target = f"warehouse={where}" if mode == "iceberg" else f"path={where}"
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
         "--sink", f"spark:{mode}", "--sink-option", target,
         "--sink-option", f"catalog={catalog}", "--sink-option", f"master={cluster.master_url}",
         "--sink-option", "conf.spark.executor.memory=1g",
         "--sink-option", "conf.spark.sql.shuffle.partitions=2",
         "--start", f"{start[0]}:{start[1]}", "--until", "caught-up", "--include", db,
         "--position-file", str(where.parent / f"{mode}.position.json"),
         "--batch-changes", "40"],
        capture_output=True, timeout=600, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"exit {done.returncode}:\n{err[-4000:]}"
    print(f"{mode} on {cluster.master_url}: {time.monotonic() - began:.1f}s")
    return err


def _apps(cluster: StandaloneCluster) -> list[str]:
    """The ids of the applications the cluster's master registered, in order."""
    return re.findall(r"Registered app \S+ with ID (app-\S+)", cluster.log("master"))


@pytest.mark.parametrize("mode", ["iceberg", "parquet"])
def test_cli_lands_the_workload_on_a_standalone_cluster(
        mariadb: Any, cluster: StandaloneCluster, tmp_path: Path, mode: str,
        request: pytest.FixtureRequest) -> None:
    db = f"cluster_{mode}"
    mariadb.execute([f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`"])
    start = mariadb.binlog_position()
    for group in steps(db):
        mariadb.execute(["SET time_zone = '+00:00'", *group])
    where = tmp_path / mode
    catalog = f"cluster_{mode}"
    apps_before = _apps(cluster)
    err = _run(mariadb, db, start, cluster, mode, where, catalog)
    # The run was an application of the cluster, whose master gave it executors on the
    # workers. (Whether a worker has started an executor's process by the time a short
    # run ends is a race on a loaded machine: the driver writes the files itself.)
    new = [app for app in _apps(cluster) if app not in apps_before]
    assert len(new) == 1, cluster.log("master")[-3000:]
    assert re.search(rf"Launching executor {new[0]}/\d+ on worker", cluster.log("master")), \
        cluster.log("master")[-3000:]
    # Spark's progress bars and INFO/WARN chatter stay out of the router's stderr.
    assert "[Stage " not in err and " INFO " not in err and " WARN " not in err, err[-3000:]

    spark = request.getfixturevalue("spark")  # only now: the router's Spark is gone
    records = reference(mariadb, db, start, tmp_path)
    counts = committed_counts(mariadb, db, start)
    if mode == "iceberg":
        for key, value in iceberg_conf(catalog, where).items():
            spark.conf.set(key, value)
    for table, key in TABLES.items():
        kinds = source_columns(mariadb, db, table)
        if mode == "iceberg":
            assert assert_mirror_equals_source(mariadb, spark, db, table,
                                               f"{catalog}.{db}.{table}", key) > 3
            log = spark.table(f"{catalog}.{db}.{table}__changelog")
        else:
            log = spark.read.option("mergeSchema", "true").parquet(str(where / db / table))
        rows = [r.asDict() for r in log.collect()]
        check_changelog(table, rows, records, counts)
        source = normalized(kinds, source_rows(mariadb, db, table), "source")
        assert_same_rows(f"{table} (replayed {mode} changelog)", source,
                         replay(table, rows, records, kinds, key), key)
