"""Where to resume after everything delivered so far: the last transaction boundary
delivered (or where reading began), the GTID set or state after it, the XA transactions
prepared but not resolved before it (where each was prepared), a snapshot's progress, and
the tables added or paused while running."""

from __future__ import annotations

from typing import Any

from changestream.model.changes import Position
from changestream.model.errors import BinlogError
from changestream.model.gtid import GtidProgress
from changestream.transactions.groups import Finished


class ResumePoint:
    """See the module docstring. ``start`` is where reading began, when known."""

    def __init__(self, gtid_set: GtidProgress | None):
        self.gtid_set = gtid_set
        self.flavor: str | None = None
        self.delivered: tuple[str, int] | None = None
        self.start: tuple[str, int] | None = None
        self.pending_xa: dict[str, str] = {}
        self.snapshot: dict[str, Any] | None = None
        self.tables: dict[str, Any] | None = None  # added/paused while running

    def advance(self, done: Finished) -> None:
        """Past a finished transaction (delivered, or with nothing to deliver)."""
        if done.gtid is not None and self.gtid_set is not None:
            try:
                self.gtid_set.add(done.gtid)
            except ValueError as exc:
                where = done.info.start if done.info is not None else done.end
                raise _misfit(exc, done.file, where) from None
        if done.xa_held is not None:
            self.pending_xa[done.xa_held[0]] = done.xa_held[1]
        if done.xa_resolved is not None:
            self.pending_xa.pop(done.xa_resolved, None)
        self.delivered = (done.file, done.end)

    def delivered_elsewhere(self, gtids: list[str], file: str, end: int) -> None:
        """Past transactions assembled elsewhere (by a decode worker)."""
        if self.gtid_set is not None:
            try:
                self.gtid_set.add_all(gtids)
            except ValueError as exc:
                raise _misfit(exc, file, end) from None
        self.delivered = (file, end)

    def position(self) -> Position:
        boundary = self.delivered or self.start
        assert boundary is not None
        file, pos = boundary
        return Position(file, pos, self.gtid_set.render() if self.gtid_set else None,
                        self.flavor, dict(self.pending_xa), snapshot=self.snapshot,
                        tables=self.tables)


def _misfit(exc: ValueError, file: str, offset: int) -> BinlogError:
    """A GTID of the other flavour's form (a MySQL GTID in a binlog whose FORMAT_DESCRIPTION
    or GTID list is MariaDB's, or the reverse), as the error that names where."""
    return BinlogError(f"a transaction's GTID does not fit the binlog's GTIDs: {exc}", file,
                       offset)
