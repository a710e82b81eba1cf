"""A router's settings: everything it needs besides its sink adapter, from the
configuration (see config/ for each key) or given directly by a program that embeds it."""

from __future__ import annotations

import logging
import os
from dataclasses import field
from typing import Any

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.adapter import capabilities_of
from changestream.model.errors import ConfigError
from changestream.model.record import record
from changestream.model.setting import check_key, default_of
from changestream.parallel.decode_workers import DecodeWorkers, WorkerSettings
from changestream.runtime.config import Config
from changestream.runtime.config_sections import (
    FailoverConfig,
    SourceConfig,
    StandbyConfig,
    TransactionsConfig,
)
from changestream.runtime.heartbeat import HeartbeatSettings
from changestream.schema.history_settings import HistorySettings
from changestream.snapshot.settings import SnapshotSettings
from changestream.sources.live import StartPosition
from changestream.sources.tls import tls_options
from changestream.transactions.filters import ChangeFilter

log = logging.getLogger("changestream")


@record
class RouterSettings:
    """Everything the router needs besides its sink adapter (see config/ for each key)."""

    source: str
    start: str = ""  # "": unset (the head after a snapshot, else "earliest")
    until: str | None = None
    position_file: str | None = None
    position_override: str | None = None
    password: str | None = None
    # The defaults of the keys a configuration file has too are its sections' own.
    server_id: int = default_of(SourceConfig, "server_id")
    heartbeat_seconds: float = default_of(SourceConfig, "heartbeat_seconds")
    reconnect_seconds: float = default_of(SourceConfig, "reconnect_seconds")
    batch: BatchSettings = field(default_factory=BatchSettings)
    filter: ChangeFilter = field(default_factory=ChangeFilter)
    max_buffered_changes: int = default_of(TransactionsConfig, "max_buffered_changes")
    spill_dir: str | None = None
    include_sql: bool = default_of(TransactionsConfig, "include_sql")
    decode_workers: int = default_of(SourceConfig, "decode_workers")
    decode_workers_wait: bool = default_of(SourceConfig, "decode_workers_wait")
    batch_events: int = 2_000
    message_changes: int = 5_000
    in_flight: int = 4
    schema_from_server: bool = default_of(SourceConfig, "schema_from_server")
    schema: HistorySettings = field(default_factory=HistorySettings)
    verify_checksums: bool = default_of(SourceConfig, "verify_checksums")
    # PyMySQL's TLS options (changestream.sources.tls.tls_options); none: TLS when the
    # server offers it.
    tls: dict[str, Any] = field(default_factory=dict)
    snapshot: SnapshotSettings = field(default_factory=SnapshotSettings)
    heartbeat: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    # Moving between the servers of the source's set ([failover]).
    failover: FailoverConfig = field(default_factory=FailoverConfig)
    # A standby router (standby.enabled): writes only while it holds the job's lease.
    standby: bool = default_of(StandbyConfig, "enabled")
    lease_seconds: float = default_of(StandbyConfig, "lease_seconds")

    @classmethod
    def from_config(cls, config: Config) -> RouterSettings:
        """The router's settings from a loaded :class:`~changestream.runtime.config.Config`."""
        s, b = config.source, config.batch
        return cls(
            source=s.url, start=config.start.at, until=config.start.until or None,
            position_file=config.start.position_file or None,
            position_override=config.start.position_override or None,
            password=config.password(), server_id=s.server_id,
            heartbeat_seconds=s.heartbeat_seconds, reconnect_seconds=s.reconnect_seconds,
            batch=b,
            filter=ChangeFilter(config.filter.include, config.filter.exclude,
                                config.filter.exclude_columns),
            max_buffered_changes=config.transactions.max_buffered_changes,
            spill_dir=config.transactions.spill_dir or None,
            include_sql=config.transactions.include_sql,
            decode_workers=s.decode_workers, decode_workers_wait=s.decode_workers_wait,
            schema_from_server=s.schema_from_server,
            schema=config.schema,
            verify_checksums=s.verify_checksums,
            tls=tls_options(s.tls),
            snapshot=config.snapshot,
            heartbeat=config.heartbeat,
            failover=config.failover,
            standby=config.standby.enabled, lease_seconds=config.standby.lease_seconds)

    def __post_init__(self) -> None:
        if self.until not in (None, "caught-up"):
            raise ConfigError(f"until: {self.until!r} is not 'caught-up'")
        try:
            StartPosition.parse(self.start or "earliest")
        except ValueError as exc:
            raise ConfigError(f"start: {exc}") from None
        for name, (section, key, prefix) in _SECTION_KEYS.items():
            check_key(section, key, getattr(self, name), prefix)


# The settings a configuration file has too: their section, key, and the key's prefix.
_SECTION_KEYS: dict[str, tuple[type, str, str]] = {
    **{name: (SourceConfig, name, "source.") for name in (
        "server_id", "heartbeat_seconds", "reconnect_seconds", "decode_workers")},
    "max_buffered_changes": (TransactionsConfig, "max_buffered_changes", "transactions."),
    "lease_seconds": (StandbyConfig, "lease_seconds", "standby."),
}


def sink_options(config: Config) -> dict[str, Any]:
    """Keyword arguments for the configured sink's factory."""
    options = dict(config.sink.options)
    if config.sink.spec.split(":")[0] in ("jsonl", "stdout"):
        options.setdefault("format", config.sink.format)
    return options


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's cpuset, ``taskset``),
    else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def decode_workers_for(settings: RouterSettings, sink: Any,
                       run_changes: int = 5_000) -> DecodeWorkers | None:
    """Worker processes for plain DML transactions, when the sink takes encoded records
    (``decode_workers``: how many; -1: one per usable CPU less the CPUs the sink's own
    writing takes, its ``writer_cpus``, at least one, on a single CPU too; none for
    ``snapshot.mode = initial-only``); they answer in runs of about ``run_changes`` changes
    (no bigger than a batch)."""
    if settings.decode_workers < 0 and settings.snapshot.mode == "initial-only":
        # A run that ends with its snapshot: its stream lasts only as long as the snapshot
        # (whose tables are decoded here anyway), and the workers' start, a new interpreter
        # each, would take CPU from the snapshot's reading.
        return None
    capabilities = capabilities_of(sink)
    record_format = capabilities.encoded_format
    # One at least, on a single CPU too: a worker's compiled walk beside the router's
    # process beats the router's own general path there (docs/performance.md).
    count = settings.decode_workers if settings.decode_workers >= 0 else \
        max(1, usable_cpus() - capabilities.writer_cpus)
    if not record_format or count == 0:
        return None
    log.info("decoding plain DML transactions in %d worker processes", count)
    return DecodeWorkers(count, WorkerSettings(
        None if settings.filter.everything else settings.filter, settings.include_sql,
        record_format, settings.verify_checksums, settings.max_buffered_changes,
        settings.spill_dir), run_changes,
        decode_here_while_starting=not settings.decode_workers_wait)
