"""What a QUERY event's statement is to the transaction it is in: BEGIN, COMMIT, ROLLBACK,
an XA statement, one that is skipped inside a transaction (savepoints), or one that stands
alone (DDL, administration)."""

from __future__ import annotations

import re

BEGIN, COMMIT, ROLLBACK = "begin", "commit", "rollback"
XA_START, XA_END, XA_PREPARE, XA_RESOLVE = "xa_start", "xa_end", "xa_prepare", "xa_resolve"
SKIPPED, OTHER = "skipped", "other"

_XA_RESOLVE = re.compile(r"^\s*XA\s+(COMMIT|ROLLBACK)\s+(.*?)(\s+ONE\s+PHASE)?\s*;?\s*$",
                         re.I | re.S)
_SKIPPED = ("SAVEPOINT", "ROLLBACK TO", "RELEASE SAVEPOINT")


def statement_kind(query: str) -> str:
    """One of the kinds above."""
    head = query[:24].lstrip().upper()
    if head.startswith("BEGIN"):
        return BEGIN
    if head.startswith("COMMIT"):
        return COMMIT
    if head.startswith("ROLLBACK") and not head.startswith("ROLLBACK TO"):
        return ROLLBACK
    if head.startswith("XA "):
        if head.startswith(("XA START", "XA BEGIN")):
            return XA_START
        if head.startswith("XA END"):
            return XA_END
        return XA_PREPARE if head.startswith("XA PREPARE") else XA_RESOLVE
    return SKIPPED if head.startswith(_SKIPPED) else OTHER


def normal_xid(text: str) -> str:
    """An XA transaction id as written in a statement, without its white space."""
    return re.sub(r"\s+", "", text)


def prepared_xid(query: str) -> str:
    """The id an ``XA PREPARE`` statement names."""
    return normal_xid(query.strip()[len("XA PREPARE"):])


def xa_resolution(query: str) -> tuple[str, str, bool] | None:
    """``(COMMIT or ROLLBACK, xid, one phase)`` of an ``XA COMMIT``/``XA ROLLBACK``
    statement (``None``: not one)."""
    m = _XA_RESOLVE.match(query)
    if m is None:
        return None
    return m.group(1).upper(), normal_xid(m.group(2)), bool(m.group(3))
