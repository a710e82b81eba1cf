"""Iceberg commits rehearsed on scratch tables by the JVM that writes the class archive.

A dynamic class-data-sharing archive (:mod:`.class_sharing`) holds the classes its JVM
loaded: one written by a run that committed nothing (a router stopped before any change
came, say) lacks the ~1,300 classes of Iceberg's commits, and every later start loads them
from the jars again at its first commit. So before that JVM exits the
sink makes, in a scratch warehouse of its own, the commits a batch makes: tables created
through the catalog (one partitioned by day), an append, a row delta with equality
deletes, one with position deletes (its key index read from the table's files), a
snapshot with properties only, a positioned snapshot looked up.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from ..iceberg.commit_queue import CommitQueue
from ..iceberg.commits import create_table
from ..iceberg.files import ArrowAppender, load_table, positioned_snapshot
from ..iceberg.mirror_positions import KeyedRows, MirrorPositions
from ..iceberg.names import MIRROR_TABLE_PROPERTIES
from ..session import iceberg_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("changestream.sinks.spark")
#: The scratch catalog's name in the session (left set: the session is about to stop).
CATALOG = "changestream_class_rehearsal"

_SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": False, "metadata": {}},
    {"name": "v", "type": "string", "nullable": True, "metadata": {}},
    {"name": "_commit_ts", "type": "timestamp", "nullable": True, "metadata": {}}]}


def rehearse_commits(spark: SparkSession) -> None:
    """Make a batch's kinds of Iceberg commits on scratch tables (module docstring);
    anything failing is logged at debug level and left: it only shapes an archive."""
    began = time.perf_counter()
    folder = tempfile.mkdtemp(prefix="changestream-class-rehearsal-")
    try:
        for key, value in iceberg_conf(CATALOG, folder).items():
            spark.conf.set(key, value)
        schema = json.dumps(_SCHEMA)
        create_table(spark, CATALOG, "r", "changelog", schema, MIRROR_TABLE_PROPERTIES,
                     "_commit_ts")
        create_table(spark, CATALOG, "r", "mirror", schema, MIRROR_TABLE_PROPERTIES)
        create_table(spark, CATALOG, "r", "positions", schema, MIRROR_TABLE_PROPERTIES)
        at = datetime(2024, 1, 1, tzinfo=UTC)
        rows = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"],
                         "_commit_ts": pa.array([at, at], pa.timestamp("us", tz="UTC"))})
        appender = ArrowAppender(spark)
        appender.append(f"{CATALOG}.r.changelog", rows, {"changestream.batch": "1"})
        appender.append(f"{CATALOG}.r.mirror", rows, {"changestream.batch": "1"})
        appender.row_delta(f"{CATALOG}.r.mirror", rows.slice(0, 1), rows.select(["id"]),
                           {"changestream.batch": "2"})
        appender.append(f"{CATALOG}.r.positions", rows, {"changestream.batch": "1"})
        commits = CommitQueue()
        try:
            MirrorPositions(appender).land(
                f"{CATALOG}.r.positions", KeyedRows(("id",), rows.slice(0, 1),
                                                    rows.select(["id"]).slice(0, 1)),
                {"changestream.batch": "2"}, commits)
            commits.drain()
        finally:
            commits.close()
        appender.mark(f"{CATALOG}.r.mirror", {"changestream.position": "x"})
        positioned_snapshot(load_table(spark, f"{CATALOG}.r.mirror"), "changestream.position")
        logger.debug("spark sink: Iceberg commits rehearsed for the class archive in %.2f s",
                     time.perf_counter() - began)
    except Exception as exc:  # an archive with fewer classes is no harm
        logger.debug("spark sink: rehearsing Iceberg commits for the class archive: %s", exc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
