"""How DATETIME, TIMESTAMP and TIME values are written in change records: one rule per column.

Every value of a column is written with exactly the column's fractional digits (its
precision, 0 to 6): DATETIME as ``YYYY-MM-DDTHH:MM:SS[.f]``, TIMESTAMP the same with
``+00:00``, TIME as ``[-]HH:MM:SS[.f]`` (hours can pass 24). Zero and invalid dates, which
the decoder gives as the text the server prints, are written in the same pattern
(``0000-00-00T00:00:00``), so a column never mixes two formats. The Python values handed to
callbacks and the Spark sink are unchanged (datetime, timedelta, or the server's text).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import TableSchema

TextFormat = Callable[[Any], Any]
ColumnFormats = tuple[tuple[str, TextFormat], ...]
"""``(column name, format)`` of the columns whose values a record writes by its own rule."""


def time_text(value: dt.timedelta) -> str:
    """A TIME value with six fractional digits."""
    micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    seconds, us = divmod(abs(micros), 1_000_000)
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return f"{sign}{h:02d}:{m:02d}:{s:02d}.{us:06d}"


def datetime_format(fsp: int, utc: bool) -> TextFormat:
    """DATETIME (``utc`` false) or TIMESTAMP values with ``fsp`` fractional digits."""
    width = 19 + (fsp + 1 if fsp else 0)
    suffix = "+00:00" if utc else ""

    def write(value: Any) -> Any:
        if type(value) is str:  # a zero or invalid date, as the server prints it
            return value.replace(" ", "T", 1) + suffix
        if isinstance(value, dt.datetime):
            return value.isoformat(timespec="microseconds")[:width] + suffix
        return value

    return write


def time_format(fsp: int) -> TextFormat:
    """TIME values with ``fsp`` fractional digits."""
    end = None if fsp == 6 else (fsp - 6 if fsp else -7)  # "HH:MM:SS.ffffff"

    def write(value: Any) -> Any:
        if isinstance(value, dt.timedelta):
            return time_text(value)[:end]
        return value

    return write


def column_formats(schema: TableSchema | None) -> ColumnFormats:
    """The temporal columns of ``schema`` and how their values are written."""
    if schema is None:
        return ()
    formats: list[tuple[str, TextFormat]] = []
    for column in schema.columns:
        t = column.type_code
        if t in (ft.DATETIME2, ft.DATETIME):
            formats.append((column.display_name,
                            datetime_format(column.fsp if t == ft.DATETIME2 else 0, False)))
        elif t in (ft.TIMESTAMP2, ft.TIMESTAMP):
            formats.append((column.display_name,
                            datetime_format(column.fsp if t == ft.TIMESTAMP2 else 0, True)))
        elif t in (ft.TIME2, ft.TIME):
            formats.append((column.display_name, time_format(column.fsp if t == ft.TIME2 else 0)))
    return tuple(formats)


class FormatCache:
    """``column_formats`` by schema, worked out once per schema object."""

    def __init__(self, limit: int = 10_000):
        self.limit = limit
        self._formats: dict[int, tuple[TableSchema, ColumnFormats]] = {}

    def __call__(self, schema: TableSchema | None) -> ColumnFormats:
        if schema is None:
            return ()
        found = self._formats.get(id(schema))
        if found is None or found[0] is not schema:
            if len(self._formats) > self.limit:
                self._formats.clear()
            found = self._formats[id(schema)] = (schema, column_formats(schema))
        return found[1]


def formatted(image: dict[str, Any] | None, formats: ColumnFormats) -> dict[str, Any] | None:
    """``image`` with its temporal values as text (a copy when any is present)."""
    if not image:
        return image
    copy = None
    for name, write in formats:
        value = image.get(name)
        if value is not None:
            if copy is None:
                copy = dict(image)
            copy[name] = write(value)
    return image if copy is None else copy
