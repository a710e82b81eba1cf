"""What every Spark sink shares: its session (one it is given, or one it starts and stops),
its declared capabilities and the report of its last batch."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changestream.delivery.adapter import SinkCapabilities
from changestream.model.changes import Position
from changestream.model.errors import SinkError
from changestream.model.record import record

from .options import class_cache, flag
from .worker_encoding import ARROW_FRAMES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Each Spark write has a fixed cost (a job, files, a commit): bigger batches land more
#: rows per second; the batch time limit still bounds the delay.
BATCH_CHANGES = 250_000
BATCH_BYTES = 64 << 20


@record
class BatchInfo:
    """What a callback learns about a batch besides its DataFrames."""

    id: int
    position: Position | None
    transactions: int
    changes: int
    rows: dict[str, int]
    ddl: list[str] = field(default_factory=list)


@record
class LandedBatch:
    """What the sink did with the last batch (for metrics and tests)."""

    id: int
    rows: dict[str, int]
    seconds: float
    skipped: bool = False
    stages: dict[str, float] = field(default_factory=dict)  # seconds per landing stage


def plugin_keys_last(conf: Mapping[str, str]) -> list[str]:
    """``conf``'s keys with each catalog's own key (``spark.sql.catalog.NAME``) after its
    options (``spark.sql.catalog.NAME.*``).

    Spark builds a catalog on its first lookup and keeps it for the session: a lookup from
    another thread between the class key and the options would build and keep the catalog
    without them (an Iceberg catalog with no ``type`` is a Hive one)."""
    return sorted(conf, key=lambda key: any(other.startswith(key + ".") for other in conf))


class SparkSinkBase:
    """The session and options every Spark sink has (see :func:`~.sink.SparkSink`):
    ``spark`` is a session to use, else one is started (``master``, default
    ``local[N]``; ``conf`` passed through) and stopped on ``close``; ``arrow_workers``
    has the decode workers hand plain transactions over as Arrow frames;
    ``jvm_class_cache`` is where the started JVM's class-data archives go."""

    mode = ""
    #: Keywords a product takes through ``**settings`` besides its signature's (its own
    #: options object's, as the configuration gives them).
    option_keywords: tuple[str, ...] = ()

    def __init__(self, *, master: str | None = None, conf: Mapping[str, Any] | None = None,
                 spark: SparkSession | None = None, app_name: str = "changestream",
                 arrow_workers: bool | str = True,
                 jvm_class_cache: str | os.PathLike[str] | bool | None = None):
        self.master = master
        self.conf = dict(conf or {})
        self.app_name = app_name
        self.spark = spark
        self._owns_session = spark is None
        self.last: LandedBatch | None = None
        # Class-data-sharing archives for the JVM the sink starts (None: not used).
        self.class_cache: Path | None = class_cache(jvm_class_cache)
        self.capabilities = SinkCapabilities(
            batch_changes=BATCH_CHANGES, batch_bytes=BATCH_BYTES,
            # The router leaves a CPU to the sink's writing (Parquet encoding, the JVM's
            # commits) when it sizes its decode workers: on 2 CPUs, workers on both
            # starved the writer.
            writer_cpus=1,
            # Plain transactions come decoded by the router's decode workers, as Arrow
            # frames (changestream.sinks.spark.frames.encode_runs).
            encoded_format=ARROW_FRAMES if flag("arrow_workers", arrow_workers) else None)

    def _open_session(self, catalog_conf: dict[str, str], jars: list[Path] | None) -> None:
        """Start the session (with ``catalog_conf`` and ``jars``), or check and set
        ``catalog_conf`` on the one given."""
        from .session import require_utc, start_session

        if self.spark is None:
            self.spark = start_session(self.master, {**catalog_conf, **self.conf}, jars,
                                       self.app_name, class_cache=self.class_cache)
            self._owns_session = True
        else:
            for key, value in catalog_conf.items():
                current = self.spark.conf.get(key, None)
                if current not in (None, value):
                    # Spark builds a catalog once per session: a new warehouse needs a new name.
                    raise SinkError(f"spark sink: this Spark session has {key}={current}; "
                                    f"pass another catalog= for {value}")
            for key in plugin_keys_last(catalog_conf):
                self.spark.conf.set(key, catalog_conf[key])
        require_utc(self.spark)

    @property
    def session(self) -> SparkSession:
        """The open sink's Spark session."""
        if self.spark is None:
            raise SinkError("the Spark sink is not open")
        return self.spark

    def _before_stop(self) -> None:
        """What a sink does in its own session's JVM before stopping it (nothing here)."""

    def close(self) -> None:
        if self.spark is not None and self._owns_session:
            from .jvm.stop import stop_session

            self._before_stop()
            stop_session(self.spark)
            self.spark = None
