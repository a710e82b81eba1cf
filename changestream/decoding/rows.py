"""Rows event bodies (WRITE/UPDATE/DELETE v0-v2, PARTIAL_UPDATE, MariaDB compressed) to rows."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from changestream.decoding import field_types as ft
from changestream.decoding.json_binary import JsonDiff, apply_json_diffs, decode_json_diffs
from changestream.decoding.packed import read_packed_int
from changestream.decoding.row_values import ValueReader, value_reader
from changestream.decoding.table_schema import TableSchema

PARTIAL_JSON_UPDATES = 1


class _Absent:
    """Marks a column that is not in a row image (binlog_row_image=MINIMAL/NOBLOB)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


@dataclass(slots=True, frozen=True)
class PartialJson:
    """A JSON after-image logged as a diff against a before-image that was not logged."""

    diffs: tuple[JsonDiff, ...]


class RowsFormatError(ValueError):
    """The row images do not fit the table's schema."""


@dataclass(slots=True, frozen=True)
class RowsBody:
    """The decoded part of a rows event after its post-header."""

    column_count: int
    present: tuple[int, ...]
    present_after: tuple[int, ...] | None
    rows: list[Any]


def _present_columns(bitmap: bytes, ncols: int) -> tuple[int, ...]:
    bits = int.from_bytes(bitmap, "little")
    return tuple(i for i in range(ncols) if bits >> i & 1)


class RowImageDecoder:
    """Decodes row images of one table schema; built once per TABLE_MAP and reused."""

    __slots__ = ("_readers", "json_columns", "ncols", "schema")

    def __init__(self, schema: TableSchema):
        self.schema = schema
        self.ncols = len(schema.columns)
        self._readers: list[ValueReader] = [value_reader(c) for c in schema.columns]
        self.json_columns = tuple(c.index for c in schema.columns if c.type_code == ft.JSON)

    def read_image(self, buf: bytes, pos: int, present: tuple[int, ...],
                   partial: frozenset[int] = frozenset()) -> tuple[list[Any], int]:
        """One row image starting at ``pos``: its values (full width) and the next offset."""
        nbytes = (len(present) + 7) >> 3
        nulls = int.from_bytes(buf[pos:pos + nbytes], "little")
        pos += nbytes
        readers = self._readers if not partial else self._partial_readers(partial)
        values: list[Any] = [ABSENT] * self.ncols
        for j, i in enumerate(present):
            if nulls >> j & 1:
                values[i] = None
            else:
                values[i], pos = readers[i](buf, pos)
        return values, pos

    def _partial_readers(self, partial: frozenset[int]) -> list[ValueReader]:
        """The readers with JSON diff readers for the columns logged as partial updates."""
        readers = list(self._readers)
        for i in partial:
            size = self.schema.columns[i].length_bytes
            readers[i] = lambda buf, pos, size=size: _read_json_diff(buf, pos, size)
        return readers

    def decode_body(self, buf: bytes, pos: int, kind: str, partial_update: bool) -> RowsBody:
        """All rows of an event body from the column-count field to the end of ``buf``."""
        end = len(buf)
        ncols, pos = read_packed_int(buf, pos)
        if ncols != self.ncols:
            raise RowsFormatError(
                f"rows event has {ncols} columns but the table map of "
                f"{self.schema.qualified_name} has {self.ncols}")
        nbytes = (ncols + 7) >> 3
        present = _present_columns(buf[pos:pos + nbytes], ncols)
        pos += nbytes
        present_after = None
        if kind == "update":
            present_after = _present_columns(buf[pos:pos + nbytes], ncols)
            pos += nbytes
        rows: list[Any] = []
        read_image = self.read_image
        try:
            if kind != "update":
                while pos < end:
                    values, pos = read_image(buf, pos, present)
                    rows.append(values)
            else:
                assert present_after is not None
                json_after = tuple(i for i in self.json_columns if i in present_after)
                while pos < end:
                    before, pos = read_image(buf, pos, present)
                    partial: frozenset[int] = frozenset()
                    if partial_update:
                        options, pos = read_packed_int(buf, pos)
                        if options & PARTIAL_JSON_UPDATES:
                            partial, pos = _partial_columns(buf, pos, json_after)
                    after, pos = read_image(buf, pos, present_after, partial)
                    for i in partial:
                        after[i] = _apply_partial(before[i], after[i])
                    rows.append((before, after))
        except (IndexError, struct.error, ValueError, UnicodeDecodeError) as exc:
            raise RowsFormatError(
                f"row image of {self.schema.qualified_name} does not fit its table map: {exc}"
            ) from None
        if pos != end:
            raise RowsFormatError(
                f"row images of {self.schema.qualified_name} end at {pos}, the event at {end}")
        return RowsBody(ncols, present, present_after, rows)


def _partial_columns(buf: bytes, pos: int, json_after: tuple[int, ...]
                     ) -> tuple[frozenset[int], int]:
    nbytes = (len(json_after) + 7) >> 3
    bits = int.from_bytes(buf[pos:pos + nbytes], "little")
    return frozenset(c for j, c in enumerate(json_after) if bits >> j & 1), pos + nbytes


def _read_json_diff(buf: bytes, pos: int, length_bytes: int) -> tuple[PartialJson, int]:
    size = length_bytes or 4
    n = int.from_bytes(buf[pos:pos + size], "little")
    start = pos + size
    return PartialJson(tuple(decode_json_diffs(buf[start:start + n]))), start + n


def _apply_partial(before: Any, after: PartialJson) -> Any:
    if before is ABSENT:
        return after
    return apply_json_diffs(before, after.diffs)
