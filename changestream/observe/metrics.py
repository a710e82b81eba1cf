"""The router's Prometheus metrics, in a registry of its own (two routers in one process do
not clash; nothing lands in ``prometheus_client``'s global registry).

Measured per batch, never per change: the Sink actor reports each batch it delivered with
:meth:`RouterMetrics.batch_delivered`; the counts and gauges of ``Router.status()`` are read
when the registry is collected (a scrape of ``GET /metrics``). The observations are kept
here and ``prometheus_client`` is imported only when the registry is first asked for: a run
that serves no metrics does not pay its imports at start.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

TableCounts = dict[tuple[str, str, str], int]
"""Changes by ``(database, table, op)``."""

# Seconds. A batch is usually milliseconds (a file) to seconds (a table format's commit).
BATCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                 10.0, 30.0, 60.0)
# Seconds. Caught up, the lag is the batch's age (up to batch.max_seconds) plus the write;
# catching up on an old binlog it is hours.
LAG_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
               21600.0, 86400.0)

# name, type, help, key of Router.status()
_STATUS_METRICS = (
    ("changestream_connected", "gauge", "1 while connected to the source", "connected"),
    ("changestream_paused", "gauge", "1 while paused", "paused"),
    ("changestream_seconds_behind_source", "gauge",
     "seconds the reader is behind the server (0 when caught up)", "seconds_behind"),
    ("changestream_transactions_delivered_total", "counter",
     "committed transactions delivered to the sink", "transactions_delivered"),
    ("changestream_changes_delivered_total", "counter", "changes delivered to the sink",
     "changes_delivered"),
    ("changestream_batches_delivered_total", "counter", "batches the sink made durable",
     "batches_delivered"),
    ("changestream_batch_retries_total", "counter", "batches the sink failed and retried",
     "batch_retries"),
    ("changestream_reconnects_total", "counter", "reconnections to the source",
     "reconnects"),
    ("changestream_events_read_total", "counter", "binlog events read", "events_read"),
    ("changestream_refills_total", "counter",
     "tables read again because a DDL gave their rows values no row event carries",
     "refills"),
    ("changestream_refills_skipped_total", "counter",
     "such DDL whose table was not read again (snapshot.refill off, binlog files, no key)",
     "refills_skipped"),
    ("changestream_worker_segments_total", "counter",
     "segments of transactions handed to decode workers", "worker_segments"),
    ("changestream_uptime_seconds", "gauge", "seconds since the router started",
     "uptime_seconds"),
)


# The snapshot's progress (while one runs in the router's process).
_SNAPSHOT_METRICS = (
    ("changestream_snapshot_tables_done", "tables the snapshot has delivered", "tables_done"),
    ("changestream_snapshot_tables", "tables the snapshot reads", "tables_total"),
    ("changestream_snapshot_chunks", "chunks the snapshot has delivered", "chunks"),
    ("changestream_snapshot_rows", "rows the snapshot has delivered", "rows"),
    ("changestream_snapshot_rows_estimated", "the server's estimate of the snapshot's rows",
     "rows_estimated"),
)


class _Histogram:
    """Observations in cumulative buckets, as a Prometheus histogram keeps them."""

    def __init__(self, buckets: tuple[float, ...]):
        self.bounds = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def family(self, name: str, help_text: str) -> Metric:
        from prometheus_client.core import HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        cumulative, buckets = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += count
            buckets.append((floatToGoString(bound), cumulative))
        return HistogramMetricFamily(name, help_text, buckets=buckets, sum_value=self.sum)


_BATCH_DURATION = ("changestream_batch_duration_seconds",
                   "seconds the sink adapter took to make a batch durable (retries included)")
_DELIVERY_LAG = ("changestream_delivery_lag_seconds",
                 "seconds from the commit on the source of a batch's last transaction to the "
                 "sink making the batch durable (one observation per batch)")
_TABLE_CHANGES = ("changestream_table_changes_delivered",
                  "changes delivered to the sink, by database, table and op")


class RouterMetrics:
    """A router's metrics: histograms and per-table counters it observes, and its status
    (once :meth:`expose_status` is given it) read at each collection."""

    def __init__(self) -> None:
        self.batch_duration = _Histogram(BATCH_BUCKETS)
        self.delivery_lag = _Histogram(LAG_BUCKETS)
        self.table_changes: TableCounts = {}
        self._status: Callable[[], dict[str, Any]] | None = None
        self._registry: CollectorRegistry | None = None
        self._lock = threading.Lock()

    @property
    def registry(self) -> CollectorRegistry:
        """The registry these metrics are collected from (made at the first call)."""
        with self._lock:
            if self._registry is None:
                from prometheus_client import CollectorRegistry

                self._registry = CollectorRegistry()
                self._registry.register(_ObservedCollector(self))
                if self._status is not None:
                    self._registry.register(_StatusCollector(self._status))
            return self._registry

    def expose_status(self, status: Callable[[], dict[str, Any]]) -> None:
        """Collect the gauges and counters of ``status()`` (``Router.status``) with the rest."""
        with self._lock:
            self._status = status
            if self._registry is not None:
                self._registry.register(_StatusCollector(status))

    def batch_delivered(self, seconds: float, lag: float | None, tables: TableCounts) -> None:
        """One batch made durable in ``seconds``, ``lag`` seconds after its last transaction
        committed (``None``: no commit time known), with ``tables``' changes."""
        with self._lock:
            self.batch_duration.observe(seconds)
            if lag is not None:
                # Commit times are the source's clock (MariaDB's to the second): a clock ahead
                # of ours would make the lag negative, which is no lag.
                self.delivery_lag.observe(max(0.0, lag))
            counts = self.table_changes
            for key, count in tables.items():
                counts[key] = counts.get(key, 0) + count

    def observed(self) -> list[Metric]:
        """The histograms and per-table counters as metric families (a consistent copy)."""
        from prometheus_client.core import CounterMetricFamily

        with self._lock:
            changes = CounterMetricFamily(*_TABLE_CHANGES, labels=["database", "table", "op"])
            for key, count in self.table_changes.items():
                changes.add_metric(list(key), float(count))
            return [self.batch_duration.family(*_BATCH_DURATION),
                    self.delivery_lag.family(*_DELIVERY_LAG), changes]

    def text(self) -> bytes:
        """Everything in the Prometheus text exposition format (0.0.4)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _ObservedCollector:
    """What :class:`RouterMetrics` observed, read when collected."""

    def __init__(self, metrics: RouterMetrics):
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return iter(self.metrics.observed())


def count_tables(parts: Iterable[Any]) -> TableCounts:
    """Changes of a batch's parts by ``(database, table, op)``: a decode worker's encoded run
    brings its counts (``tables``), a transaction part's changes are counted here."""
    counts: TableCounts = {}
    get = counts.get
    for part in parts:
        changes = getattr(part, "changes", None)
        if isinstance(changes, list):
            for change in changes:
                key = (change.database or "", change.table or "", change.op)
                counts[key] = get(key, 0) + 1
        else:
            for key, count in (getattr(part, "tables", None) or {}).items():
                counts[key] = get(key, 0) + count
    return counts


class _StatusCollector:
    """The router's status as metrics, read when collected."""

    def __init__(self, status: Callable[[], dict[str, Any]]):
        self.status = status

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        status = self.status()
        for name, kind, help_text, key in _STATUS_METRICS:
            value = status.get(key)
            if value is None:
                continue
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, help_text, value=float(value))
        depths = GaugeMetricFamily("changestream_queue_depth",
                                   "messages in flight between the router's stages",
                                   labels=["queue"])
        for queue, depth in (status.get("queue_depths") or {}).items():
            depths.add_metric([queue], depth)
        yield depths
        position = status.get("delivered_position")
        if position:
            offset = GaugeMetricFamily(
                "changestream_delivered_position_offset",
                "binlog offset after the last delivered transaction", labels=["file"])
            offset.add_metric([position["file"]], position["pos"])
            yield offset
        verify = status.get("verify")
        if verify:
            yield CounterMetricFamily("changestream_verify_tables_total",
                                      "table verifications done (docs/verify.md)",
                                      value=verify["runs"])
            differ = GaugeMetricFamily(
                "changestream_verify_differences",
                "rows that differed from the source in the table's last verification",
                labels=["table"])
            rows = GaugeMetricFamily("changestream_verify_rows",
                                     "rows compared in the table's last verification",
                                     labels=["table"])
            for table, report in verify["tables"].items():
                differ.add_metric([table], report["differences"])
                rows.add_metric([table], report["rows"])
            yield differ
            yield rows
        standby = status.get("standby")
        if standby:
            yield GaugeMetricFamily("changestream_standby_writer", "1 while this standby "
                                    "router holds the job's lease and writes, else 0",
                                    value=1.0 if standby["role"] == "writer" else 0.0)
            yield GaugeMetricFamily("changestream_lease_epoch", "the epoch of the job's "
                                    "lease this router holds (0: none)",
                                    value=float(standby["epoch"] or 0))
        if status.get("server"):
            server = GaugeMetricFamily("changestream_source_server", "1 for the server of "
                                       "the source's set the router reads", labels=["server"])
            server.add_metric([str(status["server"])], 1.0)
            yield server
        tables = status.get("tables") or {}
        yield GaugeMetricFamily("changestream_tables_added", "tables added to the delivered "
                                "set while running", value=float(len(tables.get("added", ()))))
        yield GaugeMetricFamily("changestream_tables_paused", "tables paused while running",
                                value=float(len(tables.get("paused", ()))))
        history = status.get("schema_history")
        if history:
            yield GaugeMetricFamily("changestream_schema_history_tables",
                                    "tables the schema history knows at the read position",
                                    value=history["tables"])
            yield CounterMetricFamily("changestream_schema_history_ddl_applied",
                                      "DDL statements the schema history applied",
                                      value=history["ddl_applied"])
        snapshot = status.get("snapshot")
        if snapshot:
            for name, help_text, key in _SNAPSHOT_METRICS:
                yield GaugeMetricFamily(name, help_text, value=float(snapshot[key] or 0))
