"""The JSON-lines sink: one change record per line, to a file or to standard output."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import logging
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from changestream.delivery.adapter import SinkCapabilities
from changestream.encoding.records import iter_lines
from changestream.model.changes import Batch, Change, Position, TransactionPart
from changestream.model.errors import ConfigError, SinkError
from changestream.model.modes import FORMATS
from changestream.model.setting import option_flag

log = logging.getLogger("changestream")


class JsonLinesSink:
    """Appends change records to ``path`` (``None`` or ``"-"``: standard output).

    Each batch is written, flushed and (for files, unless ``fsync=False``) fsynced before
    the router moves its position on; once fsynced, its pages leave the OS page cache
    (unless ``drop_cache=False``: :func:`_drop_cached`). With a position file a file is
    written exactly once: the file's length is saved with each position
    (:meth:`durable_state`), and on a restart (:meth:`restore`) what lies after it —
    batches written but never acknowledged, which the router delivers again — is cut off.
    Without one (or on standard output) it is at least once: only a line left half-written
    by a crash is cut off.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 format: str = "changestream", fsync: bool | str = True,
                 drop_cache: bool | str = True):
        if format not in FORMATS:
            raise SinkError(f"jsonl sink: unknown format {format!r} (use one of "
                            f"{', '.join(FORMATS)})")
        self.path = None if path is None or path == "-" else Path(path)
        self.format = format
        # Decode workers may hand over records already encoded in this format; the file is
        # cut back to the state saved with the position on a restart.
        self.capabilities = SinkCapabilities(encoded_format=format, durable_state=True)
        self.fsync = option_flag("jsonl sink", "fsync", fsync)
        self.drop_cache = option_flag("jsonl sink", "drop_cache", drop_cache)
        self._out: BinaryIO | None = None
        self._committed: dict[str, Any] | None = None  # from restore()

    def restore(self, state: dict[str, Any] | None) -> None:
        """Take the state saved with the router's last position; :meth:`open` cuts the
        file back to the length it names."""
        self._committed = state

    def durable_state(self) -> dict[str, Any] | None:
        """The file and its length after the last batch written (``None`` for stdout)."""
        if self.path is None or self._out is None:
            return None
        return {"path": self._real_path(), "length": self._out.tell()}

    def _real_path(self) -> str:
        assert self.path is not None
        return os.path.realpath(self.path)

    def open(self) -> Position | None:
        if self.path is None:
            self._out = sys.stdout.buffer
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            length = self._committed_length()
            if length is None:
                self._cut_torn_line()
            else:
                self._cut_back(length)
            # Unbuffered: what a failed write leaves is in the file (and cut back), never
            # in a buffer that a later flush would write after the cut.
            self._out = open(self.path, "ab", buffering=0)  # noqa: SIM115 (kept open)
        except OSError as exc:
            raise SinkError(f"jsonl sink: cannot open {self.path}: {exc.strerror}") from None
        return None

    def _committed_length(self) -> int | None:
        """The length the saved position names for this file, if it names this file."""
        state = self._committed
        if state is None:
            return None
        length, path = state.get("length"), state.get("path")
        if not isinstance(length, int) or length < 0 or not isinstance(path, str):
            raise SinkError(f"jsonl sink: the position file's sink state {state!r} is not a "
                            "file and length; remove the position file's 'sink' entry")
        if path != self._real_path():
            log.warning("jsonl sink: the position file was saved while writing %s; %s is "
                        "appended to as it is (a restart cuts it back from now on)", path,
                        self.path)
            return None
        return length

    def _cut_back(self, length: int) -> None:
        """Cut the file back to ``length``: what lies after it was never acknowledged."""
        assert self.path is not None
        size = self.path.stat().st_size if self.path.exists() else 0
        if size == length:
            return
        if size == 0:
            log.warning("jsonl sink: %s is missing or empty although %d bytes were "
                        "acknowledged in it (rotated away?); writing on into a new file",
                        self.path, length)
            return
        if size < length:
            raise SinkError(
                f"jsonl sink: {self.path} holds {size} bytes but the position file says "
                f"{length} were written to it: the file was changed by something else. "
                "Move it away to write on into a new file, or remove the position file "
                "to start over")
        with open(self.path, "r+b") as f:
            f.truncate(length)
            f.flush()
            os.fsync(f.fileno())
        log.info("jsonl sink: cut %s back to %d bytes (%d bytes written after the last "
                 "saved position are written again)", self.path, length, size - length)

    def _cut_torn_line(self) -> None:
        if not self.path or not self.path.exists():
            return
        with open(self.path, "r+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            step = min(size, 1 << 16)
            pos = size
            while pos > 0:
                pos = max(0, pos - step)
                f.seek(pos)
                chunk = f.read(min(step, size - pos))
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    f.truncate(pos + newline + 1)
                    return
            f.truncate(0)

    def write(self, batch: Batch) -> None:
        out = self._out
        if out is None:
            raise SinkError("jsonl sink: write before open")
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")
        start = out.tell() if self.path is not None else None
        try:
            # In chunks of about a megabyte: a big transaction's records can run to
            # hundreds of MB.
            pending: list[list[Change]] = []  # changes of parts still to be encoded
            for part in batch.parts:
                if isinstance(part, TransactionPart):
                    pending.append(part.changes)
                    continue
                self._write_changes(out, pending, stamp)
                pending = []
                records = part.records  # an EncodedRun, in this sink's format: bytes
                assert isinstance(records, bytes | memoryview), type(records)
                _put(out, records)
            self._write_changes(out, pending, stamp)
            out.flush()
            if self.fsync and self.path is not None:
                os.fsync(out.fileno())
                if self.drop_cache and start is not None:
                    _drop_cached(out.fileno(), start)
        except BaseException as exc:
            if start is not None:
                self._take_back(out, start)
            if isinstance(exc, OSError):
                raise SinkError(f"jsonl sink: cannot write {self.path or 'stdout'}: "
                                f"{exc.strerror}") from None
            raise

    def _write_changes(self, out: BinaryIO, changes: list[list[Change]], stamp: str) -> None:
        for chunk in iter_lines(itertools.chain.from_iterable(changes), self.format, stamp):
            _put(out, chunk)

    def _take_back(self, out: BinaryIO, start: int) -> None:
        """Cut the file back to where a failed batch began, so that its retry does not
        leave the lines written before the failure twice (nor half a line, on a full
        disk)."""
        with contextlib.suppress(OSError):
            os.ftruncate(out.fileno(), start)
            out.seek(start)  # ftruncate leaves the offset (which tell() reports) past it

    def close(self) -> None:
        if self._out is not None and self.path is not None:
            self._out.close()
        self._out = None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _drop_cached(fd: int, start: int) -> None:
    """Let the OS drop file ``fd``'s pages from ``start``'s page on from its page cache
    (they are fsynced, so clean). A big snapshot otherwise fills memory with records
    nobody reads again there, pushing other files out; and taking memory the machine had
    not used yet for the cache cost more system time than the write (docs/snapshots.md).
    A consumer reading right behind the router then reads them from the disk."""
    if hasattr(os, "posix_fadvise"):
        with contextlib.suppress(OSError):  # a file system without it: nothing to drop
            os.posix_fadvise(fd, start - start % _PAGE, 0, os.POSIX_FADV_DONTNEED)


def _put(out: BinaryIO, data: bytes | memoryview) -> None:
    """Write all of ``data`` (an unbuffered file may take part of it per call)."""
    view = memoryview(data)
    while view:
        written = out.write(view)
        if written is None:  # a non-blocking stdout that is full: try again
            continue
        view = view[written:]


def jsonl_sink(argument: str | None, **options: Any) -> JsonLinesSink:
    """The factory of ``--sink jsonl:PATH``."""
    if not argument:
        raise ConfigError("sink 'jsonl' needs a path: jsonl:PATH (or use 'stdout')")
    return JsonLinesSink(argument, **options)


def stdout_sink(argument: str | None, **options: Any) -> JsonLinesSink:
    """The factory of ``--sink stdout``."""
    return JsonLinesSink(None, **options)
