"""The Spark session an adapter lands batches with: embedded local Spark by default."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from changestream.model.errors import SinkError

from .jvm.start import (  # noqa: F401 - the session's start, where callers find it
    ICEBERG_EXTENSIONS,
    QUIET_LOG4J2,
    quiet_conf,
    quiet_log4j2,
    start_session,
    writes_class_archive,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def iceberg_conf(catalog: str, warehouse: str | os.PathLike[str]) -> dict[str, str]:
    """Spark settings for a Hadoop Iceberg catalog named ``catalog`` in ``warehouse`` (as
    the Iceberg sink makes it: :func:`.iceberg.catalog.catalog_settings`)."""
    from .iceberg.catalog import catalog_settings

    return catalog_settings(catalog, warehouse).spark_conf()


def jvm_of(spark: SparkSession) -> Any:
    """The session's gateway to its JVM (Py4J's view of the driver's classes)."""
    jvm = spark._jvm
    if jvm is None:
        raise SinkError("the Spark session was stopped")
    return jvm


def require_utc(spark: SparkSession) -> None:
    """Timestamps are handed over as UTC instants; the session must read them so."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    if zone not in ("UTC", "Etc/UTC", "GMT", "+00:00", "Z"):
        spark.conf.set("spark.sql.session.timeZone", "UTC")


PARQUET_REBASE = ("spark.sql.parquet.datetimeRebaseModeInWrite",
                  "spark.sql.parquet.int96RebaseModeInWrite")


def proleptic_parquet(spark: SparkSession) -> None:
    """Write dates and timestamps to Parquet as they are (proleptic Gregorian, like MySQL)
    rather than refuse them: Spark's default (``EXCEPTION``) fails a write of any date
    before 1582-10-15, and MySQL's DATE goes back to 1000-01-01. A mode the session set
    on purpose (``LEGACY``, ``CORRECTED``) is kept."""
    for key in PARQUET_REBASE:
        if str(spark.conf.get(key, "EXCEPTION")).upper() == "EXCEPTION":
            spark.conf.set(key, "CORRECTED")
