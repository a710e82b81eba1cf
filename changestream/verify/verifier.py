"""One table verified against its mirror (see the package docstring)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any, Protocol

from changestream.decoding.table_schema import TableSchema
from changestream.model.changes import Position, binlog_order
from changestream.model.errors import ConfigError, SinkError
from changestream.model.record import record
from changestream.runtime.settings import RouterSettings
from changestream.snapshot.reader import ChunkReader, TablePlan
from changestream.sources.source_url import parse_source_url
from changestream.sources.tls import open_connection
from changestream.verify.changed_keys import ChangedKeys, Order

log = logging.getLogger("changestream")

Key = tuple[Any, ...]
Row = dict[str, Any]


class MirrorTarget(Protocol):
    """What a sink offers the verifier: where it has landed to, and its mirror's rows."""

    def landed_to(self) -> Position | None:
        """The position everything before which is in the sink (``None``: nothing yet)."""

    def mirror_rows(self, schema: TableSchema, key: tuple[str, ...], rows: list[Row]
                    ) -> tuple[dict[Key, Row], dict[Key, Row], Position | None]:
        """For source rows ``rows`` (decoder values) of table ``schema`` with key columns
        ``key``: those rows in the sink's own representation, the mirror's rows of the same
        keys (read at one of its states), both by key (in the decoder's values), and the
        position that state holds (``None``: no position)."""

    def mirror_keys(self, schema: TableSchema, key: tuple[str, ...]
                    ) -> tuple[set[Key], Position | None]:
        """Every key the mirror holds now (as it holds them), and its position."""

    def landed_keys(self, schema: TableSchema, key: tuple[str, ...],
                    keys: Iterable[Key]) -> set[Key]:
        """Keys given in the decoder's values, as the mirror holds them."""


@record(frozen=True)
class Difference:
    """A key whose row differs: ``missing`` from the mirror, ``extra`` in the mirror (the
    source has no such row), or ``differs`` in ``columns``."""

    key: Key
    kind: str
    columns: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"key": [_plain(v) for v in self.key], "kind": self.kind,
                "columns": list(self.columns)}


@record
class VerifyReport:
    """What verifying one table found."""

    table: str
    rows: int = 0  # source rows compared
    chunks: int = 0
    left_out: int = 0  # keys changed while compared (either side may be the newer)
    chunks_left_out: int = 0  # read across a DDL of the table
    differences: list[Difference] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "rows": self.rows, "chunks": self.chunks,
                "left_out": self.left_out, "chunks_left_out": self.chunks_left_out,
                "differences": len(self.differences),
                "keys": [d.as_dict() for d in self.differences], "seconds": self.seconds}


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return value if isinstance(value, int | float | str | type(None)) else str(value)


def compare(source: dict[Key, Row], mirror: dict[Key, Row],
            left_out: set[Key]) -> list[Difference]:
    """The keys of ``source`` (rows in the sink's representation) whose mirror row is
    missing or differs, but those in ``left_out``."""
    out = []
    for key, row in source.items():
        if key in left_out:
            continue
        held = mirror.get(key)
        if held is None:
            out.append(Difference(key, "missing"))
            continue
        columns = tuple(name for name, value in row.items() if held.get(name) != value)
        if columns:
            out.append(Difference(key, "differs", columns))
    return out


class Verifier:
    """Verifies tables of ``settings``' source (a server) against ``target``: chunks of
    ``chunk_rows`` rows, waiting up to ``timeout`` seconds for the sink (or the follower)
    to get past a chunk; at most ``report_limit`` differences kept per table."""

    def __init__(self, settings: RouterSettings, target: MirrorTarget,
                 chunk_rows: int = 10_000, timeout: float = 300.0,
                 report_limit: int = 1000, stopping: Callable[[], bool] = lambda: False):
        spec = parse_source_url(settings.source, password=settings.password)
        if spec.kind != "server":
            raise ConfigError("verify: the source must be a server (binlog files hold no "
                              "table to compare with)")
        spec.connection.update(settings.tls)
        self.settings = settings
        self.connection = spec.connection
        self.target = target
        self.chunk_rows = chunk_rows
        self.timeout = timeout
        self.report_limit = report_limit
        self.stopping = stopping

    def _connect(self, **extra: Any) -> Any:
        return open_connection(connect_timeout=10, **{**self.connection, **extra})

    def verify(self, name: str) -> VerifyReport:
        """Verify table ``name`` (``db.table``)."""
        database, dot, table = name.partition(".")
        if not dot or not table:
            raise ConfigError(f"verify: {name!r} is not DATABASE.TABLE")
        began = time.monotonic()
        report = VerifyReport(name)
        reader = ChunkReader(self._connect, self.chunk_rows)
        try:
            plan = reader.plan(database, table)
            if plan is None:
                raise ConfigError(f"verify: the source has no table {name}")
            if plan.query is None:
                raise ConfigError(f"verify: {name} has no primary key or NOT NULL unique "
                                  "key to compare its rows by")
            start = reader.head()
            changed = ChangedKeys(self.settings, database, table, plan.key, start)
            try:
                seen = self._chunks(reader, plan, changed, report)
                if not self.stopping():
                    self._extra_rows(reader, plan, changed, binlog_order(*start), seen,
                                     report)
            finally:
                changed.stop()
        finally:
            reader.close()
        report.seconds = round(time.monotonic() - began, 3)
        return report

    def _chunks(self, reader: ChunkReader, plan: TablePlan, changed: ChangedKeys,
                report: VerifyReport) -> set[Key]:
        """Compare chunk after chunk; the source's keys seen."""
        seen: set[Key] = set()
        after = None
        while not self.stopping():
            low = reader.head()
            chunk = reader.read(plan, after, low)
            rows = dict(chunk.rows)
            seen |= rows.keys()
            self._wait_for_sink(chunk.high, changed)
            source, mirror, position = self.target.mirror_rows(
                plan.schema, plan.key, list(rows.values()))
            bound = max(binlog_order(*chunk.high), _order(position))
            changed.wait_past(bound, self.timeout)
            keys, ddl = changed.between(binlog_order(*low), bound)
            report.chunks += 1
            if ddl:
                report.chunks_left_out += 1
            else:
                left_out = keys & rows.keys()
                report.left_out += len(left_out)
                report.rows += len(rows) - len(left_out)
                self._found(report, compare(source, mirror, left_out))
            changed.forget_before(binlog_order(*low))
            if chunk.done:
                break
            after = chunk.last_key
        return seen

    def _extra_rows(self, reader: ChunkReader, plan: TablePlan, changed: ChangedKeys,
                    start: Order, seen: set[Key], report: VerifyReport) -> None:
        """Keys the mirror holds that no chunk had and the binlog did not change: read once
        the sink holds the table as of now (a row deleted at the source before its chunk
        was read is gone from the mirror by then)."""
        head = reader.head()
        self._wait_for_sink(head, changed)
        keys, position = self.target.mirror_keys(plan.schema, plan.key)
        bound = max(binlog_order(*head), _order(position))
        changed.wait_past(bound, self.timeout)
        touched, _ = changed.between(start, bound)
        landed = self.target.landed_keys(plan.schema, plan.key, seen | touched)
        extra = sorted(keys - landed, key=repr)
        self._found(report, [Difference(k, "extra") for k in extra])

    def _found(self, report: VerifyReport, found: Iterable[Difference]) -> None:
        for difference in found:
            if len(report.differences) < self.report_limit:
                report.differences.append(difference)

    def _wait_for_sink(self, high: tuple[str, int], changed: ChangedKeys) -> None:
        """Until the sink holds the table as of ``high``: it has landed everything up to
        there, or up to a position after which the binlog did not change the table (a
        sink moves its position only with batches that hold changes)."""
        target = binlog_order(*high)
        deadline = time.monotonic() + self.timeout
        while not self.stopping():
            landed = self.target.landed_to()
            at = _order(landed)
            if at >= target:
                return
            # (only from where the follower began: before it, changes are not known)
            if changed.read_to() >= target and at >= changed.start:
                keys, ddl = changed.between(at, target)
                if not keys and not ddl:
                    return
            if time.monotonic() > deadline:
                raise SinkError(
                    f"verify: the sink has not landed up to {high[0]}:{high[1]} within "
                    f"{self.timeout:.0f} s (it holds {landed or 'nothing'}): is the router "
                    "running?")
            time.sleep(0.2)


def _order(position: Position | None) -> Order:
    return binlog_order(position.file, position.pos) if position is not None and \
        position.file else ("", 0, 0)
