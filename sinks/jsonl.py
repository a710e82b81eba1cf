"""The JSON-lines sink: one change record per line, to a file or to standard output."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import os
import sys
from pathlib import Path
from typing import BinaryIO

from changestream.delivery.records import FORMATS, iter_lines
from changestream.model.changes import Batch, Change, Position, TransactionPart
from changestream.model.errors import SinkError


class JsonLinesSink:
    """Appends change records to ``path`` (``None`` or ``"-"``: standard output).

    Each batch is written, flushed and (for files, unless ``fsync=False``) fsynced before
    the router moves its position on. A line left half-written by a crash is cut off when
    the file is opened again: it belonged to a batch that was never acknowledged, and the
    router delivers that batch again.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 format: str = "changestream", fsync: bool = True):
        if format not in FORMATS:
            raise SinkError(f"jsonl sink: unknown format {format!r} (use one of "
                            f"{', '.join(FORMATS)})")
        self.path = None if path is None or path == "-" else Path(path)
        self.format = format
        # Decode workers may hand over records already encoded in this format.
        self.encoded_format = format
        self.fsync = fsync
        self._out: BinaryIO | None = None

    def open(self) -> Position | None:
        if self.path is None:
            self._out = sys.stdout.buffer
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._cut_torn_line()
            self._out = open(self.path, "ab")  # noqa: SIM115 (kept open across batches)
        except OSError as exc:
            raise SinkError(f"jsonl sink: cannot open {self.path}: {exc.strerror}") from None
        return None

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
                out.write(part.records)  # an EncodedRun, in this sink's format
            self._write_changes(out, pending, stamp)
            out.flush()
            if self.fsync and self.path is not None:
                os.fsync(out.fileno())
        except BaseException as exc:
            if start is not None:
                self._take_back(out, start)
            if isinstance(exc, OSError):
                raise SinkError(f"jsonl sink: cannot write {self.path or 'stdout'}: "
                                f"{exc.strerror}") from None
            raise

    def _write_changes(self, out: BinaryIO, changes: list[list[Change]], stamp: str) -> None:
        for chunk in iter_lines(itertools.chain.from_iterable(changes), self.format, stamp):
            out.write(chunk)

    def _take_back(self, out: BinaryIO, start: int) -> None:
        """Cut the file back to where a failed batch began, so that its retry does not
        leave the lines written before the failure twice."""
        with contextlib.suppress(OSError):
            out.flush()
        with contextlib.suppress(OSError):
            out.truncate(start)

    def close(self) -> None:
        if self._out is not None and self.path is not None:
            self._out.close()
        self._out = None
