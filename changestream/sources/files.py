"""Reading binlog files: one file, a list, or a directory in index order; gzip'd files;
files still being written (follow until stopped)."""

from __future__ import annotations

import gzip
import logging
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import HEADER_SIZE, EventDecoder
from changestream.decoding.events import Event, RotateEvent
from changestream.model.changes import binlog_name, binlog_order
from changestream.model.errors import BinlogError, SourceError, TruncatedBinlogError
from changestream.native import compiled
from changestream.sources.raw import BINLOG_MAGIC, RawEvent, one_by_one

log = logging.getLogger("changestream")
_SIZE = struct.Struct("<I").unpack_from
_FRAMING = compiled("changestream.native.framing")
# The most read at once: an event's size field is not trusted with an allocation before
# the file has shown it holds that many bytes.
_PIECE = 16 << 20


def _numbered(path: Path) -> bool:
    """Whether the file's name ends in a number, as binlog files' do (``.000001``)."""
    _, dot, number = binlog_name(path.name).rpartition(".")
    return bool(dot) and number.isdigit()


def _file_order(path: Path) -> tuple[str, int, int, str]:
    """A binlog file's place among others: as positions order their files (by base name
    and number), then by name."""
    name = binlog_name(path.name)
    return (*binlog_order(name, 0), name)


def binlog_files(paths: Iterable[str | Path]) -> list[Path]:
    """The binlog files named by ``paths``, directories expanded in index order.

    A directory's order comes from its ``*.index`` file when there is one, else from the
    numeric suffixes of the file names (``mysql-bin.000001``, ...).
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(_directory_files(p))
        elif p.exists():
            out.append(p)
        else:
            raise SourceError(f"binlog file not found: {p}")
    return out


def _directory_files(directory: Path) -> list[Path]:
    indexes = sorted(directory.glob("*.index"))
    if indexes:
        files = []
        for line in indexes[0].read_text().splitlines():
            name = Path(line.strip()).name
            if name and (directory / name).exists():
                files.append(directory / name)
        if files:
            return files
    candidates = [
        f for f in directory.iterdir()
        if f.is_file() and _numbered(f) and not f.name.endswith(".index")
    ]
    if not candidates:
        raise SourceError(f"no binlog files in directory {directory}")
    return sorted(candidates, key=_file_order)


def _open(path: Path) -> BinaryIO:
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb", buffering=1 << 20)


def read_raw_events(path: Path, start: int = 4, *, follow: threading.Event | None = None,
                    poll_interval: float = 0.2, idle: bool = False) -> Iterator[RawEvent | None]:
    """The raw events of one file from ``start``; the FORMAT_DESCRIPTION event (at 4) is
    always yielded first so that what follows can be decoded.

    With ``follow`` (a stop flag), the end of the file is waited on until the flag is set or
    the file ends with ROTATE/STOP; otherwise an event cut short is a ``TruncatedBinlogError``.
    With ``follow`` and ``idle``, ``None`` is yielded each time the reader reaches what has
    been written so far, before it waits for more.
    """
    return one_by_one(read_raw_batches(path, start, follow=follow,
                                       poll_interval=poll_interval, idle=idle))


def read_raw_batches(path: Path, start: int = 4, *, follow: threading.Event | None = None,
                     poll_interval: float = 0.2, idle: bool = False
                     ) -> Iterator[list[RawEvent] | None]:
    """:func:`read_raw_events` in lists: as many at a time as were framed at once."""
    name = str(path)
    with _open(path) as f:
        magic = _read(f, 4, name, 0)
        if magic != BINLOG_MAGIC:
            raise BinlogError(f"not a binlog file: starts with {magic.hex() or 'nothing'}, "
                              f"expected {BINLOG_MAGIC.hex()}", name, 0)
        if follow is None:
            yield from _whole_batches(f, name, start)
            return
        offset = 4
        while True:
            if idle and follow is not None and not f.peek(1):  # type: ignore[attr-defined]
                yield None
            header = _read_exact(f, HEADER_SIZE, follow, poll_interval, name, offset)
            if not header:
                return
            if follow is not None and follow.is_set() and len(header) < HEADER_SIZE:
                return  # stopped while the server was still writing this event
            if len(header) < HEADER_SIZE:
                raise TruncatedBinlogError(
                    f"file ends inside an event header ({len(header)} of {HEADER_SIZE} bytes)",
                    name, offset)
            size = _SIZE(header, 9)[0]
            if size < HEADER_SIZE:
                raise BinlogError(f"corrupt event header: size {size} is smaller than the "
                                  "header", name, offset)
            rest = _read_exact(f, size - HEADER_SIZE, follow, poll_interval, name, offset)
            if follow is not None and follow.is_set() and len(rest) < size - HEADER_SIZE:
                return
            if len(rest) < size - HEADER_SIZE:
                raise TruncatedBinlogError(
                    f"file ends inside a {et.event_type_name(header[4])} event: its header "
                    f"says {size} bytes, {HEADER_SIZE + len(rest)} are there", name, offset)
            if offset >= start or header[4] == et.FORMAT_DESCRIPTION:
                yield [RawEvent(name, offset, header + rest)]
            if offset < start and header[4] == et.FORMAT_DESCRIPTION and start > offset + size:
                if isinstance(f, gzip.GzipFile):
                    _skip(f, start - offset - size, name, offset)
                else:
                    f.seek(start)
                offset = start
                continue
            offset += size
            if follow is not None and header[4] in (et.ROTATE, et.STOP):
                return


_CHUNK = 1 << 20


def _whole_batches(f: BinaryIO, name: str, start: int) -> Iterator[list[RawEvent]]:
    """``read_raw_batches`` for a file that is not followed: read in chunks of a megabyte
    and cut into events, rather than two reads per event."""
    framer = _FRAMING.file_events if _FRAMING is not None else None
    buf = _read(f, _CHUNK, name, 4)
    p = 0  # where ``offset`` is in ``buf``
    offset = 4
    while True:
        if framer is not None:  # many events at once; what it leaves is handled below
            events, p, offset = framer(buf, p, name, offset, start)
            if events:
                yield events
        avail = len(buf) - p
        if avail < HEADER_SIZE:
            more = _read(f, _CHUNK, name, offset)
            if not more:
                if avail:
                    raise TruncatedBinlogError(
                        f"file ends inside an event header ({avail} of {HEADER_SIZE} bytes)",
                        name, offset)
                return
            buf, p = buf[p:] + more, 0
            continue
        size = _SIZE(buf, p + 9)[0]
        if size < HEADER_SIZE:
            raise BinlogError(f"corrupt event header: size {size} is smaller than the "
                              "header", name, offset)
        if avail < size:
            more = _read(f, max(_CHUNK, size - avail), name, offset)
            if not more:
                raise TruncatedBinlogError(
                    f"file ends inside a {et.event_type_name(buf[p + 4])} event: its header "
                    f"says {size} bytes, {avail} are there", name, offset)
            buf, p = buf[p:] + more, 0
            continue
        code = buf[p + 4]
        if offset >= start or code == et.FORMAT_DESCRIPTION:
            yield [RawEvent(name, offset, buf[p:p + size])]
        if offset < start and code == et.FORMAT_DESCRIPTION and start > offset + size:
            # To ``start`` from the file's beginning: ``f`` is already past what ``buf`` holds.
            try:
                f.seek(start)
            except EOFError as exc:  # a gzip'd file cut short
                raise TruncatedBinlogError(f"gzip'd file ends early: {exc}", name,
                                           offset) from None
            offset = start
            buf, p = _read(f, _CHUNK, name, offset), 0
            continue
        p += size
        offset += size


def _rotate_target(raw: RawEvent) -> str | None:
    """The file a ROTATE event names (with or without a CRC32 after the name)."""
    data = raw.data
    if data[4] != et.ROTATE or len(data) < HEADER_SIZE + 8:
        return None
    name = data[HEADER_SIZE + 8:]
    if len(name) > 4 and zlib.crc32(data[:-4]) == _SIZE(data, len(data) - 4)[0]:
        name = name[:-4]
    return bytes(name).decode("utf-8", "replace") or None


def _read(f: BinaryIO, n: int, name: str, offset: int) -> bytes:
    """Up to ``n`` bytes of ``f`` (fewer at its end), in pieces of at most ``_PIECE``; a
    damaged gzip stream is a ``BinlogError`` at ``offset``, the event being read."""
    try:
        if n <= _PIECE:
            return f.read(n)
        pieces = []
        while n > 0:
            piece = f.read(min(n, _PIECE))
            if not piece:
                break
            pieces.append(piece)
            n -= len(piece)
        return b"".join(pieces)
    except EOFError as exc:
        raise TruncatedBinlogError(f"gzip'd file ends early: {exc}", name, offset) from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise BinlogError(f"gzip'd file is damaged: {exc}", name, offset) from None


def _skip(f: BinaryIO, n: int, name: str, offset: int) -> None:
    while n > 0:
        chunk = _read(f, min(n, 1 << 20), name, offset)
        if not chunk:
            return
        n -= len(chunk)


def _read_exact(f: BinaryIO, n: int, follow: threading.Event | None,
                poll_interval: float, name: str, offset: int) -> bytes:
    data = _read(f, n, name, offset)
    if follow is None or len(data) == n:
        return data
    while len(data) < n and not follow.is_set():
        follow.wait(poll_interval)
        data += _read(f, n - len(data), name, offset)
    return data


class FileSource:
    """Decoded events from binlog files, in order, following ROTATE from file to file.

    ``start_file``/``start_pos`` begin inside the list (the FDE of that file is read first).
    ``follow=True`` keeps reading as the last file grows and as new files appear, until
    ``stop()``.
    """

    def __init__(self, paths: Iterable[str | Path], *, start_file: str | None = None,
                 start_pos: int = 4, follow: bool = False, verify_checksums: bool = True,
                 decoder: EventDecoder | None = None):
        self.paths = [Path(p) for p in paths]
        self.start_file = start_file
        self.start_pos = start_pos
        self.follow = follow
        self.decoder = decoder or EventDecoder(verify_checksums=verify_checksums)
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask a following source to end after the event it is reading."""
        self._stop.set()

    def raw_events(self, idle: bool = False) -> Iterator[RawEvent | None]:
        """The raw events of every file in order (with ``idle`` and ``follow``: ``None``
        whenever the reader has caught up with the writer for now)."""
        return one_by_one(self.raw_batches(idle))

    def raw_batches(self, idle: bool = False) -> Iterator[list[RawEvent] | None]:
        """:meth:`raw_events` in lists, as many at a time as were framed at once."""
        files = binlog_files(self.paths)
        if self.start_file is not None:
            names = [binlog_name(f.name) for f in files]
            wanted = binlog_name(self.start_file)
            if wanted not in names:
                raise SourceError(f"start file {self.start_file} is not among the binlog files")
            files = files[names.index(wanted):]
        first = True
        while files:
            path = files.pop(0)
            start = self.start_pos if first else 4
            first = False
            follow = self._stop if self.follow and not files else None
            last: RawEvent | None = None
            for batch in read_raw_batches(path, start, follow=follow, idle=idle):
                if batch:
                    last = batch[-1]
                yield batch
            if self.follow and not files and not self._stop.is_set():
                rotated_to = _rotate_target(last) if last is not None else None
                files = self._wait_for_next_file(path, rotated_to)

    def _wait_for_next_file(self, current: Path, rotated_to: str | None) -> list[Path]:
        """The files after ``current``: those the paths list after it (a directory gains
        them in its index), else the file a ROTATE named, next to ``current``."""
        while not self._stop.is_set():
            listed = binlog_files(self.paths)
            if current in listed:
                fresh = listed[listed.index(current) + 1:]
                if fresh:
                    return fresh
            if rotated_to:
                target = current.parent / Path(rotated_to).name
                if target.exists() and target != current:
                    return [target]
            self._stop.wait(0.2)
        return []

    def __iter__(self) -> Iterator[Event]:
        decode = self.decoder.decode
        for raw in self.raw_events():
            assert raw is not None
            event = decode(raw.data, raw.file, raw.offset)
            if isinstance(event, RotateEvent):
                log.debug("rotate to %s at %s:%d", event.next_file, raw.file, raw.offset)
            yield event

    def stream(self) -> Iterator[Event | None]:
        """Decoded events, and ``None`` each time a following reader has caught up."""
        decode = self.decoder.decode
        for raw in self.raw_events(idle=True):
            yield None if raw is None else decode(raw.data, raw.file, raw.offset)
