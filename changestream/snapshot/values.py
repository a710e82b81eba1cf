"""Values read by ``SELECT`` turned into what the binlog decoder gives for the same row.

Every value comes as the bytes the server sent (no conversions, text in utf8mb4); each
column's converter is chosen once from its type (the table's :class:`TableSchema`), so a
snapshot row's record is the record the same row gets from a rows event. The mapping is
the decoder's (:mod:`changestream.decoding.row_values`, docs/records.md): zero or invalid
dates stay the text the server prints, TIMESTAMP is UTC (the session's time zone)."""

from __future__ import annotations

import datetime as dt
import re
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import orjson

from changestream.decoding import field_types as ft
from changestream.decoding.json_binary import JSON_NULL
from changestream.decoding.table_schema import Column, TableSchema

Converter = Callable[[Any], Any]
_TIME = re.compile(r"^(-)?(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")
INTEGERS = frozenset({ft.TINY, ft.SHORT, ft.INT24, ft.LONG, ft.LONGLONG, ft.YEAR})


def _date(text: str) -> Any:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return text  # a zero or invalid date, as the decoder gives it


def _datetime(text: str) -> Any:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return text


def _timestamp(text: str) -> Any:
    try:
        return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
    except ValueError:
        return text


def _time(text: str) -> Any:
    match = _TIME.match(text)
    if match is None:
        return text
    sign, hours, minutes, seconds, fraction = match.groups()
    value = dt.timedelta(hours=int(hours), minutes=int(minutes), seconds=int(seconds),
                         microseconds=int((fraction or "0").ljust(6, "0")))
    return -value if sign else value


def _set(text: str) -> list[str]:
    return text.split(",") if text else []


def _bit(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


def _json(text: str | bytes) -> Any:
    value = orjson.loads(text)
    return JSON_NULL if value is None else value


def _vector(raw: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def as_read(value: Any) -> Any:
    return value


def utf8(raw: bytes) -> str:
    return raw.decode("utf-8")


def converter(column: Column) -> Converter:
    """How one column's ``SELECT`` value (bytes) becomes the decoder's value (not for
    NULL)."""
    convert = text_converter(column)
    if convert is as_read:
        # Character columns as text; binary ones (and GEOMETRY, BIT) stay bytes.
        return utf8 if column.type_code not in _RAW and column.collation != 63 else as_read
    if convert in (_bit, _vector, int, float):  # int and float read bytes as they are
        return convert
    return lambda raw: convert(raw.decode("utf-8"))


_RAW = frozenset({ft.GEOMETRY, ft.BIT, ft.VECTOR})


def text_converter(column: Column) -> Converter:
    t = column.type_code
    if t in INTEGERS:
        return int
    if t in (ft.FLOAT, ft.DOUBLE):
        return float
    if t == ft.NEWDECIMAL:
        return Decimal
    if t in (ft.DATE, ft.NEWDATE):
        return _date
    if t in (ft.DATETIME, ft.DATETIME2):
        return _datetime
    if t in (ft.TIMESTAMP, ft.TIMESTAMP2):
        return _timestamp
    if t in (ft.TIME, ft.TIME2):
        return _time
    if t == ft.SET:
        return _set
    if t == ft.BIT:
        return _bit
    if t == ft.JSON:
        return _json
    if t == ft.VECTOR:
        return _vector
    return as_read


def row_converter(schema: TableSchema, excluded: frozenset[str] = frozenset(),
                  ) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """A ``SELECT`` row of every column of ``schema``, in order, as the decoder's row, the
    ``excluded`` columns left out."""
    converters = [(name, converter(c)) for name, c in zip(schema.column_names, schema.columns)]
    kept = [n not in excluded for n in schema.column_names]

    def convert(row: Sequence[Any]) -> dict[str, Any]:
        return {name: None if value is None else conv(value)
                for (name, conv), value in zip(converters, row)}

    if all(kept):
        return convert

    def convert_kept(row: Sequence[Any]) -> dict[str, Any]:
        return {name: None if value is None else conv(value)
                for (name, conv), value, keep in zip(converters, row, kept) if keep}

    return convert_kept

    return convert
