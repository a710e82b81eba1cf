"""Column names for files that do not log them (``binlog_row_metadata=MINIMAL``).

As with ``--source file://``, the names come from a schema history learnt from the files'
DDL, replayed on a shadow server. Units are decoded apart on the executors, where no shadow
runs: so the driver reads every file's QUERY events once, in order, replays their DDL and
records what each changed and where (:func:`record_history`); each unit's task gets the
state at its start and the changes inside it (:class:`UnitNames`). Rows of a table the files
never create stop the backfill with the table and the file named."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field, replace
from pathlib import Path
from typing import Any, cast

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import (
    EventHeader,
    FormatDescriptionEvent,
    QueryEvent,
    TableMapEvent,
    TransactionPayloadEvent,
)
from changestream.decoding.table_schema import TableSchema
from changestream.devserver import ServerNotAvailableError, ServerStartError
from changestream.model.changes import binlog_name, binlog_order
from changestream.model.errors import ConfigError
from changestream.model.record import record
from changestream.schema.column_info import ColumnInfo
from changestream.schema.history import SchemaChangeSet, SchemaHistory, SchemaState
from changestream.schema.shadow import ShadowServer, ShadowSettings
from changestream.schema.startup import catch_up
from changestream.schema.tracker import SchemaTracker
from changestream.sources.files import read_raw_events

from .planning import BackfillUnit

log = logging.getLogger("changestream.backfill")


def files_flavor_and_names(paths: Iterable[str]) -> tuple[str, bool]:
    """The files' flavour ("mysql" or "mariadb", from the first FORMAT_DESCRIPTION) and
    whether every file's first TABLE_MAP logs column names (``True`` also for files
    without rows). Only the start of each file is read."""
    flavor = ""
    named = True
    for path in paths:
        decoder = EventDecoder()
        for raw in read_raw_events(Path(path)):
            if raw is None:
                continue
            event = decoder.decode(raw.data, raw.file, raw.offset)
            if isinstance(event, FormatDescriptionEvent) and not flavor:
                flavor = "mariadb" if event.is_mariadb else "mysql"
            inner = event.events if isinstance(event, TransactionPayloadEvent) else [event]
            maps = [e for e in inner if isinstance(e, TableMapEvent)]
            if maps:
                named = named and maps[0].schema.names_logged
                break
    return flavor or "mysql", named


@record
class RecordedHistory:
    """What the DDL of the files changed, in binlog order, from an empty state."""

    flavor: str
    changes: list[SchemaChangeSet] = field(default_factory=list)

    def for_unit(self, unit: BackfillUnit) -> UnitNames:
        """The state at ``unit``'s start and the changes inside it."""
        start = binlog_order(unit.name, unit.start)
        end = binlog_order(unit.name, unit.end) if unit.end is not None else None
        state = SchemaState()
        inside = []
        for change in self.changes:
            at = binlog_order(change.file, change.pos)
            if at <= start:
                state.apply(change)
            elif (end is None and _same_file(change.file, unit.name)) or \
                    (end is not None and at <= end):
                inside.append(change)
        return UnitNames(self.flavor, state, inside)


def _same_file(a: str, b: str) -> bool:
    return binlog_order(a, 0)[:2] == binlog_order(b, 0)[:2]


def record_history(paths: list[str], flavor: str, shadow_server: str | None = None,
                   scope: Callable[[str], bool] | None = None) -> RecordedHistory:
    """Replay the DDL of the files ``paths`` (in binlog order) on a shadow server and
    record what each statement changed. Raises :class:`ConfigError` when no shadow server
    of ``flavor`` can run."""
    try:
        shadow = ShadowServer(ShadowSettings(flavor, shadow_server, 0, None))
    except (ServerNotAvailableError, ServerStartError) as exc:
        raise ConfigError(
            f"the files do not log column names (binlog_row_metadata=MINIMAL): naming them "
            f"takes a {flavor} server program on this host for the schema history's shadow "
            f"server ({exc}); install one or pass --shadow-server") from None
    try:
        history = SchemaHistory(flavor, SchemaState(), origin="binlog")
        tracker = SchemaTracker(history, shadow, scope, lenient=True)
        catch_up(tracker, _queries(paths))
        # Every change is still pending: nothing was delivered (stored_at folds them).
        return RecordedHistory(flavor, [replace(c, file=binlog_name(c.file))
                                        for c in history._pending])
    finally:
        shadow.close()


def _queries(paths: list[str]) -> Iterator[QueryEvent]:
    """The QUERY events of the files ``paths``, in order; no other event is decoded."""
    for path in paths:
        decoder = EventDecoder()
        for raw in read_raw_events(Path(path)):
            if raw is None:
                continue
            kind = raw.data[4]
            if kind in (et.FORMAT_DESCRIPTION, et.QUERY, et.MARIADB_QUERY_COMPRESSED):
                event = decoder.decode(raw.data, raw.file, raw.offset)
                if isinstance(event, QueryEvent):
                    yield event


@record
class _HistoryOnly:
    """What :class:`ColumnInfo` reads of a tracker: its history (no DDL is applied
    through it; the recorded changes are)."""

    history: SchemaHistory


@record
class UnitNames:
    """The schema history one unit needs: the state at its start, the changes inside it."""

    flavor: str
    state: SchemaState
    changes: list[SchemaChangeSet]

    def resolver(self) -> NamesAtPosition:
        """What names each TABLE_MAP's columns as the table stood at the event's place."""
        return NamesAtPosition(self)


class NamesAtPosition:
    """An :class:`EventDecoder` ``schema_resolver`` for one unit (see :class:`UnitNames`).
    The reader calls :meth:`advance` before each event: when it returns ``True`` a DDL took
    effect, and the decoder's cached table maps must be forgotten (a MINIMAL TABLE_MAP of a
    renamed column has the same bytes as before)."""

    def __init__(self, names: UnitNames):
        self.history = SchemaHistory(names.flavor, names.state.copy(), origin="binlog")
        self._pending = sorted(names.changes, key=lambda c: binlog_order(c.file, c.pos))
        tracker: Any = _HistoryOnly(self.history)
        self._info = ColumnInfo(None, cast(SchemaTracker, tracker),
                                mariadb=names.flavor == "mariadb", positional_fallback=True)

    def advance(self, file: str, offset: int) -> bool:
        """Apply the changes made before ``file``:``offset``; whether there were any."""
        pending = self._pending
        if not pending:
            return False
        at = binlog_order(binlog_name(file), offset)
        applied = False
        while pending and binlog_order(pending[0].file, pending[0].pos) <= at:
            self.history.record(pending.pop(0))
            applied = True
        return applied

    def __call__(self, schema: TableSchema, header: EventHeader | None) -> TableSchema:
        if header is None:
            raise ValueError("a unit's names are resolved at the place a TABLE_MAP was read")
        self.advance(header.file or "", header.offset)
        return self._info.resolve(schema, header)
