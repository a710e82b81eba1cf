"""The Spark sink: batches as DataFrames per table, landed by a callback, as a Parquet
changelog, or as Iceberg changelog and mirror tables (see docs/sinks.md)."""

from .sink import MODES, BatchInfo, LandedBatch, SparkSink, spark_sink

__all__ = ["MODES", "BatchInfo", "LandedBatch", "SparkSink", "spark_sink"]
