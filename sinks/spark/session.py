"""The Spark session an adapter lands batches with: embedded local Spark by default."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from changestream.model.errors import SinkError

logger = logging.getLogger("changestream.sinks.spark")

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def iceberg_conf(catalog: str, warehouse: str | os.PathLike[str]) -> dict[str, str]:
    """Spark settings for a Hadoop Iceberg catalog named ``catalog`` in ``warehouse``."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.type": "hadoop",
            f"{prefix}.warehouse": str(Path(warehouse).expanduser().absolute())}


def start_session(master: str | None = None, conf: Mapping[str, Any] | None = None,
                  jars: list[Path] | None = None, app_name: str = "changestream") -> Any:
    """A new Spark session: ``master`` (default ``local[N]``, N = CPUs), ``conf`` passed
    through, ``jars`` on its class path (and Iceberg's SQL extensions when given)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        raise SinkError("spark sink: a Spark session is already active in this process; "
                        "pass it as spark=SESSION (with the Iceberg jar and extensions "
                        "loaded for the iceberg mode) instead of starting another")
    builder = SparkSession.builder.master(master or f"local[{os.cpu_count() or 1}]") \
        .appName(app_name) \
        .config("spark.sql.session.timeZone", "UTC") \
        .config("spark.ui.enabled", "false") \
        .config("spark.sql.shuffle.partitions", str(max(2, os.cpu_count() or 1)))
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars)) \
            .config("spark.sql.extensions", ICEBERG_EXTENSIONS)
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    session = builder.getOrCreate()
    logger.info("spark sink: started Spark %s on %s", session.version,
                session.sparkContext.master)
    return session


def require_utc(spark: Any) -> None:
    """Timestamps are handed over as UTC instants; the session must read them so."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    if zone not in ("UTC", "Etc/UTC", "GMT", "+00:00", "Z"):
        spark.conf.set("spark.sql.session.timeZone", "UTC")


PARQUET_REBASE = ("spark.sql.parquet.datetimeRebaseModeInWrite",
                  "spark.sql.parquet.int96RebaseModeInWrite")


def proleptic_parquet(spark: Any) -> None:
    """Write dates and timestamps to Parquet as they are (proleptic Gregorian, like MySQL)
    rather than refuse them: Spark's default (``EXCEPTION``) fails a write of any date
    before 1582-10-15, and MySQL's DATE goes back to 1000-01-01. A mode the session set
    on purpose (``LEGACY``, ``CORRECTED``) is kept."""
    for key in PARQUET_REBASE:
        if str(spark.conf.get(key, "EXCEPTION")).upper() == "EXCEPTION":
            spark.conf.set(key, "CORRECTED")
