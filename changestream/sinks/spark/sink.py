"""The Spark sink adapters: a batch as DataFrames per table, landed one of three ways.

``callback`` (:class:`~.callback.CallbackSparkSink`): a function gets each batch's
DataFrames, like Structured Streaming's ``foreachBatch``. ``parquet``
(:class:`~.parquet_sink.ParquetSparkSink`): an append-only changelog per table.
``iceberg`` (:class:`~.iceberg.sink.IcebergSparkSink`): changelog and mirror tables. The
two durable ones store the position with the data and return it from ``open``, so the
router resumes there (exactly once). :func:`SparkSink` makes the one a mode names.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from changestream.model.errors import SinkError

from .base import BatchInfo, LandedBatch, SparkSinkBase

__all__ = ["MODES", "BatchInfo", "LandedBatch", "SparkSink", "spark_sink"]

MODES = ("callback", "parquet", "iceberg")


def _product(mode: str) -> type[SparkSinkBase]:
    if mode == "callback":
        from .callback import CallbackSparkSink

        return CallbackSparkSink
    if mode == "parquet":
        from .parquet_sink import ParquetSparkSink

        return ParquetSparkSink
    if mode == "iceberg":
        from .iceberg.sink import IcebergSparkSink

        return IcebergSparkSink
    raise SinkError(f"spark sink: unknown mode {mode!r} (use one of {', '.join(MODES)})")


def _accepted(cls: type[SparkSinkBase]) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            init = vars(klass)["__init__"]
            names |= {p.name for p in inspect.signature(init).parameters.values()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return (names | set(cls.option_keywords)) - {"self"}


#: Every option of every mode: one a mode does not take is ignored there (a configuration
#: may name the options of several modes); any other is refused.
OPTIONS = frozenset().union(*(_accepted(_product(m)) for m in MODES))


def SparkSink(mode: str = "callback", **options: Any) -> Any:
    """The Spark sink of ``mode`` with ``options`` (see each product's docstring; the ones
    every mode takes are :class:`~.base.SparkSinkBase`'s)."""
    cls = _product(mode)
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise SinkError(f"spark sink: unknown option {', '.join(unknown)} (the options are "
                        f"{', '.join(sorted(OPTIONS))})")
    accepted = _accepted(cls)
    return cls(**{k: v for k, v in options.items() if k in accepted})


def spark_sink(argument: str | None = None, **options: Any) -> Any:
    """The factory for ``--sink spark:MODE`` (options: see :func:`SparkSink`)."""
    mode = argument or options.pop("mode", None) or "callback"
    for key in ("path", "warehouse"):
        if isinstance(options.get(key), Path):
            options[key] = str(options[key])
    return SparkSink(mode, **options)
