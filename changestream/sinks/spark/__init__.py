"""The Spark sink: batches as DataFrames per table, landed by a callback, as a Parquet
changelog, or as Iceberg changelog and mirror tables (see docs/sinks.md).

The sink's names are imported when first used, so that the modules that need neither
PySpark nor PyArrow (positions, defaults) import without them."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MODES", "BatchInfo", "CallbackSparkSink", "IcebergSparkSink", "LandedBatch",
           "ParquetSparkSink", "SparkSink", "spark_sink"]

_HOMES = {"CallbackSparkSink": "callback", "ParquetSparkSink": "parquet_sink",
          "IcebergSparkSink": "iceberg.sink"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES.get(name, 'sink')}"), name)
    globals()[name] = value
    return value
