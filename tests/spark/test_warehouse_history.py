"""The schema history's states in the Iceberg warehouse (sinks/spark/iceberg/history.py): read
back from the table's own files, with no Spark job, as the states table holds them after
appends and deletes; with delete files to merge, through Spark."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from changestream.model.errors import ConfigError
from changestream.schema.history import SchemaState, encode_state
from changestream.sinks.spark.iceberg.files import live_rows
from changestream.sinks.spark.iceberg.history import WarehouseHistoryStore
from changestream.sinks.spark.session import iceberg_conf

_names = itertools.count(1)
STATE = encode_state("mariadb", SchemaState())


def _catalog(spark: Any, warehouse: Path) -> str:
    name = f"history{next(_names)}"
    for key, value in iceberg_conf(name, warehouse).items():
        spark.conf.set(key, value)
    return name


def _jobs(spark: Any) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def test_states_are_read_from_the_files_without_a_spark_job(spark: Any,
                                                            tmp_path: Path) -> None:
    catalog = _catalog(spark, tmp_path)
    writer = WarehouseHistoryStore(spark, catalog)
    writer.save("d1", STATE)
    writer.save("d2", encode_state("mysql", SchemaState()))
    jobs = _jobs(spark)
    reader = WarehouseHistoryStore(spark, catalog)  # as a restarted router's
    reader.read_digests()
    assert reader._digests() == {"d1", "d2"}
    assert reader.load("d2")[0] == "mysql"  # its flavor: d2's state
    assert _jobs(spark) == jobs  # no Spark query ran
    with pytest.raises(ConfigError, match="does not hold"):
        reader.load("d3")


def test_states_after_a_prune_copy_on_write_and_merge_on_read(spark: Any,
                                                             tmp_path: Path) -> None:
    catalog = _catalog(spark, tmp_path)
    store = WarehouseHistoryStore(spark, catalog)
    for digest in ("d1", "d2", "d3"):
        store.save(digest, STATE)
    store.prune("d3")  # a Spark DELETE: the states table rewrites its file
    reader = WarehouseHistoryStore(spark, catalog)
    assert reader._digests() == {"d3"}
    with pytest.raises(ConfigError):
        reader.load("d1")
    # A states table whose deletes are delete files (merge-on-read, as a user may set
    # it): its files hold rows that are gone, so they are not read alone.
    spark.sql(f"ALTER TABLE {store.table} SET TBLPROPERTIES "
              "('write.delete.mode'='merge-on-read')")
    store.save("d4", STATE)
    store.prune("d4")
    assert live_rows(spark, store.table, ["digest"]) is None
    reader = WarehouseHistoryStore(spark, catalog)
    assert reader._digests() == {"d4"}
    assert reader.load("d4")[0] == "mariadb"
    with pytest.raises(ConfigError):
        reader.load("d3")
