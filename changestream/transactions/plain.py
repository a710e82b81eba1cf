"""What a plain DML transaction is, from its events' bytes: the one definition the
segmenter (which hands such transactions to decode workers) and the workers' encoder (which
turns them into records) share.

A plain transaction begins with a GTID event (MariaDB: neither standalone nor XA), then
(MySQL) BEGIN, holds TABLE_MAPs, rows events and statement annotations, and ends with XID or
COMMIT. BEGIN and COMMIT are told by :func:`changestream.decoding.statements.
statement_kind`, as the assembler tells them.
"""

from __future__ import annotations

import struct

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import HEADER_SIZE
from changestream.decoding.events import FL_COMPLETED_XA, FL_PREPARED_XA, FL_STANDALONE
from changestream.decoding.statements import BEGIN, COMMIT, OTHER, statement_kind

#: MySQL's events that begin a transaction's group.
MYSQL_GTID_EVENTS = frozenset({et.GTID, et.ANONYMOUS_GTID, et.GTID_TAGGED})

# A MariaDB GTID event's flags byte follows its sequence number and domain id.
_MARIADB_FLAGS_AT = HEADER_SIZE + 12
_NOT_PLAIN = FL_STANDALONE | FL_PREPARED_XA | FL_COMPLETED_XA
_U16 = struct.Struct("<H").unpack_from


def mariadb_group_is_plain(flags: int) -> bool:
    """Whether a MariaDB GTID event with ``flags`` begins a plain transaction (not a
    statement standing alone, not XA)."""
    return not flags & _NOT_PLAIN


def opens_plain_group(data: bytes) -> bool:
    """Whether the event in ``data`` is a GTID event that begins a plain transaction."""
    code = data[4]
    return code in MYSQL_GTID_EVENTS or (
        code == et.MARIADB_GTID and len(data) > _MARIADB_FLAGS_AT
        and mariadb_group_is_plain(data[_MARIADB_FLAGS_AT]))


def query_kind(data: bytes, post_header: int, body_end: int) -> str:
    """What the statement of the QUERY event in ``data`` is to its transaction (the kinds
    of :mod:`changestream.decoding.statements`), read from the event's bytes:
    ``post_header`` is the QUERY post-header length, ``body_end`` where its body ends.
    An event too short for its post-header is ``OTHER`` (the decoder says what is wrong)."""
    if len(data) < HEADER_SIZE + max(post_header, 13):
        return OTHER
    status_len = _U16(data, HEADER_SIZE + 11)[0] if post_header >= 13 else 0
    start = HEADER_SIZE + post_header + status_len + data[HEADER_SIZE + 8] + 1
    head = data[start:min(body_end, start + 32)]
    # What the servers write around every transaction, told without decoding the text.
    if head == b"BEGIN":
        return BEGIN
    if head == b"COMMIT":
        return COMMIT
    # Only the statement's first words tell its kind.
    return statement_kind(head.decode("latin-1"))
