"""XA transactions in the assembler: held from XA PREPARE (MySQL's XA_PREPARE event,
MariaDB's XA PREPARE statement) until XA COMMIT delivers them or XA ROLLBACK drops them;
one-phase commits delivered at once. An object of the assembler's (:class:`XaGroups`),
which holds the prepared transactions and works on the assembler's open group and output
through the few calls :class:`GroupOwner` names."""

from __future__ import annotations

import datetime as dt
import logging
from collections import deque
from typing import Any, Protocol

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


class GroupOwner(Protocol):
    """What :class:`XaGroups` works on: the assembler's open group (``_group``), its
    output (``_finished``), where it reads and resumes, and how it opens, commits and
    describes a group."""

    file: str
    resume: ResumePoint
    _group: Group | None
    _finished: deque[Finished]

    def _open(self, event: Event, **fields: Any) -> Group: ...
    def _commit(self, event: Event, xid: int | str | None = None) -> None: ...
    def _finish_empty(self, event: Event, gtid: str | None) -> None: ...
    def _end_of(self, event: Event) -> int: ...
    def _info(self, group: Group, end: int, xid: int | str | None,
              commit_ts: dt.datetime | None, gtid: str | None = None
              ) -> TransactionInfo: ...


class XaGroups:
    """The prepared XA transactions of ``owner`` (an assembler) and its XA handlers."""

    def __init__(self, owner: GroupOwner):
        self.owner = owner
        self.held: dict[str, tuple[Group, str]] = {}  # xid -> (group, "file:start")
        # XA COMMIT/ROLLBACKs of transactions not seen prepared: (xid, verb, file, offset).
        self.unmatched: list[tuple[str, str, str, int]] = []

    def has_held(self, xid: str) -> bool:
        """Whether the XA transaction ``xid`` is prepared and held here."""
        return xid in self.held

    def adopt_held(self, xid: str, other: XaGroups) -> None:
        """Take over the prepared XA transaction ``xid`` that ``other`` read (a restart
        reads each transaction still prepared at the saved position again)."""
        self.held[xid] = other.held.pop(xid)
        self.owner.resume.pending_xa[xid] = self.held[xid][1]

    def prepare(self, event: XaPrepareEvent) -> None:
        """MySQL's XA_PREPARE event: the open group is held (or, one-phase, committed)."""
        if self.owner._group is None:
            return
        xid = str(event.xid)
        if event.one_phase:
            self.owner._commit(event, xid)
        else:
            self._hold(event, xid)

    def _hold(self, event: Event, xid: str) -> None:
        owner = self.owner
        group = owner._group
        assert group is not None
        owner._group = None
        where = f"{group.file}:{group.start}"
        self.held[xid] = (group, where)
        owner._finished.append(Finished(None, None, group.gtid, owner.file,
                                        owner._end_of(event), xa_held=(xid, where)))

    def statement(self, event: QueryEvent, kind: str) -> None:
        """An XA statement (START, END, PREPARE, COMMIT, ROLLBACK) of kind ``kind``."""
        owner = self.owner
        group = owner._group
        if kind == XA_START:
            if group is None or not group.began:
                group = group or owner._open(event)
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
            owner._commit(event, xid)
            return
        held = self.held.pop(xid, None)
        gtid = group.gtid if group is not None else None
        end = owner._end_of(event)
        if held is None:
            self.unmatched.append((xid, verb, event.header.file or owner.file,
                                   event.header.offset))
            log.warning("XA %s of %s, which was not prepared after the start position (%s at "
                        "offset %d): nothing to deliver", verb, xid, event.header.file,
                        event.header.offset)
            owner._finish_empty(event, gtid)
            return
        prepared, _where = held
        if verb == "ROLLBACK" or not prepared.size:
            prepared.discard()
            owner._group = None
            owner._finished.append(Finished(None, None, gtid, owner.file, end,
                                            xa_resolved=xid))
            return
        commit_ts = (group.commit_ts if group is not None else None) or utc_time(
            event.header.timestamp)
        if gtid is not None:
            prepared.gtid = gtid
        owner._group = None
        info = owner._info(prepared, end, xid, commit_ts, gtid)
        owner._finished.append(Finished(info, prepared, gtid, owner.file, end,
                                        xa_resolved=xid))
