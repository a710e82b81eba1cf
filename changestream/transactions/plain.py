"""What a plain DML transaction is, from its events' bytes: the one definition the
segmenter (which hands such transactions to decode workers) and the workers' encoder (which
turns them into records) share.

A plain transaction begins with a GTID event (MariaDB: neither standalone nor XA), then
(MySQL) BEGIN, holds TABLE_MAPs, rows events and statement annotations, and ends with XID or
COMMIT. BEGIN and COMMIT are told by :func:`changestream.decoding.query_kind.query_kind`,
as the assembler tells them.
"""

from __future__ import annotations

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import HEADER_SIZE
from changestream.decoding.events import FL_COMPLETED_XA, FL_PREPARED_XA, FL_STANDALONE

#: MySQL's events that begin a transaction's group.
MYSQL_GTID_EVENTS = frozenset({et.GTID, et.ANONYMOUS_GTID, et.GTID_TAGGED})

# A MariaDB GTID event's flags byte follows its sequence number and domain id.
MARIADB_FLAGS_AT = HEADER_SIZE + 12
NOT_PLAIN = FL_STANDALONE | FL_PREPARED_XA | FL_COMPLETED_XA


def mariadb_group_is_plain(flags: int) -> bool:
    """Whether a MariaDB GTID event with ``flags`` begins a plain transaction (not a
    statement standing alone, not XA)."""
    return not flags & NOT_PLAIN


def opens_plain_group(data: bytes) -> bool:
    """Whether the event in ``data`` is a GTID event that begins a plain transaction."""
    code = data[4]
    return code in MYSQL_GTID_EVENTS or (
        code == et.MARIADB_GTID and len(data) > MARIADB_FLAGS_AT
        and mariadb_group_is_plain(data[MARIADB_FLAGS_AT]))
