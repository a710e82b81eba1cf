"""Readers for one column value in a row image, chosen once per column.

Each reader is ``read(buf, pos) -> (value, new_pos)``. The values (docs/records.md):
integers, YEAR and BIT as int (unsigned in full range when known), DECIMAL as Decimal,
FLOAT/DOUBLE as float (FLOAT as the shortest decimal that reads back as the same float),
DATE, DATETIME (naive), TIMESTAMP (UTC) and TIME as date, datetime and timedelta, zero or
invalid dates as MySQL prints them, text as str in its charset, binary as bytes (BINARY(n)
padded back to n), ENUM as its label, SET as a list of labels, JSON as Python values (the
literal null as ``JSON_NULL``), GEOMETRY as bytes (SRID + WKB), VECTOR as a list of floats."""

from __future__ import annotations

import datetime as dt
import socket
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from changestream.decoding import field_types as ft
from changestream.decoding.charsets import codec_for_collation
from changestream.decoding.decimal_binary import decode_decimal
from changestream.decoding.json_binary import JSON_NULL, decode_json
from changestream.decoding.table_schema import Column

ValueReader = Callable[[bytes, int], tuple[Any, int]]

_S8 = struct.Struct("<b").unpack_from
_U8 = struct.Struct("<B").unpack_from
_S16 = struct.Struct("<h").unpack_from
_U16 = struct.Struct("<H").unpack_from
_S32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_S64 = struct.Struct("<q").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F32 = struct.Struct("<f").unpack_from
_F64 = struct.Struct("<d").unpack_from
_BE_U32 = struct.Struct(">I").unpack_from
_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class UnsupportedColumnType(ValueError):
    """A column type this decoder cannot read (e.g. pre-5.0 DECIMAL)."""


def _fixed(unpack: Callable[[bytes, int], tuple[Any, ...]], size: int) -> ValueReader:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    return read


_F32_PACK = struct.Struct("<f").pack
_F32_UNPACK = struct.Struct("<f").unpack


def shortest_float32(value: float) -> float:
    """The 4-byte float ``value`` (widened to a double) as the shortest decimal that reads
    back as the same 4-byte float: 5.6, not 5.599999904632568 (as the server prints it)."""
    # A normal 4-byte float has 24 bits (> 7 digits): rounded to 6 digits it gives the
    # shortest form whenever one of 6 digits or fewer exists. Subnormals have fewer bits.
    for digits in (6, 7, 8) if abs(value) >= 1.2e-38 else range(1, 9):
        candidate = float(f"{value:.{digits}g}")
        if _F32_UNPACK(_F32_PACK(candidate))[0] == value:
            return candidate
    return float(f"{value:.9g}")  # 9 significant digits always read back


def _read_float(buf: bytes, pos: int) -> tuple[float, int]:
    return shortest_float32(_F32(buf, pos)[0]), pos + 4


def _int24(unsigned: bool) -> ValueReader:
    def read(buf: bytes, pos: int) -> tuple[int, int]:
        return int.from_bytes(buf[pos:pos + 3], "little", signed=not unsigned), pos + 3

    return read


def _fraction(buf: bytes, pos: int, fsp: int) -> tuple[int, int]:
    """Microseconds stored big-endian in (fsp+1)//2 bytes."""
    if fsp == 0:
        return 0, pos
    n = (fsp + 1) // 2
    raw = int.from_bytes(buf[pos:pos + n], "big")
    return raw * (10000, 100, 1)[n - 1], pos + n


def _datetime_value(year: int, month: int, day: int, hour: int, minute: int, second: int,
                    micro: int, fsp: int) -> dt.datetime | str:
    try:
        return dt.datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
        return text + (f".{micro:06d}"[: fsp + 1] if fsp else "")


def _read_datetime2(fsp: int) -> ValueReader:
    size = 5 + (fsp + 1) // 2

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        packed = int.from_bytes(buf[pos:pos + 5], "big") - 0x8000000000
        micro, _ = _fraction(buf, pos + 5, fsp)
        ymd = packed >> 17
        ym = ymd >> 5
        hms = packed & 0x1FFFF
        return _datetime_value(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63,
                               hms & 63, micro, fsp), pos + size

    return read


def _read_datetime_v1(buf: bytes, pos: int) -> tuple[Any, int]:
    v = _U64(buf, pos)[0]
    d, t = divmod(v, 1000000)
    return _datetime_value(d // 10000, (d // 100) % 100, d % 100, t // 10000, (t // 100) % 100,
                           t % 100, 0, 0), pos + 8


def _read_timestamp2(fsp: int) -> ValueReader:
    size = 4 + (fsp + 1) // 2

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        seconds = _BE_U32(buf, pos)[0]
        micro, _ = _fraction(buf, pos + 4, fsp)
        if seconds == 0 and micro == 0:
            return "0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else ""), pos + size
        return _EPOCH + dt.timedelta(seconds=seconds, microseconds=micro), pos + size

    return read


def _read_timestamp_v1(buf: bytes, pos: int) -> tuple[Any, int]:
    seconds = _U32(buf, pos)[0]
    if seconds == 0:
        return "0000-00-00 00:00:00", pos + 4
    return _EPOCH + dt.timedelta(seconds=seconds), pos + 4


def _read_date(buf: bytes, pos: int) -> tuple[Any, int]:
    v = int.from_bytes(buf[pos:pos + 3], "little")
    year, month, day = v >> 9, (v >> 5) & 15, v & 31
    try:
        return dt.date(year, month, day), pos + 3
    except ValueError:
        return f"{year:04d}-{month:02d}-{day:02d}", pos + 3


def _read_time_v1(buf: bytes, pos: int) -> tuple[Any, int]:
    v = int.from_bytes(buf[pos:pos + 3], "little", signed=True)
    sign = -1 if v < 0 else 1
    v = abs(v)
    return sign * dt.timedelta(hours=v // 10000, minutes=(v // 100) % 100, seconds=v % 100), pos + 3


def _read_time2(fsp: int) -> ValueReader:
    nfrac = (fsp + 1) // 2
    size = 3 + nfrac

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        # The integer part and fraction form one big-endian number offset by 2^(bits-1).
        bits = 24 + 8 * nfrac
        packed = int.from_bytes(buf[pos:pos + size], "big") - (1 << (bits - 1))
        negative = packed < 0
        packed = abs(packed)
        frac = packed & ((1 << (8 * nfrac)) - 1)
        whole = packed >> (8 * nfrac)
        micro = frac * (0, 10000, 100, 1)[nfrac]
        hours = (whole >> 12) & 0x3FF
        minutes = (whole >> 6) & 63
        seconds = whole & 63
        delta = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micro)
        return (-delta if negative else delta), pos + size

    return read


def _read_year(buf: bytes, pos: int) -> tuple[int, int]:
    v = buf[pos]
    return (1900 + v if v else 0), pos + 1


def _length_prefixed(length_bytes: int) -> Callable[[bytes, int], tuple[bytes, int]]:
    if length_bytes == 1:
        def read(buf: bytes, pos: int) -> tuple[bytes, int]:
            n = buf[pos]
            return buf[pos + 1:pos + 1 + n], pos + 1 + n
    elif length_bytes == 2:
        def read(buf: bytes, pos: int) -> tuple[bytes, int]:
            n = _U16(buf, pos)[0]
            return buf[pos + 2:pos + 2 + n], pos + 2 + n
    else:
        def read(buf: bytes, pos: int) -> tuple[bytes, int]:
            n = int.from_bytes(buf[pos:pos + length_bytes], "little")
            start = pos + length_bytes
            return buf[start:start + n], start + n
    return read


def _text(raw_reader: Callable[[bytes, int], tuple[bytes, int]], codec: str | None,
          pad_to: int = 0) -> ValueReader:
    """Characters in ``codec``; bytes for the binary collation (padded to ``pad_to``)."""
    if codec is None:
        if pad_to:
            def read_binary(buf: bytes, pos: int) -> tuple[bytes, int]:
                raw, pos = raw_reader(buf, pos)
                return raw.ljust(pad_to, b"\0"), pos
            return read_binary
        return raw_reader

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        raw, pos = raw_reader(buf, pos)
        try:
            return raw.decode(codec), pos
        except UnicodeDecodeError:
            return raw, pos

    return read


def _codec(column: Column) -> str | None:
    """The codec for a character column; UTF-8 when the server did not log the charset."""
    if column.collation is None:
        return "utf-8"
    return codec_for_collation(column.collation)


def _enum(column: Column) -> ValueReader:
    labels = column.enum_values
    size = column.length_bytes or 1

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        idx = int.from_bytes(buf[pos:pos + size], "little")
        if labels is None:
            return idx, pos + size
        if idx == 0:
            return "", pos + size  # the error value MySQL stores for an invalid ENUM
        return labels[idx - 1], pos + size

    return read


def _set(column: Column) -> ValueReader:
    labels = column.set_values
    size = column.length_bytes or 1

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        mask = int.from_bytes(buf[pos:pos + size], "little")
        if labels is None:
            return mask, pos + size
        return [label for i, label in enumerate(labels) if mask >> i & 1], pos + size

    return read


def _bit(column: Column) -> ValueReader:
    size = (column.bits + 7) // 8

    def read(buf: bytes, pos: int) -> tuple[int, int]:
        return int.from_bytes(buf[pos:pos + size], "big"), pos + size

    return read


def _decimal(column: Column) -> ValueReader:
    precision, scale = column.precision, column.scale

    def read(buf: bytes, pos: int) -> tuple[Decimal, int]:
        value, used = decode_decimal(buf, pos, precision, scale)
        return value, pos + used

    return read


def _json(column: Column) -> ValueReader:
    raw_reader = _length_prefixed(column.length_bytes or 4)

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        raw, pos = raw_reader(buf, pos)
        value = decode_json(raw)  # None only for a top-level null (or an empty value,
        return (JSON_NULL if value is None else value), pos  # which the server reads as null)

    return read


def _vector(column: Column) -> ValueReader:
    raw_reader = _length_prefixed(column.length_bytes or 4)

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        raw, pos = raw_reader(buf, pos)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw)), pos

    return read


_SIGNED_FIXED = {ft.TINY: (_S8, 1), ft.SHORT: (_S16, 2), ft.LONG: (_S32, 4), ft.LONGLONG: (_S64, 8)}
_UNSIGNED_FIXED = {ft.TINY: (_U8, 1), ft.SHORT: (_U16, 2), ft.LONG: (_U32, 4),
                   ft.LONGLONG: (_U64, 8)}


def address_text(kind: str, raw: bytes) -> str:
    """A MariaDB UUID, INET6 or INET4 value as the server prints it."""
    if kind == "uuid":
        h = raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    if kind == "inet4":
        return socket.inet_ntop(socket.AF_INET, raw)
    return socket.inet_ntop(socket.AF_INET6, raw)


def _address(raw: ValueReader, kind: str) -> ValueReader:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        value, pos = raw(buf, pos)
        # BINARY drops trailing zero bytes in the row image: pad back to the full width.
        width = 4 if kind == "inet4" else 16
        return address_text(kind, bytes(value).ljust(width, b"\0")), pos

    return read


def value_reader(column: Column) -> ValueReader:
    """The reader for one column's values, chosen from its type and metadata."""
    t = column.type_code
    if t in _SIGNED_FIXED:
        unpack, size = (_UNSIGNED_FIXED if column.unsigned else _SIGNED_FIXED)[t]
        return _fixed(unpack, size)
    if t == ft.INT24:
        return _int24(bool(column.unsigned))
    if t == ft.FLOAT:
        return _read_float
    if t == ft.DOUBLE:
        return _fixed(_F64, 8)
    if t == ft.NEWDECIMAL:
        return _decimal(column)
    if t == ft.DATETIME2:
        return _read_datetime2(column.fsp)
    if t == ft.TIMESTAMP2:
        return _read_timestamp2(column.fsp)
    if t == ft.TIME2:
        return _read_time2(column.fsp)
    if t == ft.DATE or t == ft.NEWDATE:
        return _read_date
    if t == ft.DATETIME:
        return _read_datetime_v1
    if t == ft.TIMESTAMP:
        return _read_timestamp_v1
    if t == ft.TIME:
        return _read_time_v1
    if t == ft.YEAR:
        return _read_year
    if t in (ft.VARCHAR, ft.VAR_STRING):
        return _text(_length_prefixed(1 if column.max_length < 256 else 2), _codec(column))
    if t == ft.STRING and column.text_type is not None:
        return _address(_length_prefixed(1), column.text_type)
    if t == ft.STRING:
        codec = _codec(column)
        pad = column.max_length if codec is None else 0
        return _text(_length_prefixed(1 if column.max_length < 256 else 2), codec, pad)
    if t in ft.BLOB_TYPES:
        raw = _length_prefixed(column.length_bytes or 2)
        # Without logged charsets a BLOB cannot be told from a TEXT: keep the bytes.
        if column.collation is None:
            return raw
        return _text(raw, codec_for_collation(column.collation))
    if t == ft.ENUM:
        return _enum(column)
    if t == ft.SET:
        return _set(column)
    if t == ft.BIT:
        return _bit(column)
    if t == ft.JSON:
        return _json(column)
    if t == ft.GEOMETRY:
        return _length_prefixed(column.length_bytes or 4)
    if t == ft.VECTOR:
        return _vector(column)
    if t == ft.NULL:
        return lambda buf, pos: (None, pos)
    raise UnsupportedColumnType(f"column type {column.type_name} ({t}) cannot be decoded")
