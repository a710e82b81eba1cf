"""Rows event bodies (WRITE/UPDATE/DELETE v0-v2, PARTIAL_UPDATE, MariaDB compressed) to rows."""

from __future__ import annotations

import struct
from typing import Any

from changestream.decoding import field_types as ft
from changestream.decoding.json_diff import JsonDiff, apply_json_diffs, decode_json_diffs
from changestream.decoding.packed import read_packed_int
from changestream.decoding.row_compiler import ImageReader, RowsReader, compile_readers
from changestream.decoding.row_values import ValueReader, value_reader
from changestream.decoding.table_schema import TableSchema
from changestream.model.record import record

PARTIAL_JSON_UPDATES = 1


class _Absent:
    """Marks a column that is not in a row image (binlog_row_image=MINIMAL/NOBLOB)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


@record(frozen=True)
class PartialJson:
    """A JSON after-image logged as a diff against a before-image that was not logged."""

    diffs: tuple[JsonDiff, ...]


class RowsFormatError(ValueError):
    """The row images do not fit the table's schema."""


@record(frozen=True)
class RowsBody:
    """The decoded part of a rows event after its post-header."""

    column_count: int
    present: tuple[int, ...]
    present_after: tuple[int, ...] | None
    rows: list[Any]


def _present_columns(bitmap: bytes, ncols: int) -> tuple[int, ...]:
    bits = int.from_bytes(bitmap, "little")
    return tuple(i for i in range(ncols) if bits >> i & 1)


_UNCOMPILED: Any = object()


class RowImageDecoder:
    """Decodes row images of one table schema; built once per TABLE_MAP and reused.

    Images that log every column go through readers generated for the schema
    (:mod:`~changestream.decoding.row_compiler`); the rest, and any event the generated
    readers do not read to its end, through the generic per-value readers.
    """

    __slots__ = ("_all_present", "_compiled", "_full_bitmap", "_mask", "_readers",
                 "json_columns", "ncols", "schema")

    def __init__(self, schema: TableSchema):
        self.schema = schema
        self.ncols = len(schema.columns)
        self._readers: list[ValueReader] = [value_reader(c) for c in schema.columns]
        self.json_columns = tuple(c.index for c in schema.columns if c.type_code == ft.JSON)
        self._compiled: tuple[RowsReader, ImageReader] | None = _UNCOMPILED
        self._mask = (1 << self.ncols) - 1
        self._full_bitmap = self._mask.to_bytes((self.ncols + 7) >> 3, "little")
        self._all_present = tuple(range(self.ncols))

    def _fast_readers(self) -> tuple[RowsReader, ImageReader] | None:
        compiled = self._compiled
        if compiled is _UNCOMPILED:
            compiled = self._compiled = compile_readers(self.schema)
        return compiled

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

            def read_diff(buf: bytes, pos: int, size: int = size) -> tuple[Any, int]:
                return _read_json_diff(buf, pos, size)

            readers[i] = read_diff
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
        # Bits past the last column are not always zero: compare only the columns' bits.
        full = self._full_bitmap
        bitmap = buf[pos:pos + nbytes]
        present = self._all_present if bitmap == full or \
            int.from_bytes(bitmap, "little") & self._mask == self._mask \
            else _present_columns(bitmap, ncols)
        pos += nbytes
        present_after = None
        if kind == "update":
            bitmap = buf[pos:pos + nbytes]
            present_after = self._all_present if bitmap == full or \
                int.from_bytes(bitmap, "little") & self._mask == self._mask \
                else _present_columns(bitmap, ncols)
            pos += nbytes
        if not present and not present_after and pos < end:
            # Images of no column take no bytes: rows after them would never end.
            raise RowsFormatError(f"rows event of {self.schema.qualified_name} logs no column "
                                  f"but has {end - pos} bytes of rows")
        if present is self._all_present and not partial_update and (
                present_after is None or present_after is self._all_present):
            fast = self._fast_readers()
            if fast is not None:
                rows = self._fast_rows(fast, buf, pos, end, kind)
                if rows is not None:
                    return RowsBody(ncols, present, present_after, rows)
        return self._generic_rows(buf, pos, end, kind, partial_update, present, present_after)

    def _fast_rows(self, fast: tuple[RowsReader, ImageReader], buf: bytes, pos: int,
                   end: int, kind: str) -> list[Any] | None:
        """The rows read by the generated readers, or ``None`` when they do not fit (the
        generic path then reads them again and says what is wrong)."""
        try:
            rows: list[Any]
            if kind != "update":
                rows, pos = fast[0](buf, pos, end)
            else:
                read_image = fast[1]
                rows = []
                while pos < end:
                    before, pos = read_image(buf, pos)
                    after, pos = read_image(buf, pos)
                    rows.append((before, after))
        except (IndexError, struct.error, ValueError, UnicodeDecodeError):
            return None
        return rows if pos == end else None

    def _generic_rows(self, buf: bytes, pos: int, end: int, kind: str, partial_update: bool,
                      present: tuple[int, ...], present_after: tuple[int, ...] | None
                      ) -> RowsBody:
        ncols = self.ncols
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
