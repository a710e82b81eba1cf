"""Where a router starts reading: the position to resume from (saved, kept by the sink, or
given as an override), or the configured start, with the GTID set or state before it."""

from __future__ import annotations

from changestream.model.changes import Position
from changestream.model.errors import ConfigError
from changestream.model.gtid import GtidProgress, is_mariadb_gtid, parse_gtid_progress
from changestream.runtime.settings import RouterSettings
from changestream.sources import server
from changestream.sources.live import StartPosition
from changestream.sources.server import Connect
from changestream.sources.source_url import SourceSpec


def later(a: Position | None, b: Position | None) -> Position | None:
    """The later of two positions of the same binlog (by file sequence number, offset)."""
    if a is None or b is None:
        return a or b
    return a if a.order >= b.order else b


def position_override(text: str | None) -> Position | None:
    """The position ``start.position_override`` gives (``FILE:POS`` or ``gtid:SET``)."""
    if not text:
        return None
    if text.startswith("gtid:"):
        gtids = text[5:]
        return Position("", 4, gtids, "mariadb" if is_mariadb_gtid(gtids) else "mysql")
    try:
        start = StartPosition.parse(text)
    except ValueError as exc:
        raise ConfigError(f"position override: {exc}") from None
    if start.kind != "file" or start.file is None:
        raise ConfigError("position override: give FILE:POS or gtid:SET")
    return Position(start.file, start.pos)


def start_point(resume: Position | None, settings: RouterSettings, spec: SourceSpec,
                snapshot_mode: str, connect: Connect) -> tuple[GtidProgress | None,
                                                               StartPosition]:
    """The GTID set/state before the first event and where the source starts."""
    if resume is not None:
        gtid = (parse_gtid_progress(resume.gtid_set, resume.flavor == "mariadb")
                if resume.gtid_set is not None else None)
        # A server resumes by GTID where it can (MySQL's sets survive failover; an
        # override may give only a GTID; a set of servers may hold the position's file on
        # another server than the one read now), otherwise by file and offset.
        by_gtid = resume.gtid_set is not None and (not resume.file or (
            bool(resume.gtid_set) and (resume.flavor == "mysql" or len(spec.hosts) > 1)))
        if spec.kind == "server" and by_gtid:
            return gtid, StartPosition("gtid", gtid=resume.gtid_set)
        return gtid, StartPosition("file", file=resume.file, pos=resume.pos)
    start = StartPosition.parse(settings.start or (
        "latest" if snapshot_mode != "never" else "earliest"))
    if start.kind == "file" and spec.kind == "server":
        assert start.file is not None
        return server.gtids_before(spec.connection, settings.server_id, start.file,
                                   start.pos), start
    if start.kind == "gtid":
        assert start.gtid is not None
        return parse_gtid_progress(start.gtid), start
    if start.kind == "latest" and spec.kind == "server":
        return server.latest(connect, spec.connection, settings.server_id)
    if start.kind == "latest":
        raise ConfigError("start: 'latest' needs a server source (for files give FILE:POS)")
    return None, start
