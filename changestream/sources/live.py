"""Reading the binlog live from a server as a replica (COM_BINLOG_DUMP / _GTID).

The connection and handshake come from PyMySQL (GTID sets, tagged or not, are encoded here);
every event's bytes then go through the same ``EventDecoder`` as files do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pymysql

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import (
    CHECKSUM_CRC32,
    CHECKSUM_OFF,
    HEADER_SIZE,
    EventDecoder,
)
from changestream.decoding.events import Event
from changestream.decoding.gtid_tagged import encode_gtid_set
from changestream.model.errors import (
    BinlogError,
    ConnectionLostError,
    PurgedPositionError,
    SourceError,
)
from changestream.model.gtid import is_mariadb_gtid
from changestream.model.record import record
from changestream.native import compiled
from changestream.sources.binlog_head import binlog_head
from changestream.sources.raw import RawEvent, one_by_one
from changestream.sources.tls import open_connection

log = logging.getLogger("changestream")
_U32 = struct.Struct("<I").unpack_from
_EOF = object()
_FRAMING = compiled("changestream.native.framing")

COM_BINLOG_DUMP = 0x12
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02
BINLOG_THROUGH_GTID = 0x04
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
# Errors that end the connection rather than say something about the position: shutdown,
# killed, interrupted (the router reconnects after them).
_CONNECTION_ENDED = frozenset({1053, 1317, 1927, 2013})
_HEARTBEATS = frozenset({et.HEARTBEAT, et.HEARTBEAT_V2})


@record(frozen=True)
class StartPosition:
    """Where a live source begins: ``earliest``, ``latest``, a ``file`` and ``pos``, or a
    ``gtid`` set (MySQL) or GTID state (MariaDB)."""

    kind: str = "earliest"
    file: str | None = None
    pos: int = 4
    gtid: str | None = None

    @classmethod
    def parse(cls, text: str) -> StartPosition:
        """``earliest``, ``latest``, ``gtid:SET`` or ``FILE:POS``."""
        if text in ("earliest", "latest"):
            return cls(text)
        if text.startswith("gtid:"):
            return cls("gtid", gtid=text[5:])
        file, sep, pos = text.rpartition(":")
        if not sep or not pos.isdigit() or not file:
            raise ValueError(f"start position {text!r} is not earliest, latest, gtid:SET or "
                             "FILE:POS")
        return cls("file", file=file, pos=int(pos))


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has data within ``timeout`` seconds (TLS: decrypted bytes count)."""
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    return bool(select.select([sock], [], [], timeout)[0])


class LiveSource:
    """Decoded events from a server's binlog, read as a replica.

    ``blocking=False`` ends the stream when the reader reaches the end of what the server
    has (the server sends EOF); otherwise it waits for new events until ``stop()``.
    ``annotations=False`` asks MariaDB not to send its ANNOTATE_ROWS events (the statements
    behind row events; often the bigger part of a binlog's bytes) when nobody reads them.
    MariaDB 11.4+ writes the events inside a transaction with ``end_log_pos`` 0 (unless
    ``binlog_legacy_event_pos`` is on): their offsets are counted on from the event before,
    so from such a server ANNOTATE_ROWS events are always asked for, and left out here.

    ``wanted_types`` (event type codes) and ``skip_begin_commit`` speed up a reader that
    looks at few events (the schema history's scan for DDL): other types, and the bare
    BEGIN and COMMIT QUERY events, are mostly left out unread. Not all of them: an event in
    an unusual packet takes the general path, so such a reader still checks each type.
    With them, ``until`` (a position) ends the stream soon after the events read pass it:
    on a busy server, the next event such a reader wants may be far ahead."""

    def __init__(self, connection: dict[str, Any], start: StartPosition | None = None, *,
                 server_id: int = 0x3EADBEEF, blocking: bool = True,
                 heartbeat_seconds: float = 5.0, verify_checksums: bool = True,
                 decoder: EventDecoder | None = None, annotations: bool = True,
                 wanted_types: frozenset[int] | None = None, skip_begin_commit: bool = False,
                 until: tuple[str, int] | None = None):
        self.connection_settings = dict(connection)
        self.wanted_types = wanted_types
        self.skip_begin_commit = skip_begin_commit
        self.until = until
        self.annotations = annotations
        self.start = start or StartPosition()
        self.server_id = server_id
        self.blocking = blocking
        self.heartbeat_seconds = heartbeat_seconds
        self.verify_checksums = verify_checksums
        self.decoder = decoder
        self.is_mariadb = False
        self.server_version = ""
        self._counts_offsets = False  # the server may send events without end_log_pos
        self._conn: pymysql.Connection[Any] | None = None
        self._stop = threading.Event()
        self._woken = threading.Event()
        self._wake_fds: tuple[int, int] | None = None  # a pipe that ends a wait for events
        self._wake_lock = threading.Lock()  # no write to the pipe once it is closed
        self.file: str | None = None
        self.pos = 4

    def _connect(self, **extra: Any) -> pymysql.Connection[Any]:
        settings = {"connect_timeout": 10, **self.connection_settings, **extra}
        try:
            return open_connection(**settings)
        except pymysql.err.MySQLError as exc:
            host = settings.get("host", "localhost")
            raise ConnectionLostError(f"cannot connect to {host}:{settings.get('port', 3306)}: "
                              f"{exc.args[-1] if exc.args else exc}") from None

    def stop(self) -> None:
        """End the stream now, also from another thread while a read waits for events.

        The socket is shut down rather than closed: closing it leaves a read that is blocked
        in another thread waiting (PyMySQL's buffered reader keeps the descriptor open) until
        the next heartbeat; a shutdown wakes it at once. The reader closes the connection.
        """
        self._stop.set()
        conn = self._conn
        sock = getattr(conn, "_sock", None) if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def wake(self) -> None:
        """Make a read waiting for events report itself idle (``None``) now, from another
        thread (the router has something to put into the stream)."""
        self._woken.set()
        with self._wake_lock:
            fds = self._wake_fds
            if fds is not None:
                with contextlib.suppress(OSError):
                    os.write(fds[1], b"w")

    def _wait(self, sock: socket.socket, timeout: float) -> bool | None:
        """Whether ``sock`` has data within ``timeout`` seconds; ``None`` when woken."""
        if self._wake_fds is None:
            return _readable(sock, timeout)
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        waiting: list[Any] = [sock, self._wake_fds[0]]
        ready = select.select(waiting, [], [], timeout)[0]
        if sock in ready:
            return True
        if ready:
            with contextlib.suppress(OSError):
                os.read(self._wake_fds[0], 4096)
            self._woken.clear()
            return None
        return False

    def _query_one(self, conn: pymysql.Connection[Any], sql: str) -> tuple[Any, ...] | None:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()

    def _resolve_start(self, conn: pymysql.Connection[Any]) -> tuple[str, int]:
        kind = self.start.kind
        if kind == "file":
            assert self.start.file is not None
            return self.start.file, self.start.pos
        if kind == "earliest":
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                rows = cur.fetchall()
            if not rows:
                raise SourceError("the server has no binary logs: is log_bin enabled?")
            return rows[0][0], 4
        if kind == "latest":
            with conn.cursor() as cur:
                return binlog_head(cur)
        return "", 4

    def raw_events(self, idle: bool = False) -> Iterator[RawEvent | None]:
        """The events' bytes as the server sends them (with ``idle``: ``None`` whenever
        everything received so far has been handed out)."""
        return one_by_one(self.raw_batches(idle))

    def raw_batches(self, idle: bool = False) -> Iterator[list[RawEvent] | None]:
        """:meth:`raw_events` in lists, as many at a time as were framed at once."""
        conn = self._connect()
        self._conn = conn
        ended = False
        try:
            version = self._query_one(conn, "SELECT VERSION()")
            self.server_version = str(version[0]) if version else ""
            self.is_mariadb = "mariadb" in self.server_version.lower()
            self._counts_offsets = self.is_mariadb and self._query_one(
                conn, "SHOW GLOBAL VARIABLES LIKE 'binlog_legacy_event_pos'") is not None
            checksum = self._query_one(conn, "SELECT @@global.binlog_checksum")
            alg = CHECKSUM_CRC32 if checksum and str(checksum[0]).upper() == "CRC32" \
                else CHECKSUM_OFF
            if self.decoder is None:
                self.decoder = EventDecoder(verify_checksums=self.verify_checksums,
                                            checksum_alg=alg)
            else:
                self.decoder.checksum_alg = alg
            with conn.cursor() as cur:
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum, "
                            "@source_binlog_checksum = @@global.binlog_checksum")
                cur.execute("SET @master_heartbeat_period = %s",
                            (int(self.heartbeat_seconds * 1e9),))
                if self.is_mariadb:
                    cur.execute("SET @mariadb_slave_capability = 4")
            file, pos = self._resolve_start(conn)
            self._send_dump(conn, file, pos)
            self.file, self.pos = file or None, pos
            yield from self._read_batches(conn, idle)
            ended = True
        except GeneratorExit:  # the reader is done with the stream
            ended = True
            raise
        finally:
            self._conn = None
            with contextlib.suppress(Exception):
                conn.close()
            if self.blocking and (ended or self._stop.is_set()):
                self._end_dump_thread(conn)
            with self._wake_lock:
                fds, self._wake_fds = self._wake_fds, None
                for fd in fds or ():
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _end_dump_thread(self, conn: pymysql.Connection[Any]) -> None:
        """Have the server end the dump thread of ``conn``, a stream this source stopped.

        Waiting for new events, that thread does not see its client go until its next
        heartbeat, and MariaDB holds the next binlog dump with the same server id about 100
        ms while it ends such a thread: a router restarted within seconds waited that long
        for its first event. Best effort: a user without the right to end it, or a server
        that cannot be reached now, leaves it to its heartbeat."""
        thread_id = getattr(conn, "server_thread_id", None)
        if not thread_id:
            return
        settings = {**self.connection_settings, "connect_timeout": 2, "read_timeout": 2,
                    "write_timeout": 2}
        with contextlib.suppress(Exception):
            killer = open_connection(**settings)
            try:
                with killer.cursor() as cur:
                    cur.execute(f"KILL CONNECTION {int(thread_id[0])}")
            finally:
                killer.close()

    def _send_dump(self, conn: pymysql.Connection[Any], file: str, pos: int) -> None:
        flags = 0 if self.blocking else BINLOG_DUMP_NON_BLOCK
        if self.start.kind == "gtid":
            self._check_gtid_flavour(self.start.gtid or "")
        if self.start.kind == "gtid" and not self.is_mariadb:
            try:
                encoded = encode_gtid_set(self.start.gtid or "")
            except ValueError as exc:
                raise SourceError(f"cannot start from GTID set: {exc}") from None
            payload = (struct.pack("<HII", flags | BINLOG_THROUGH_GTID, self.server_id, 0)
                       + struct.pack("<QI", 4, len(encoded)) + encoded)
            conn._execute_command(  # type: ignore[attr-defined]  # PyMySQL's own, private
                COM_BINLOG_DUMP_GTID, payload)
            return
        if self.start.kind == "gtid":
            with conn.cursor() as cur:
                cur.execute("SET @slave_connect_state = %s", (self.start.gtid or "",))
                cur.execute("SET @slave_gtid_strict_mode = 0")
                cur.execute("SET @slave_gtid_ignore_duplicates = 0")
            file, pos = "", 4
        if self.is_mariadb and (self.annotations or self._counts_offsets):
            flags |= BINLOG_SEND_ANNOTATE_ROWS_EVENT
        payload = struct.pack("<IHI", pos, flags, self.server_id) + file.encode()
        conn._execute_command(COM_BINLOG_DUMP, payload)  # type: ignore[attr-defined]

    def _check_gtid_flavour(self, gtid: str) -> None:
        """Refuse a GTID start in the other flavour's form (a position saved from another
        server's stream, e.g. two jobs sharing one sink's position): the server's own
        answer would be a bare parse error."""
        if not gtid.strip() or is_mariadb_gtid(gtid) == self.is_mariadb:
            return
        form, server = ("MariaDB", "MySQL") if not self.is_mariadb else ("MySQL", "MariaDB")
        raise SourceError(
            f"cannot start from GTID set {gtid[:80]!r}: it is in {form}'s form and the server "
            f"is {server}: the position was saved from another server's stream (two jobs "
            "sharing one position file or control namespace?)")

    def _read_batches(self, conn: pymysql.Connection[Any], idle: bool
                      ) -> Iterator[list[RawEvent] | None]:
        """The dump stream's events, read straight from the socket in large chunks.

        With ``idle``, ``None`` is yielded each time every byte received so far has been
        handed out and the server has sent nothing more yet, so a reader can act on
        "caught up for now" (flush a batch) without waiting for a timer.
        """
        sock: socket.socket = conn._sock  # type: ignore[attr-defined]
        sock.setblocking(True)
        buf = bytearray()
        scratch = memoryview(bytearray(1 << 20))
        big: list[bytes] = []  # pieces of a packet longer than 16 MB
        silence = max(10.0, 3 * self.heartbeat_seconds) if self.blocking else 120.0
        heard = time.monotonic()  # when data last came
        if idle and self._wake_fds is None:
            with self._wake_lock:
                self._wake_fds = os.pipe()
                if self._woken.is_set():
                    os.write(self._wake_fds[1], b"w")
        drop_annotations = self._counts_offsets and not self.annotations
        annotate = et.MARIADB_ANNOTATE_ROWS
        framer = _FRAMING.dump_events if _FRAMING is not None else None
        kept = bytearray(1 if self.wanted_types is None or code in self.wanted_types else 0
                         for code in range(256))
        if drop_annotations:
            kept[annotate] = 0
        until_file, until_pos = self.until or (None, 0)
        decoder = self.decoder
        bracket_tail = -1 if not self.skip_begin_commit or decoder is None else \
            4 if decoder.checksum_alg == CHECKSUM_CRC32 else 0
        while True:
            start, n = 0, len(buf)
            while n - start >= 4:
                if framer is not None and not big:
                    # Many ordinary events at once; the packet it stops at is read below.
                    events, start, log_pos = framer(buf, start, self.file or "", kept,
                                                   bracket_tail)
                    if log_pos:
                        self.pos = log_pos
                    if events:
                        yield events
                    if until_file is not None and self.pos >= until_pos and \
                            self.file == until_file:
                        return
                    if n - start < 4:
                        break
                length = buf[start] | buf[start + 1] << 8 | buf[start + 2] << 16
                if n - start - 4 < length:
                    break
                body = start + 4
                start = body + length
                if length > 20 and buf[body] == 0 and length < 0xFFFFFF and not big and \
                        buf[body + 5] != et.ROTATE:
                    # An ordinary event (the common case, framed here with one copy).
                    event = bytes(buf[body + 1:start])
                    if _U32(event, 9)[0] != length - 1:
                        raise self._size_mismatch(event)
                    log_pos = _U32(event, 13)[0]
                    if log_pos:
                        self.pos = log_pos
                        offset = log_pos - length + 1
                    else:
                        offset = self._offset_without_log_pos(event)
                    if not (drop_annotations and event[4] == annotate):
                        yield [RawEvent(self.file or "", offset, event)]
                    continue
                payload = bytes(buf[body:start])
                if length == 0xFFFFFF:
                    big.append(payload)
                    continue
                if big:
                    payload = b"".join(big) + payload
                    big = []
                raw = self._packet(payload)
                if raw is _EOF:
                    if self.blocking:  # MySQL says EOF to its replicas as it shuts down
                        raise ConnectionLostError(f"lost the server at {self._where()}: "
                                                  "it ended the binlog stream (shut down?)")
                    return
                if isinstance(raw, RawEvent) and not (
                        drop_annotations and raw.data[4] == annotate):
                    yield [raw]
            if start:
                del buf[:start]
            if self._stop.is_set():
                return
            if idle and not _readable(sock, 0):
                yield None
            try:
                ready = self._wait(sock, max(0.0, heard + silence - time.monotonic()))
                if ready is None:
                    continue  # woken: report idle again
                if not ready:
                    raise ConnectionLostError(
                        f"lost the server at {self._where()}: nothing received for "
                        f"{silence:.0f}s (not even a heartbeat)")
                # Into one buffer: recv(n) allocates n bytes per call, and a TLS read
                # returns one record (16 kB) at most.
                got = sock.recv_into(scratch)
                heard = time.monotonic()
            except (OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                raise ConnectionLostError(f"lost the server at {self._where()}: {exc}") from None
            if not got:
                if self._stop.is_set():
                    return
                raise ConnectionLostError(f"lost the server at {self._where()}: connection closed")
            buf += scratch[:got]

    def _packet(self, data: bytes) -> RawEvent | object | None:
        """One packet of the dump stream: an event, ``_EOF``, or ``None`` to skip."""
        head = data[:1]
        if head == b"\xfe" and len(data) < 9:
            return _EOF  # caught up in non-blocking mode
        if head == b"\xff":
            code = struct.unpack_from("<H", data, 1)[0] if len(data) >= 3 else 0
            message = data[9:].decode("utf-8", "replace") if data[3:4] == b"#" \
                else data[3:].decode("utf-8", "replace")
            if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                raise PurgedPositionError(
                    f"the server cannot send the binlog from {self._where()}: {message}. "
                    "The position was probably purged; restart from 'earliest' or a newer "
                    "GTID set/position (and re-snapshot what was missed)")
            error = ConnectionLostError if code in _CONNECTION_ENDED else SourceError
            raise error(f"the server stopped the binlog stream at {self._where()}: "
                              f"error {code}: {message}")
        if head != b"\x00":
            return None
        event = data[1:]
        size = len(event)
        if size < HEADER_SIZE:
            raise BinlogError(f"dump packet too short for an event: {size} bytes",
                              self.file or "", self.pos)
        if _U32(event, 9)[0] != size:
            raise self._size_mismatch(event)
        type_code, log_pos = event[4], _U32(event, 13)[0]
        if type_code == et.ROTATE:
            if size < HEADER_SIZE + 8:
                raise BinlogError(f"ROTATE event too short: {size} bytes", self.file or "",
                                  self.pos)
            new_file = event[27:size - (4 if self.decoder and
                                        self.decoder.checksum_alg == CHECKSUM_CRC32 else 0)]
            offset = 0 if log_pos == 0 else log_pos - size
            raw = RawEvent(self.file or "", offset, event)
            self.file = new_file.decode("utf-8", "replace")
            self.pos = struct.unpack_from("<Q", event, 19)[0]
            return raw
        if log_pos:
            self.pos = log_pos
            return RawEvent(self.file or "", log_pos - size, event)
        return RawEvent(self.file or "", self._offset_without_log_pos(event), event)

    def _size_mismatch(self, event: bytes) -> BinlogError:
        """An event whose size field is not its packet's (the decode workers cut events out
        of a segment by that field)."""
        return BinlogError(f"{et.event_type_name(event[4])} event's size field says "
                           f"{_U32(event, 9)[0]} bytes, its packet holds {len(event)}",
                           self.file or "", self.pos)

    def _offset_without_log_pos(self, event: bytes) -> int:
        """Where an event sent with ``end_log_pos`` 0 starts: 4 for the format description;
        else where the event before it ended (MariaDB 11.4+ writes 0 inside transactions),
        and the position moves past it unless it is artificial (not in the file)."""
        if event[4] == et.FORMAT_DESCRIPTION:
            return 4
        offset = self.pos
        if not event[17] & et.LOG_EVENT_ARTIFICIAL_F and event[4] not in _HEARTBEATS:
            self.pos = offset + len(event)
        return offset

    def _where(self) -> str:
        return f"{self.file or '?'}:{self.pos}"

    def __iter__(self) -> Iterator[Event]:
        for raw in self.raw_events():
            assert raw is not None and self.decoder is not None
            yield self.decoder.decode(raw.data, raw.file, raw.offset)

    def stream(self) -> Iterator[Event | None]:
        """Decoded events, and ``None`` each time the reader has caught up for now."""
        for raw in self.raw_events(idle=True):
            if raw is None:
                yield None
            else:
                assert self.decoder is not None
                yield self.decoder.decode(raw.data, raw.file, raw.offset)
