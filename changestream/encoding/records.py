"""Change records: a change as one JSON object, in changestream's format or the original one.

Values keep their meaning (docs/records.md, "Values in records", has the full table):
integers as JSON numbers (unsigned BIGINT exact), DECIMAL as a string with its scale,
DATETIME as ``YYYY-MM-DDTHH:MM:SS[.f]``, TIMESTAMP the same with ``+00:00``, TIME as
``[-]HH:MM:SS[.f]`` (hours can pass 24), each with exactly its column's fractional digits
(:mod:`changestream.encoding.temporal_text`), DATE as ``YYYY-MM-DD``, bytes as base64, JSON
columns as JSON (a JSON ``null`` document as ``{"$json": null}``, SQL NULL as ``null``),
ENUM as its label, SET as a list of labels, BIT as a number, VECTOR as a list of numbers."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from typing import Any

import orjson

from changestream.decoding.json_binary import JSON_NULL
from changestream.decoding.rows import PartialJson
from changestream.encoding.temporal_text import ColumnFormats, FormatCache, formatted, time_text
from changestream.model.changes import Change
from changestream.model.modes import FORMATS


def _datetime_text(value: dt.datetime) -> str:
    # isoformat() without arguments is twice as quick and the same when there are
    # microseconds; it leaves them out when there are none.
    if value.microsecond:
        return value.isoformat()
    return value.isoformat(timespec="microseconds")


def _decimal_text(value: Decimal) -> str:
    # str() is three times as quick as format(value, "f") and the same unless it chooses
    # exponent notation (``0E-10``, ``1E+2``).
    text = str(value)
    if "E" in text or "e" in text:
        return format(value, "f")
    return text


def _bytes_text(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


# The common types by exact type, without a chain of isinstance checks.
_BY_TYPE: dict[type, Callable[[Any], Any]] = {
    dt.datetime: _datetime_text,
    dt.date: dt.date.isoformat,
    Decimal: _decimal_text,
    bytes: _bytes_text,
    dt.timedelta: time_text,
}


def json_default(value: Any) -> Any:
    """How values orjson does not know are written."""
    convert = _BY_TYPE.get(type(value))
    if convert is not None:
        return convert(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return format(value, "f")  # str() would write DECIMAL(20,10) zero as 0E-10
    if isinstance(value, dt.timedelta):
        return time_text(value)
    if isinstance(value, dt.time):
        return value.isoformat(timespec="microseconds")
    if value is JSON_NULL:
        return JSON_NULL_RECORD
    if isinstance(value, PartialJson):
        return {"partial_json_diffs": [repr(d) for d in value.diffs]}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


JSON_NULL_RECORD = {"$json": None}
"""How a JSON column holding the JSON literal null is written (SQL NULL is ``null``)."""

JSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_APPEND_NEWLINE | \
    orjson.OPT_NON_STR_KEYS


def commit_time_text(value: dt.datetime | None) -> str | None:
    """A record's ``commit_ts`` text."""
    return value.isoformat(timespec="microseconds") if value is not None else None


def change_record(change: Change, ts: str) -> dict[str, Any]:
    """A change in changestream's format (``ts``: when the router wrote it)."""
    t = change.transaction
    return _record(change, ts, change.sql, commit_time_text(t.commit_ts) if t is not None else None)


_FORMATS = FormatCache()


def _record(change: Change, ts: str, sql: Any, commit_ts: str | None) -> dict[str, Any]:
    """``change_record`` with the statement (possibly pre-encoded) and the commit time
    given, so changes that share them do not convert them again."""
    t = change.transaction
    return row_record(
        change.op, change.database, change.table, change.before, change.after,
        change.primary_key, sql, transaction_fields(
            t.id, t.gtid, t.xid, change.seq, t.size, change.last, commit_ts,
        ) if t is not None else None, change.file, change.pos, change.row, ts,
        _FORMATS(change.schema))


def transaction_fields(id: str, gtid: str | None, xid: int | str | None, seq: int,
                       size: int, last: bool, commit_ts: str | None) -> dict[str, Any]:
    """A record's ``transaction``: the transaction's id, GTID, XID, the change's place in
    it (``seq`` of ``size``, ``last``) and the commit time's text."""
    return {"id": id, "gtid": gtid, "xid": xid, "seq": seq, "size": size, "last": last,
            "commit_ts": commit_ts}


def row_record(op: str, database: str | None, table: str | None, before: Any, after: Any,
               primary_key: Any, sql: Any, transaction: dict[str, Any] | None, file: str,
               pos: int, row: int, ts: str, formats: ColumnFormats = ()) -> dict[str, Any]:
    """A record in changestream's format from its fields (``transaction``: the record's
    ``id``, ``gtid``, ``xid``, ``seq``, ``size``, ``last`` and ``commit_ts``; ``formats``:
    how the table's temporal columns are written, see
    :mod:`changestream.encoding.temporal_text`)."""
    if formats:
        before, after = formatted(before, formats), formatted(after, formats)
        primary_key = formatted(primary_key, formats)
    return {
        "op": op, "database": database, "table": table, "before": before, "after": after,
        "primary_key": primary_key, "sql": sql, "transaction": transaction,
        "position": {"file": file, "pos": pos, "row": row}, "ts": ts,
    }


def original_record(change: Change, ts: str) -> dict[str, Any]:
    """A change in the original changestream message format."""
    t = change.transaction
    formats = _FORMATS(change.schema)
    before, after = formatted(change.before, formats), formatted(change.after, formats)
    data = after if change.op != "delete" else before
    record: dict[str, Any] = {
        "mutation": change.op.upper(),
        "sequence": change.seq,
        "database": change.database,
        "table": change.table,
        "query": {
            "timestamp": int(t.commit_ts.timestamp() * 1000) if t and t.commit_ts else None,
            "sql": change.sql or "",
            "row_count": t.size if t else 1,
            "current_row": change.seq + 1,
        },
        "primary_key": formatted(change.primary_key, formats) or {},
        "transaction": {"id": t.id if t else None, "current_row": change.seq,
                        **({"last_mutation": True} if change.last else {})},
        "row_data": data,
    }
    if change.op == "update":
        record["old_row_data"] = before
    return record


_BUILDERS: dict[str, Callable[[Change, str], dict[str, Any]]] = {
    "changestream": change_record,
    "original": original_record,
}


def record_builder(fmt: str) -> Callable[[Change, str], dict[str, Any]]:
    try:
        return _BUILDERS[fmt]
    except KeyError:
        raise ValueError(f"unknown record format {fmt!r}: use one of {', '.join(FORMATS)}") \
            from None


def encode_lines(changes: Iterable[Change], fmt: str = "changestream",
                 ts: str | None = None) -> bytes:
    """The changes as JSON lines (each ending in a newline)."""
    return b"".join(iter_lines(changes, fmt, ts))


def iter_lines(changes: Iterable[Change], fmt: str = "changestream", ts: str | None = None,
               chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
    """The changes as JSON lines, in chunks of whole lines of about ``chunk_bytes`` each
    (a writer need not hold all of a batch's records at once)."""
    pending: list[bytes] = []
    size = 0
    for line in record_lines(changes, fmt, ts):
        pending.append(line)
        size += len(line)
        if size >= chunk_bytes:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


def record_lines(changes: Iterable[Change], fmt: str = "changestream",
                 ts: str | None = None) -> Iterator[bytes]:
    """Each change as one JSON line (ending in a newline)."""
    stamp = ts or dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")
    if fmt == "changestream":
        records: Iterator[Any] = _change_records(changes, stamp)
    else:
        build = record_builder(fmt)
        records = (build(c, stamp) for c in changes)
    dumps = orjson.dumps
    for record in records:
        yield dumps(record, default=json_default, option=JSON_OPTIONS)


# Statements longer than this are encoded once for all the changes that carry them (every
# row of a multi-row INSERT carries the whole statement).
_SHARED_SQL = 512


def shared_sql(text: str | None) -> Any:
    """A statement as a record's ``sql`` value: long ones encoded once, to be shared by the
    records of all the rows they changed."""
    if text is not None and len(text) > _SHARED_SQL:
        return orjson.Fragment(orjson.dumps(text))
    return text


def _change_records(changes: Iterable[Change], stamp: str) -> Iterator[dict[str, Any]]:
    """``change_record`` of each change, written alike, but with what changes share (the
    statement, the commit time) encoded once."""
    info: Any = _change_records  # no TransactionInfo is this
    commit: Any = _change_records  # nor any commit time
    commit_ts: str | None = None
    sql_text: Any = _change_records
    sql: Any = None
    for change in changes:
        t = change.transaction
        if t is not info:
            info = t
            if t is None:
                commit, commit_ts = None, None
            elif t.commit_ts is not commit:
                commit = t.commit_ts
                commit_ts = commit_time_text(commit)
        if change.sql is not sql_text:
            sql_text = change.sql
            sql = shared_sql(sql_text)
        yield _record(change, stamp, sql, commit_ts)
