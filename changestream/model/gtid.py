"""GTID progress: MySQL GTID sets (with 9.x tags) and MariaDB GTID states.

Both answer the same two questions the router asks: "add this transaction's GTID" (cheap,
once per transaction) and "what is the set now" (rendered when a position is saved).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol


class GtidProgress(Protocol):
    """What the router needs of a GTID set or state."""

    def add(self, gtid: str) -> None: ...

    def add_all(self, gtids: Sequence[str]) -> None: ...

    def render(self) -> str: ...

    def copy(self) -> GtidProgress: ...


_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   r"[0-9a-fA-F]{12}$")

_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")  # MySQL 8.4+ GTID tags


def _normal_uuid(text: str) -> str:
    text = text.strip().lower()
    if not _UUID.match(text):
        raise ValueError(f"{text!r} is not a server UUID")
    h = text.replace("-", "")
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class MysqlGtidSet:
    """A MySQL GTID set: ``uuid[:tag]:interval[:interval...]`` joined by commas.

    Intervals are kept sorted and merged, so adding the next GTID of a server (the usual
    case) extends the last interval in place.
    """

    def __init__(self, text: str = ""):
        # (uuid, tag) -> sorted, disjoint, non-adjacent [start, end] pairs (inclusive)
        self._intervals: dict[tuple[str, str], list[list[int]]] = {}
        for part in (p.strip() for p in text.replace("\n", "").split(",")):
            if part:
                self._parse_part(part)

    def _parse_part(self, part: str) -> None:
        fields = part.split(":")
        sid = _normal_uuid(fields[0])
        tag = ""
        for field in fields[1:]:
            field = field.strip()
            if field and not field[0].isdigit():
                if not _TAG.fullmatch(field):
                    raise ValueError(f"bad GTID tag {field!r} in {part!r}")
                tag = field.lower()
                continue
            start, dash, end = field.partition("-")
            if not start.isdigit() or (dash and not end.isdigit()) \
                    or not 0 < int(start) <= int(end or start):
                raise ValueError(f"bad GTID interval {field!r} in {part!r}")
            self._add_interval(sid, tag, int(start), int(end or start))

    def _add_interval(self, sid: str, tag: str, start: int, end: int) -> None:
        intervals = self._intervals.setdefault((sid, tag), [])
        if intervals and intervals[-1][1] + 1 >= start >= intervals[-1][0]:
            intervals[-1][1] = max(intervals[-1][1], end)
            return
        intervals.append([start, end])
        intervals.sort()
        merged: list[list[int]] = []
        for lo, hi in intervals:
            if merged and lo <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        self._intervals[(sid, tag)] = merged

    def add_all(self, gtids: Sequence[str]) -> None:
        """Add each of ``gtids``: a run of consecutive numbers of one server (what a decode
        worker's segment holds) as one interval, each server UUID checked once."""
        normal: dict[str, str] = {}
        run: str | None = None  # the run's GTIDs' text before their numbers
        sid = tag = ""
        start = end = 0
        for gtid in gtids:
            head, _, number = gtid.rpartition(":")
            gno = int(number)
            if head == run and gno == end + 1:
                end = gno
                continue
            if run is not None:
                self._add_interval(sid, tag, start, end)
            raw_sid, _, raw_tag = head.partition(":")
            sid = normal.get(raw_sid) or normal.setdefault(raw_sid, _normal_uuid(raw_sid))
            tag = raw_tag.lower()
            run, start, end = head, gno, gno
        if run is not None:
            self._add_interval(sid, tag, start, end)

    def add(self, gtid: str) -> None:
        """Add one GTID, ``uuid:gno`` or ``uuid:tag:gno``."""
        sid, _, rest = gtid.partition(":")
        tag, _, gno = rest.rpartition(":")
        self._add_interval(_normal_uuid(sid), tag.lower(), int(gno), int(gno))

    def __contains__(self, gtid: str) -> bool:
        sid, _, rest = gtid.partition(":")
        tag, _, gno_text = rest.rpartition(":")
        gno = int(gno_text)
        return any(lo <= gno <= hi
                   for lo, hi in self._intervals.get((_normal_uuid(sid), tag.lower()), []))

    def render(self) -> str:
        parts = []
        by_uuid: dict[str, list[str]] = {}
        for (sid, tag), intervals in sorted(self._intervals.items()):
            text = ":".join(f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in intervals)
            by_uuid.setdefault(sid, []).append(f"{tag}:{text}" if tag else text)
        for sid, pieces in by_uuid.items():
            parts.append(f"{sid}:" + ":".join(pieces))
        return ",".join(parts)

    def difference(self, other: MysqlGtidSet) -> MysqlGtidSet:
        """The GTIDs of this set that ``other`` does not hold."""
        out = MysqlGtidSet()
        for key, intervals in self._intervals.items():
            theirs = other._intervals.get(key, [])
            for lo, hi in intervals:
                for olo, ohi in theirs:
                    if ohi < lo or olo > hi:
                        continue
                    if olo > lo:
                        out._add_interval(*key, lo, olo - 1)
                    lo = ohi + 1
                    if lo > hi:
                        break
                if lo <= hi:
                    out._add_interval(*key, lo, hi)
        return out

    def __bool__(self) -> bool:
        return bool(self._intervals)

    def copy(self) -> MysqlGtidSet:
        clone = MysqlGtidSet()
        clone._intervals = {k: [list(i) for i in v] for k, v in self._intervals.items()}
        return clone

    def __str__(self) -> str:
        return self.render()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MysqlGtidSet) and self._intervals == other._intervals


class MariadbGtidState:
    """A MariaDB GTID state: the last GTID per replication domain, ``domain-server-seq``."""

    def __init__(self, text: str = ""):
        self._last: dict[int, tuple[int, int]] = {}
        for part in (p.strip() for p in text.split(",")):
            if part:
                self.add(part)

    def add(self, gtid: str) -> None:
        try:
            domain, server, seq = gtid.split("-")
            self._last[int(domain)] = (int(server), int(seq))
        except ValueError:
            raise ValueError(f"{gtid!r} is not a MariaDB GTID (domain-server-seq)") from None

    def add_all(self, gtids: Sequence[str]) -> None:
        """Add ``gtids``, in binlog order: only each domain's last one changes the state."""
        seen: set[str] = set()
        for gtid in reversed(gtids):
            domain = gtid.partition("-")[0]
            if domain not in seen:
                seen.add(domain)
                self.add(gtid)

    def __contains__(self, gtid: str) -> bool:
        domain, _server, seq = (int(x) for x in gtid.split("-"))
        last = self._last.get(domain)
        return last is not None and seq <= last[1]

    def render(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(self._last.items()))

    def last(self) -> dict[int, tuple[int, int]]:
        """Each domain's last GTID: ``{domain: (server_id, sequence)}``."""
        return dict(self._last)

    def copy(self) -> MariadbGtidState:
        clone = MariadbGtidState()
        clone._last = dict(self._last)
        return clone

    def __str__(self) -> str:
        return self.render()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MariadbGtidState) and self._last == other._last


def mariadb_gtid(domain_id: int, server_id: int, seq_no: int) -> str:
    """A MariaDB GTID as text: ``domain-server-sequence``."""
    return f"{domain_id}-{server_id}-{seq_no}"


def is_mariadb_gtid(text: str) -> bool:
    """Whether ``text`` (a GTID or a set/state) is in MariaDB's ``d-s-n`` form."""
    first = text.split(",")[0].strip()
    return bool(re.fullmatch(r"\d+-\d+-\d+", first))


def parse_gtid_progress(text: str, mariadb: bool | None = None) -> GtidProgress:
    """A GTID set or state from its text; the flavour is guessed from the text when not given."""
    if mariadb is None:
        mariadb = is_mariadb_gtid(text) if text.strip() else False
    return MariadbGtidState(text) if mariadb else MysqlGtidSet(text)
