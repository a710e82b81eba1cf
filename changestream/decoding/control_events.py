"""Decoders of the binlog's control event bodies: ROTATE, HEARTBEAT, INCIDENT, MariaDB's
BINLOG_CHECKPOINT, events whose bodies nobody reads, and the refusal of the events that
make a binlog unreadable here (START_EVENT_V3, START_ENCRYPTION)."""

from __future__ import annotations

import struct
from typing import NoReturn

from changestream.decoding.events import (
    BinlogCheckpointEvent,
    Event,
    EventHeader,
    HeartbeatEvent,
    IncidentEvent,
    RotateEvent,
)
from changestream.model.errors import UnsupportedBinlogError

__all__ = [
    "decode_binlog_checkpoint",
    "decode_heartbeat",
    "decode_incident",
    "decode_plain",
    "decode_rotate",
    "refuse_start_encryption",
    "refuse_start_v3",
]

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


def decode_rotate(h: EventHeader, body: bytes, post_header_length: int) -> Event:
    """A ROTATE event; ``post_header_length`` is the one the FORMAT_DESCRIPTION gives it."""
    post = post_header_length
    position = _U64(body, 0)[0] if post >= 8 else 4
    return RotateEvent(h, position, bytes(body[post:]).decode("utf-8", "replace"))


def decode_plain(h: EventHeader, body: bytes) -> Event:
    """An event whose body is not read: only its header."""
    return Event(h)


def decode_heartbeat(h: EventHeader, body: bytes) -> Event:
    """A HEARTBEAT event: the binlog file the server is at."""
    return HeartbeatEvent(h, bytes(body).decode("utf-8", "replace"))


def decode_incident(h: EventHeader, body: bytes) -> Event:
    """An INCIDENT event: the server may have lost changes here."""
    incident = _U16(body, 0)[0]
    n = body[2] if len(body) > 2 else 0
    return IncidentEvent(h, incident, bytes(body[3:3 + n]).decode("utf-8", "replace"))


def decode_binlog_checkpoint(h: EventHeader, body: bytes) -> Event:
    """A MariaDB BINLOG_CHECKPOINT event: the oldest binlog crash recovery still needs."""
    n = _U32(body, 0)[0]
    return BinlogCheckpointEvent(h, bytes(body[4:4 + n]).decode("utf-8", "replace"))


def refuse_start_v3(h: EventHeader, body: bytes) -> NoReturn:
    """START_EVENT_V3 begins a binlog v3 file, which is not supported: always raises."""
    version = bytes(body[2:52]).split(b"\0", 1)[0].decode("ascii", "replace")
    raise UnsupportedBinlogError(
        f"binlog format v3 (START_EVENT_V3, server {version}) is not supported; "
        "changestream reads binlog v4 (MySQL 5.0 and later, MariaDB)", h.file, h.offset)


def refuse_start_encryption(h: EventHeader, body: bytes) -> NoReturn:
    """START_ENCRYPTION: the events after it are encrypted, so always raises."""
    raise UnsupportedBinlogError(
        "encrypted binlog (START_ENCRYPTION event): the events after it cannot be read "
        "without the server's key; read it live from the server instead", h.file, h.offset)
