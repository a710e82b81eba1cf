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


def _append_states_in_one_file(spark: Any, table: str, digests: list[str]) -> None:
    """States appended by Spark as one data file (as a compaction leaves them)."""
    rows = [(digest, STATE.decode(), None) for digest in digests]
    spark.createDataFrame(rows, spark.table(table).schema).coalesce(1).writeTo(table).append()


def test_a_prune_drops_the_old_states_files_without_a_spark_job(spark: Any,
                                                                 tmp_path: Path) -> None:
    catalog = _catalog(spark, tmp_path)
    store = WarehouseHistoryStore(spark, catalog)
    for digest in ("d1", "d2", "d3"):
        store.save(digest, STATE)
    jobs = _jobs(spark)
    store.prune("d3")  # each state is a file of its own: the driver drops d1's and d2's
    assert _jobs(spark) == jobs
    reader = WarehouseHistoryStore(spark, catalog)
    assert reader._digests() == {"d3"}
    assert spark.sql(f"SELECT digest FROM {store.table}").collect() == [("d3",)]
    with pytest.raises(ConfigError):
        reader.load("d1")


def test_states_after_a_prune_copy_on_write_and_merge_on_read(spark: Any,
                                                             tmp_path: Path) -> None:
    catalog = _catalog(spark, tmp_path)
    store = WarehouseHistoryStore(spark, catalog)
    store.save("d1", STATE)
    # A file that holds the state kept beside others: not dropped whole, a Spark DELETE
    # (the states table rewrites its file: copy-on-write, Iceberg's default).
    _append_states_in_one_file(spark, store.table, ["d2", "d3"])
    store._stored = None  # appended behind its back: read again
    store.prune("d3")
    reader = WarehouseHistoryStore(spark, catalog)
    assert reader._digests() == {"d3"}
    with pytest.raises(ConfigError):
        reader.load("d1")
    # A states table whose deletes are delete files (merge-on-read, as a user may set
    # it): its files hold rows that are gone, so they are not read alone, and a prune
    # goes through Spark.
    spark.sql(f"ALTER TABLE {store.table} SET TBLPROPERTIES "
              "('write.delete.mode'='merge-on-read')")
    _append_states_in_one_file(spark, store.table, ["d4", "d5"])
    store._stored = None
    store.prune("d5")
    assert live_rows(spark, store.table, ["digest"]) is None
    store.save("d6", STATE)
    store.prune("d6")
    reader = WarehouseHistoryStore(spark, catalog)
    assert reader._digests() == {"d6"}
    assert reader.load("d6")[0] == "mariadb"
    with pytest.raises(ConfigError):
        reader.load("d5")
