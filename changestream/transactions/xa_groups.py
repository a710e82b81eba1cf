"""XA transactions in the assembler: held from XA PREPARE (MySQL's XA_PREPARE event,
MariaDB's XA PREPARE statement) until XA COMMIT delivers them or XA ROLLBACK drops them;
one-phase commits delivered at once. A part of :class:`TransactionAssembler`, kept apart so
each stays readable."""

from __future__ import annotations

import datetime as dt
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from changestream.decoding.events import Event, QueryEvent, XaPrepareEvent
from changestream.decoding.statements import (
    XA_END,
    XA_PREPARE,
    XA_START,
    prepared_xid,
    xa_resolution,
)
from changestream.model.changes import TransactionInfo
from changestream.transactions.groups import Finished, Group, utc_time
from changestream.transactions.resume_point import ResumePoint

log = logging.getLogger("changestream")


class XaGroups:
    """The XA handlers of :class:`changestream.transactions.assembler.
    TransactionAssembler` (a mixin: it uses the assembler's group and output)."""

    file: str
    resume: ResumePoint
    _group: Group | None
    _held_xa: dict[str, tuple[Group, str]]
    # XA COMMIT/ROLLBACKs of transactions not seen prepared: (xid, verb, file, offset).
    unmatched_xa: list[tuple[str, str, str, int]]
    _finished: deque[Finished]

    if TYPE_CHECKING:
        def _open(self, event: Event, **fields: Any) -> Group: ...
        def _commit(self, event: Event, xid: int | str | None = None) -> None: ...
        def _finish_empty(self, event: Event, gtid: str | None) -> None: ...
        def _end_of(self, event: Event) -> int: ...
        def _info(self, group: Group, end: int, xid: int | str | None,
                  commit_ts: dt.datetime | None, gtid: str | None = None
                  ) -> TransactionInfo: ...

    def has_held(self, xid: str) -> bool:
        """Whether the XA transaction ``xid`` is prepared and held here."""
        return xid in self._held_xa

    def adopt_held(self, xid: str, other: XaGroups) -> None:
        """Take over the prepared XA transaction ``xid`` that ``other`` read (a restart
        reads each transaction still prepared at the saved position again)."""
        self._held_xa[xid] = other._held_xa.pop(xid)
        self.resume.pending_xa[xid] = self._held_xa[xid][1]

    def _xa_prepare(self, event: XaPrepareEvent) -> None:
        if self._group is None:
            return
        xid = str(event.xid)
        if event.one_phase:
            self._commit(event, xid)
        else:
            self._hold(event, xid)

    def _hold(self, event: Event, xid: str) -> None:
        group = self._group
        assert group is not None
        self._group = None
        where = f"{group.file}:{group.start}"
        self._held_xa[xid] = (group, where)
        self._finished.append(Finished(None, None, group.gtid, self.file, self._end_of(event),
                                        xa_held=(xid, where)))

    def _xa_statement(self, event: QueryEvent, kind: str) -> None:
        group = self._group
        if kind == XA_START:
            if group is None or not group.began:
                group = group or self._open(event)
                group.began = True
            return
        if kind == XA_END:
            return
        if kind == XA_PREPARE:  # MariaDB ends the prepared group with it
            if group is not None:
                self._hold(event, group.xa_id or prepared_xid(event.query))
            return
        resolution = xa_resolution(event.query)
        if resolution is None:
            return
        verb, xid, one_phase = resolution
        if group is not None and group.xa_id:
            xid = group.xa_id
        if one_phase and group is not None and group.size:
            self._commit(event, xid)
            return
        held = self._held_xa.pop(xid, None)
        gtid = group.gtid if group is not None else None
        if held is None:
            self.unmatched_xa.append((xid, verb, event.header.file or self.file,
                                     event.header.offset))
            log.warning("XA %s of %s, which was not prepared after the start position (%s at "
                        "offset %d): nothing to deliver", verb, xid, event.header.file,
                        event.header.offset)
            self._finish_empty(event, gtid)
            return
        prepared, _where = held
        if verb == "ROLLBACK" or not prepared.size:
            prepared.discard()
            self._group = None
            self._finished.append(Finished(None, None, gtid, self.file, self._end_of(event),
                                           xa_resolved=xid))
            return
        commit_ts = (group.commit_ts if group is not None else None) or utc_time(
            event.header.timestamp)
        if gtid is not None:
            prepared.gtid = gtid
        self._group = None
        info = self._info(prepared, self._end_of(event), xid, commit_ts, gtid)
        self._finished.append(Finished(info, prepared, gtid, self.file, self._end_of(event),
                                       xa_resolved=xid))
