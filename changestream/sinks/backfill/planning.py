"""Cutting archived binlog files into units a Spark task decodes on its own.

A unit is a whole file, or, in a big MySQL 8.0.2+ file, a range of it that begins at a GTID
event: GTID events there carry ``transaction_length``, so the planner walks a file from
GTID event to GTID event with seeks, decoding nothing between. A range also carries the
GTID set before it (the file's PREVIOUS_GTIDS plus every GTID the walk passed), so the
positions its task reports are the ones a reader of the whole file would report. MariaDB
files, gzip'd files and files whose GTID events have no length are units whole.
"""

from __future__ import annotations

import glob
import hashlib
import json
import struct
from dataclasses import asdict
from pathlib import Path

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import HEADER_SIZE, EventDecoder
from changestream.decoding.events import GtidEvent, PreviousGtidsEvent
from changestream.model.changes import binlog_name
from changestream.model.errors import BinlogError, SourceError, TruncatedBinlogError
from changestream.model.gtid import MysqlGtidSet
from changestream.model.record import record
from changestream.sources.files import _file_order, _open, binlog_files
from changestream.sources.raw import BINLOG_MAGIC

_SIZE = struct.Struct("<I").unpack_from
_MYSQL_GTID_TYPES = (et.GTID, et.ANONYMOUS_GTID, et.GTID_TAGGED)


@record(frozen=True)
class BackfillUnit:
    """Events ``[start, end)`` of binlog file ``path`` (``end`` ``None``: to its end);
    ``gtid_set``: the GTID set before ``start`` when the unit begins inside the file."""

    index: int
    path: str
    start: int = 4
    end: int | None = None
    gtid_set: str | None = None

    @property
    def name(self) -> str:
        return binlog_name(self.path)

    def describe(self) -> str:
        end = "end" if self.end is None else str(self.end)
        return f"{self.name} [{self.start}, {end})"


def expand_paths(paths: list[str]) -> list[Path]:
    """Folders, globs (``/archive/mysql-bin.*``) and files, as binlog files in binlog
    order (a folder in its index's order)."""
    out: list[Path] = []
    for text in paths:
        if any(c in text for c in "*?["):
            matched = [Path(p) for p in glob.glob(text) if not p.endswith(".index")
                       and Path(p).is_file()]
            if not matched:
                raise SourceError(f"no binlog files match {text}")
            out.extend(sorted(matched, key=_file_order))
        else:
            out.extend(binlog_files([text]))
    seen: set[Path] = set()
    unique = []
    for p in out:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            unique.append(p)
    if not unique:
        raise SourceError("no binlog files given")
    return unique


def plan_units(paths: list[str], split_bytes: int = 256 << 20) -> list[BackfillUnit]:
    """The units of ``paths`` (see the module docstring); a MySQL file bigger than
    ``split_bytes`` is cut into ranges of about that size (0: never)."""
    units: list[BackfillUnit] = []
    for path in expand_paths(paths):
        ranges = _ranges(path, split_bytes) if split_bytes and not _gzipped(path) \
            and path.stat().st_size > split_bytes else None
        for start, end, gtid_set in ranges or [(4, None, None)]:
            units.append(BackfillUnit(len(units), str(path), start, end, gtid_set))
    return units


def plan_digest(units: list[BackfillUnit], extra: str = "") -> str:
    """A name for a plan: the same files cut the same way (and the same ``extra``, e.g.
    the filter) give the same digest."""
    described = [{**asdict(u), "size": Path(u.path).stat().st_size} for u in units]
    text = json.dumps([described, extra], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _gzipped(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _ranges(path: Path, split_bytes: int) -> list[tuple[int, int | None, str | None]] | None:
    """Cut points of a MySQL file at GTID events about ``split_bytes`` apart, each with the
    GTID set before it; ``None`` when the file cannot be walked by lengths."""
    name = str(path)
    decoder = EventDecoder()
    gtids: MysqlGtidSet | None = None
    cuts: list[tuple[int, str | None]] = []
    last_cut = 4
    with _open(path) as f:
        if f.read(4) != BINLOG_MAGIC:
            raise BinlogError("not a binlog file", name, 0)
        offset = 4
        while True:
            header = f.read(HEADER_SIZE)
            if not header:
                break
            if len(header) < HEADER_SIZE:
                raise TruncatedBinlogError("file ends inside an event header", name, offset)
            size = _SIZE(header, 9)[0]
            kind = header[4]
            if kind == et.MARIADB_GTID:
                return None
            if kind in _MYSQL_GTID_TYPES or kind in (et.FORMAT_DESCRIPTION,
                                                      et.PREVIOUS_GTIDS):
                data = header + f.read(size - HEADER_SIZE)
                event = decoder.decode(data, name, offset)
                if isinstance(event, PreviousGtidsEvent):
                    gtids = MysqlGtidSet(event.gtid_set)
                elif isinstance(event, GtidEvent):
                    if not event.transaction_length:
                        return None
                    if offset - last_cut >= split_bytes:
                        cuts.append((offset, gtids.render() if gtids is not None else None))
                        last_cut = offset
                    if gtids is not None and event.gtid is not None:
                        gtids.add(event.gtid)
                    f.seek(offset + event.transaction_length)
                    offset += event.transaction_length
                    continue
            else:
                f.seek(size - HEADER_SIZE, 1)
            offset += size
    if not cuts:
        return None
    starts: list[tuple[int, str | None]] = [(4, None), *cuts]
    out: list[tuple[int, int | None, str | None]] = []
    for i, (start, gtid_set) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else None
        out.append((start, end, gtid_set))
    return out
