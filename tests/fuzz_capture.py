"""Recording what a server sends a replica: a private MariaDB runs a small workload, and the
bytes of its COM_BINLOG_DUMP reply (every packet, from the fake ROTATE to the EOF of a
non-blocking dump) are saved as they came off the socket, for the fuzz harness's
``packets`` target (:mod:`tests.fuzz_binlogs`) to replay."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from changestream.devserver import EmbeddedMariaDB
from changestream.sources.live import LiveSource, StartPosition
from changestream.sources.raw import RawEvent
from changestream.sources.source_url import parse_source_url

WORKLOAD = [
    "CREATE DATABASE fuzz",
    "CREATE TABLE fuzz.t (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2), "
    "at DATETIME(3), doc JSON, data BLOB, kind ENUM('a','b'), tags SET('x','y'), "
    "flags BIT(5), ratio DOUBLE) ENGINE=InnoDB",
    "INSERT INTO fuzz.t VALUES (1, 'one', 1.50, '2026-01-02 03:04:05.678', '{\"a\": [1]}', "
    "x'00ff', 'a', 'x,y', b'10101', 0.25), (2, 'zwei', -2.00, NULL, NULL, NULL, 'b', '', "
    "b'0', -1e300)",
    "UPDATE fuzz.t SET name = 'uno', price = price + 1 WHERE id = 1",
    "DELETE FROM fuzz.t WHERE id = 2",
    "ALTER TABLE fuzz.t ADD COLUMN note TEXT",
    "INSERT INTO fuzz.t (id, note) VALUES (3, 'après')",
    "CREATE TABLE fuzz.m (k INT, v VARCHAR(5)) ENGINE=MyISAM",
    "INSERT INTO fuzz.m VALUES (1, 'a'), (1, 'a')",
]


class _Recording:
    """A socket that keeps a copy of everything received through ``recv_into``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received = bytearray()

    def recv_into(self, buffer: Any) -> int:
        n = self.sock.recv_into(buffer)
        self.received += bytes(buffer[:n])
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


class _RecordingSource(LiveSource):
    recording: _Recording | None = None

    def _read_batches(self, conn: Any, idle: bool) -> Iterator[list[RawEvent] | None]:
        self.recording = _Recording(conn._sock)
        conn._sock = self.recording
        return super()._read_batches(conn, idle)


def record_capture(path: Path) -> Path:
    """Start a private MariaDB, run the workload and save its dump stream to ``path``
    (``-crc32`` added to the name when the events carry checksums); the file written."""
    with EmbeddedMariaDB() as server:
        server.start()
        server.execute(WORKLOAD)
        connection = parse_source_url(server.url).connection | {"ssl_disabled": True}
        source = _RecordingSource(connection, StartPosition("earliest"), blocking=False)
        events = sum(1 for _ in source.raw_events())
        checksum = server.execute("SELECT @@global.binlog_checksum")[0][0]
    assert source.recording is not None and events
    data = bytes(source.recording.received)
    if "crc32" not in path.name and str(checksum).upper() == "CRC32":
        path = path.with_name(f"{path.stem}-crc32{path.suffix}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
