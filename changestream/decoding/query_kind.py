"""What a QUERY event's statement is to its transaction, read from the event's bytes
without decoding it: what the segmenter, the workers' encoder and the schema history's
binlog scan tell BEGIN and COMMIT by (the kinds of :mod:`.statements`)."""

from __future__ import annotations

import struct

from changestream.decoding.event_decoder import HEADER_SIZE
from changestream.decoding.statements import BEGIN, COMMIT, OTHER, statement_kind

_U16 = struct.Struct("<H").unpack_from


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
