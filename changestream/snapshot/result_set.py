"""A ``SELECT``'s rows read straight off a PyMySQL connection.

PyMySQL makes an object of every row packet and calls a converter for every value: most of
what a snapshot spent reading (docs/performance.md). :func:`select_rows` sends the
statement with PyMySQL's command writer and reads the text-protocol result itself, in
blocks of up to 256 KiB, handing each row to a function generated for the table
(:mod:`changestream.snapshot.row_readers`), or, for the compiled row readers (the JSON-lines
records', the Spark sink's), each block's rows to it at once (into a block of rows of its
own: no Python object per row, and no interpreter lock while it reads). It uses members
PyMySQL keeps private:
:func:`supported` says whether a connection has them, else the chunk reader reads through a
cursor. Errors are PyMySQL's own (a connection lost: ``OperationalError`` 2013)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import pymysql
from pymysql.constants import CLIENT, COMMAND

from changestream.model.record import record
from changestream.snapshot.row_readers import native

Row = TypeVar("Row")
Row_co = TypeVar("Row_co", covariant=True)


class Rows(Protocol[Row_co]):
    """Rows read: a list, or a compiled row reader's block (see :func:`_readings`)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Row_co]: ...


ChunkRows = Rows[tuple[tuple[Any, ...], Any]]
"""A chunk's rows, each ``(key in the decoder's values, row)``."""

_BLOCK = 1 << 18
_MAX_PAYLOAD = 0xFFFFFF  # a payload this long continues in the next packet
_EOF = 0xFE
_ERROR = 0xFF
_OK = 0x00


def supported(conn: Any) -> bool:
    """Whether :func:`select_rows` can read from ``conn`` (a PyMySQL connection of the
    classic protocol, with the private members it uses: unchanged from PyMySQL 1.0 to
    2.2)."""
    return (all(hasattr(conn, name) for name in (
        "_execute_command", "_rfile", "_sock", "_read_timeout", "_force_close"))
        and not conn.client_flag & CLIENT.DEPRECATE_EOF)


@record
class ResultRows(Generic[Row]):
    """A result's rows (as the row function read them: a list, or a compiled row reader's
    block, whose rows iterate as its calls give them) and where the last one is (to read
    it again another way; ``None``: no rows)."""

    rows: Rows[Row]
    last: tuple[bytes, int] | None


def select_rows(conn: Any, sql: str, read_row: Callable[[bytes, int], Row]) -> ResultRows[Row]:
    """The rows of ``sql`` (a statement giving one result set), each read by ``read_row``
    from ``(buffer, offset of its first value)``."""
    return next(select_row_pieces(conn, sql, read_row, sys.maxsize))


def select_row_pieces(conn: Any, sql: str, read_row: Callable[[bytes, int], Row],
                      piece_rows: int) -> Iterator[ResultRows[Row]]:
    """:func:`select_rows` in pieces of at least ``piece_rows`` rows (but the last: it may
    have fewer, or none), each given as soon as it is read: a big result is not held
    whole. The connection is busy until the last piece is taken."""
    conn._execute_command(COMMAND.COM_QUERY, sql.encode("utf-8"))
    if conn._sock is not None:
        conn._sock.settimeout(conn._read_timeout)
        conn._current_timeout = conn._read_timeout
    packets = _Packets(conn)
    first = packets.next()
    if first[0] == _OK:
        yield ResultRows([], None)  # not a statement with rows
        return
    while True:  # the column definitions, up to an EOF packet
        payload = packets.next()
        if payload[0] == _EOF and len(payload) < 9:
            break
    new_reading = _readings(read_row)
    reading = new_reading()
    last: tuple[bytes, int] | None = None
    while True:
        if len(reading.rows) >= piece_rows:
            yield ResultRows(reading.rows, last)
            reading = new_reading()
        buf = packets.buf
        packets.at, stopped, start = reading.scan(buf, packets.at)
        if start >= 0:
            last = (buf, start)
        if stopped == _WHOLE:
            packets._fill()
            continue
        buf, start, end = packets.next_in_place()
        head = buf[start]
        if head == _EOF and end - start < 9:
            yield ResultRows(reading.rows, last)
            return
        if head == _ERROR:
            packets.raise_error(buf[start:end])
        reading.add(buf, start)  # a row of 16 MiB or more
        last = (buf, start)


# What stopped scan_rows: a packet not yet whole (or none left), the end of the rows, an
# error packet, a payload of 16 MiB or more.
_WHOLE, _END, _FAILED, _LONG = range(4)


def scan_rows(buf: bytes, at: int, read_row: Callable[[bytes, int], Row],
              rows: list[Row]) -> tuple[int, int, int]:
    """Reads the row packets that are whole in ``buf`` from ``at``, appending what
    ``read_row(buf, start)`` gives for each to ``rows``, up to the first packet that is not
    a row: ``(offset of that packet or of the part not yet whole, what stopped it, start of
    the last row read or -1)``. The compiled module has the same function."""
    size = len(buf)
    last = -1
    append = rows.append
    while at + 4 <= size:
        length = buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16
        start = at + 4
        if length == _MAX_PAYLOAD:
            return at, _LONG, last
        if start + length > size:
            break
        head = buf[start]
        if head == _EOF and length < 9:
            return at, _END, last
        if head == _ERROR:
            return at, _FAILED, last
        append(read_row(buf, start))
        last = start
        at = start + length
    return at, _WHOLE, last


class _Reading(Protocol[Row_co]):
    """A result's rows being read (see :func:`_readings`)."""

    @property
    def rows(self) -> Rows[Row_co]:
        """The rows read so far."""

    def scan(self, buf: bytes, at: int) -> tuple[int, int, int]:
        """:func:`scan_rows` into :attr:`rows`."""

    def add(self, buf: bytes, start: int) -> None:
        """Reads the row at ``buf[start:]`` (one payload: the rest of the buffer)."""


class _ListReading(Generic[Row]):
    """Rows read into a list, one call of ``read_row`` each."""

    def __init__(self, read_row: Callable[[bytes, int], Row],
                 scan: Callable[[bytes, int, Callable[[bytes, int], Row], list[Row]],
                                tuple[int, int, int]]):
        self.rows: list[Row] = []
        self.read_row = read_row
        self._scan = scan

    def scan(self, buf: bytes, at: int) -> tuple[int, int, int]:
        return self._scan(buf, at, self.read_row, self.rows)

    def add(self, buf: bytes, start: int) -> None:
        self.rows.append(self.read_row(buf, start))


class _BlockReading:
    """Rows read into a compiled row reader's block."""

    def __init__(self, block: Any):
        self.rows = block
        self.scan = block.scan
        self.add = block.add


def _readings(read_row: Callable[[bytes, int], Row]) -> Callable[[], _Reading[Row]]:
    """How a result's rows are read: into a compiled row reader's own blocks (its
    ``rows()``: :class:`changestream.snapshot._text_rows.EncodedRows`,
    :class:`changestream.sinks.spark._snapshot_frames.RowRefs`; no Python object per row),
    else into a list of what ``read_row`` gives for each row."""
    blocks = getattr(read_row, "rows", None)
    if blocks is not None:
        return lambda: _BlockReading(blocks())
    compiled = native()
    scan = compiled.scan_rows if compiled is not None else scan_rows
    return lambda: _ListReading(read_row, scan)


class _Packets:
    """The packets of one result, from the connection's buffered socket file."""

    def __init__(self, conn: Any):
        self.conn = conn
        self.buf = b""
        self.at = 0

    def _fill(self) -> None:
        """Reads more bytes after what is still to be read."""
        try:
            data = self.conn._rfile.read1(_BLOCK)
        except OSError as exc:
            self.conn._force_close()
            raise pymysql.err.OperationalError(
                2013, f"Lost connection to MySQL server during query ({exc})") from None
        if not data:
            self.conn._force_close()
            raise pymysql.err.OperationalError(
                2013, "Lost connection to MySQL server during query")
        rest = self.buf[self.at:]
        self.buf = rest + data if rest else data
        self.at = 0

    def next_in_place(self) -> tuple[bytes, int, int]:
        """The next packet's payload as ``(buffer, start, end)``."""
        while True:
            buf, at = self.buf, self.at
            if at + 4 <= len(buf):
                size = buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16
                end = at + 4 + size
                if end <= len(buf):
                    if size == _MAX_PAYLOAD:
                        payload = self._long_payload()
                        return payload, 0, len(payload)
                    self.at = end
                    return buf, at + 4, end
            self._fill()

    def _long_payload(self) -> bytes:
        """A payload of 16 MiB or more: its packets joined."""
        parts = []
        while True:
            while self.at + 4 > len(self.buf):
                self._fill()
            at = self.at
            size = self.buf[at] | self.buf[at + 1] << 8 | self.buf[at + 2] << 16
            while at + 4 + size > len(self.buf):
                self._fill()
                at = self.at
            parts.append(self.buf[at + 4:at + 4 + size])
            self.at = at + 4 + size
            if size < _MAX_PAYLOAD:
                return b"".join(parts)

    def next(self) -> bytes:
        """The next packet's payload; an error packet raised."""
        buf, start, end = self.next_in_place()
        payload = buf[start:end]
        if payload[0] == _ERROR:
            self.raise_error(payload)
        return payload

    def raise_error(self, payload: bytes) -> None:
        pymysql.err.raise_mysql_exception(payload)
