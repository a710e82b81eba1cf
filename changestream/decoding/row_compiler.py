"""Row image readers generated per table schema: the fast path of row decoding.

For a row image that logs every column (``binlog_row_image=FULL``, no partial JSON) this
module writes one function per table schema that reads a whole row, the common types
decoded inline and every other type through its generic reader
(:mod:`changestream.decoding.row_values`). The values are the generic path's: inline code
uses the same formulas and asks the generic reader wherever one could fail.
``RowImageDecoder`` falls back to the generic path when they raise or do not end where the
event ends, so malformed events get the generic path's errors, word for word."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from decimal import Context, Decimal
from typing import Any

from changestream.decoding import field_types as ft
from changestream.decoding.charsets import codec_for_collation
from changestream.decoding.decimal_binary import _layout
from changestream.decoding.row_values import UnsupportedColumnType, value_reader
from changestream.decoding.table_schema import Column, TableSchema

RowsReader = Callable[[bytes, int, int], tuple[list[list[Any]], int]]
"""``(buf, pos, end) -> (rows, new_pos)``: full-width row images from ``pos`` to ``end``."""
ImageReader = Callable[[bytes, int], tuple[list[Any], int]]
"""``(buf, pos) -> (values, new_pos)``: one full-width row image."""

_FIXED = {
    # type code: (signed format, unsigned format, size)
    ft.TINY: ("b", "B", 1), ft.SHORT: ("h", "H", 2), ft.LONG: ("i", "I", 4),
    ft.LONGLONG: ("q", "Q", 8),
}
# Exact for every DECIMAL: at most 81 digits (JSON) and 65 (columns) fit this precision.
_DECIMAL_CONTEXT = Context(prec=100, Emax=1000, Emin=-1000)


def _codec(column: Column) -> str | None:
    if column.collation is None:
        return "utf-8"
    return codec_for_collation(column.collation)


class _Writer:
    """Collects the generated source and the names it refers to."""

    def __init__(self, schema: TableSchema):
        self.schema = schema
        self.lines: list[str] = []
        self.names: dict[str, Any] = {
            "_from_bytes": int.from_bytes, "_datetime": dt.datetime, "_date": dt.date,
            "_timedelta": dt.timedelta, "_EPOCH": dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
            "_Decimal": Decimal, "_scaleb": Decimal.scaleb, "_DCTX": _DECIMAL_CONTEXT,
            "UnicodeDecodeError": UnicodeDecodeError, "ValueError": ValueError,
        }

    def name(self, key: str, value: Any) -> str:
        self.names[key] = value
        return key

    def column(self, c: Column, v: str, indent: str) -> None:
        """Code that reads column ``c`` at ``pos`` into variable ``v`` and moves ``pos``."""
        out = self.lines
        i = c.index
        t = c.type_code
        generic = self.name(f"_r{i}", value_reader(c))
        if t in _FIXED:
            signed, unsigned, size = _FIXED[t]
            unpack = self.name(f"_u{i}", struct.Struct(
                "<" + (unsigned if c.unsigned else signed)).unpack_from)
            out.append(f"{indent}{v} = {unpack}(buf, pos)[0]; pos += {size}")
        elif t == ft.DOUBLE:
            unpack = self.name(f"_u{i}", struct.Struct("<d").unpack_from)
            out.append(f"{indent}{v} = {unpack}(buf, pos)[0]; pos += 8")
        elif t == ft.INT24:
            signed = "False" if c.unsigned else "True"
            out.append(f"{indent}{v} = _from_bytes(buf[pos:pos + 3], 'little', "
                       f"signed={signed}); pos += 3")
        elif t == ft.YEAR:
            out.append(f"{indent}{v} = buf[pos]; pos += 1")
            out.append(f"{indent}{v} = 1900 + {v} if {v} else 0")
        elif t == ft.NEWDECIMAL:
            self._decimal(c, v, indent, generic)
        elif t == ft.DATETIME2:
            self._datetime2(c, v, indent, generic)
        elif t == ft.TIMESTAMP2:
            self._timestamp2(c, v, indent, generic)
        elif t in (ft.DATE, ft.NEWDATE):
            out.append(f"{indent}x = _from_bytes(buf[pos:pos + 3], 'little')")
            out.append(f"{indent}try:")
            out.append(f"{indent}    {v} = _date(x >> 9, (x >> 5) & 15, x & 31)")
            out.append(f"{indent}except ValueError:")
            out.append(f"{indent}    {v} = {generic}(buf, pos)[0]")
            out.append(f"{indent}pos += 3")
        elif t in (ft.VARCHAR, ft.VAR_STRING, ft.STRING) and c.text_type is None:
            codec = _codec(c)
            pad = c.max_length if t == ft.STRING and codec is None else 0
            self._prefixed(c, v, indent, 1 if c.max_length < 256 else 2, codec, pad, generic)
        elif t in ft.BLOB_TYPES:
            codec = None if c.collation is None else codec_for_collation(c.collation)
            self._prefixed(c, v, indent, c.length_bytes or 2, codec, 0, generic)
        else:
            out.append(f"{indent}{v}, pos = {generic}(buf, pos)")

    def _prefixed(self, c: Column, v: str, indent: str, length_bytes: int,
                  codec: str | None, pad: int, generic: str) -> None:
        out = self.lines
        if length_bytes == 1:
            out.append(f"{indent}start = pos + 1; pos = start + buf[pos]")
        elif length_bytes == 2:
            out.append(f"{indent}start = pos + 2; pos = start + (buf[pos] | buf[pos + 1] << 8)")
        else:
            out.append(f"{indent}start = pos + {length_bytes}; "
                       f"pos = start + _from_bytes(buf[pos:start], 'little')")
        if codec is None:
            if pad:
                out.append(f"{indent}{v} = buf[start:pos].ljust({pad}, b'\\0')")
            else:
                out.append(f"{indent}{v} = buf[start:pos]")
            return
        out.append(f"{indent}try:")
        out.append(f"{indent}    {v} = buf[start:pos].decode({codec!r})")
        out.append(f"{indent}except UnicodeDecodeError:")
        out.append(f"{indent}    {v} = buf[start:pos]")

    def _fraction_parts(self, fsp: int) -> tuple[int, int]:
        n = (fsp + 1) // 2
        return n, (1, 10000, 100, 1)[n]

    def _datetime2(self, c: Column, v: str, indent: str, generic: str) -> None:
        # The generic reader: packed = 5 big-endian bytes - 0x8000000000, then the fraction.
        out = self.lines
        n, mult = self._fraction_parts(c.fsp)
        size = 5 + n
        out.append(f"{indent}x = _from_bytes(buf[pos:pos + {size}], 'big')")
        if n:
            micro = f"(x & {(1 << 8 * n) - 1})" + (f" * {mult}" if mult != 1 else "")
            out.append(f"{indent}p = (x >> {8 * n}) - 0x8000000000")
        else:
            micro = "0"
            out.append(f"{indent}p = x - 0x8000000000")
        out.append(f"{indent}ymd = p >> 17; ym = ymd >> 5; hms = p & 0x1FFFF")
        out.append(f"{indent}try:")
        out.append(f"{indent}    {v} = _datetime(ym // 13, ym % 13, ymd & 31, hms >> 12, "
                   f"(hms >> 6) & 63, hms & 63, {micro})")
        out.append(f"{indent}except ValueError:")
        out.append(f"{indent}    {v} = {generic}(buf, pos)[0]")
        out.append(f"{indent}pos += {size}")

    def _timestamp2(self, c: Column, v: str, indent: str, generic: str) -> None:
        out = self.lines
        n, mult = self._fraction_parts(c.fsp)
        size = 4 + n
        out.append(f"{indent}x = _from_bytes(buf[pos:pos + {size}], 'big')")
        if n:
            out.append(f"{indent}s = x >> {8 * n}; m = (x & {(1 << 8 * n) - 1})"
                       + (f" * {mult}" if mult != 1 else ""))
        else:
            out.append(f"{indent}s = x; m = 0")
        out.append(f"{indent}if s or m:")
        out.append(f"{indent}    {v} = _EPOCH + _timedelta(0, s, m)")
        out.append(f"{indent}else:")
        out.append(f"{indent}    {v} = {generic}(buf, pos)[0]")
        out.append(f"{indent}pos += {size}")

    def _decimal(self, c: Column, v: str, indent: str, generic: str) -> None:
        out = self.lines
        try:
            size, groups = _layout(c.precision, c.scale)
        except ValueError:
            out.append(f"{indent}{v}, pos = {generic}(buf, pos)")
            return
        if not size:
            out.append(f"{indent}{v}, pos = {generic}(buf, pos)")
            return
        top = 1 << (size * 8 - 1)
        out.append(f"{indent}x = _from_bytes(buf[pos:pos + {size}], 'big')")
        out.append(f"{indent}if x & {top}:")
        out.append(f"{indent}    x ^= {top}; neg = False")
        out.append(f"{indent}else:")
        out.append(f"{indent}    x ^= {((top << 1) - 1) ^ top}; neg = True")
        checks = []
        terms = "0"
        for shift, mask, mult, limit in groups:
            g = f"((x >> {shift}) & {mask})" if shift else f"(x & {mask})"
            if limit:
                checks.append(f"{g} >= {limit}")
            terms = g if terms == "0" else f"({terms}) * {mult} + {g}"
        if checks:
            # An invalid digit group: let the generic reader raise its error.
            out.append(f"{indent}if {' or '.join(checks)}:")
            out.append(f"{indent}    {generic}(buf, pos)")
        out.append(f"{indent}n = {terms}")
        out.append(f"{indent}{v} = _scaleb(_Decimal(-n if neg else n), {-c.scale}, _DCTX)")
        out.append(f"{indent}pos += {size}")


def _nulls_code(nbytes: int) -> str:
    if nbytes == 1:
        return "buf[pos]"
    if nbytes == 2:
        return "buf[pos] | buf[pos + 1] << 8"
    return f"_from_bytes(buf[pos:pos + {nbytes}], 'little')"


def compile_readers(schema: TableSchema) -> tuple[RowsReader, ImageReader] | None:
    """The generated readers of full row images of ``schema``, or ``None`` when a column's
    type cannot be read at all (the generic path then reports it)."""
    w = _Writer(schema)
    ncols = len(schema.columns)
    if not ncols:
        return None
    nbytes = (ncols + 7) >> 3
    try:
        body: list[str] = []
        w.lines = body
        for c in schema.columns:
            v = f"v{c.index}"
            body.append(f"    if nulls & {1 << c.index}:")
            body.append(f"        {v} = None")
            body.append("    else:")
            w.column(c, v, "        ")
    except UnsupportedColumnType:
        return None
    values = "[" + ", ".join(f"v{i}" for i in range(ncols)) + "]"
    image = [
        "def read_image(buf, pos):",
        f"    nulls = {_nulls_code(nbytes)}; pos += {nbytes}",
        *body,
        f"    return {values}, pos",
    ]
    rows = [
        "def read_rows(buf, pos, end):",
        "    rows = []",
        "    append = rows.append",
        "    while pos < end:",
        f"        nulls = {_nulls_code(nbytes)}; pos += {nbytes}",
        *["    " + line for line in body],
        f"        append({values})",
        "    return rows, pos",
    ]
    source = "\n".join([*image, "", *rows]) + "\n"
    namespace = dict(w.names)
    code = compile(source, f"<row reader {schema.qualified_name}>", "exec")
    exec(code, namespace)  # the source is built above from the schema's type codes only
    return namespace["read_rows"], namespace["read_image"]
