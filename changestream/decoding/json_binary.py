"""Decoder for MySQL's binary JSON format (the documents a JSON column holds).

:func:`decode_json` decodes one document into Python values (its docstring has the
mapping: objects, arrays, numbers and strings as Python's, opaque values such as DECIMAL
and temporal values as MySQL's JSON printer shows them); the binary format is described in
the comment above :func:`_container`. Partial updates (PARTIAL_JSON diffs) are in
:mod:`changestream.decoding.json_diff`."""

from __future__ import annotations

import base64
import struct
from typing import Any

from changestream.decoding.decimal_binary import decode_decimal

__all__ = [
    "JSON_NULL",
    "JsonBinaryError",
    "JsonNull",
    "decode_json",
    "decode_json_at",
]


class JsonNull:
    """The JSON literal ``null`` as a whole column value, told apart from SQL NULL (``None``).

    There is one: :data:`JSON_NULL`. It is false, and it pickles to itself.
    """

    __slots__ = ()
    _instance: JsonNull | None = None

    def __new__(cls) -> JsonNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "JSON_NULL"

    def __reduce__(self) -> str:
        return "JSON_NULL"


JSON_NULL = JsonNull()
"""A JSON column holding the JSON literal ``null`` (SQL NULL is ``None``)."""


class JsonBinaryError(ValueError):
    """The binary JSON (or JSON diff) data is malformed or truncated."""


# --- binary JSON --------------------------------------------------------------------

# Value type codes 0x00..0x0f (see the grammar above) index _PARSERS below.

# MySQL field types that can appear as the type of an opaque value.
_MYSQL_TYPE_TIMESTAMP = 7
_MYSQL_TYPE_DATE = 10
_MYSQL_TYPE_TIME = 11
_MYSQL_TYPE_DATETIME = 12
_MYSQL_TYPE_NEWDECIMAL = 246
_MYSQL_TYPE_VAR_STRING = 253

_HH = struct.Struct("<HH").unpack_from
_II = struct.Struct("<II").unpack_from
_I16 = struct.Struct("<h").unpack_from
_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I64 = struct.Struct("<q").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct("<d").unpack_from

_LITERALS = {0: None, 1: True, 2: False}
_iter_unpack = struct.iter_unpack
# (kind, count) -> unpack_from of all key entries and value entries of a container;
# containers with more elements than this use struct.iter_unpack instead.
_ENTRY_CACHE_MAX_COUNT = 512
_entry_unpackers: dict[tuple[int, int], Any] = {}
_ENTRY_FORMATS = ("HHBH", "IHBI", "BH", "BI")  # small obj, large obj, small arr, large arr


def _entry_unpacker(kind: int, count: int):
    unpack = _entry_unpackers.get((kind, count))
    if unpack is None:
        fmt = _ENTRY_FORMATS[kind]
        if kind < 2:
            spec = "<" + fmt[:2] * count + fmt[2:] * count
        else:
            spec = "<" + fmt * count
        unpack = _entry_unpackers[(kind, count)] = struct.Struct(spec).unpack_from
    return unpack


def _read_varlen(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read a 1..5 byte variable length; return ``(length, position after it)``."""
    length = 0
    shift = 0
    for _ in range(5):
        if pos >= end:
            break
        b = data[pos]
        pos += 1
        length |= (b & 0x7F) << shift
        if b < 0x80:
            if length > 0xFFFFFFFF:
                break
            return length, pos
        shift += 7
    raise JsonBinaryError(f"malformed variable-length field before offset {pos}")


# Binary JSON (``sql-common/json_binary.cc``) is what a JSON column holds in a
# binlog row image (after the column's 4-byte length prefix)::
#
#     doc        ::= type value
#     type       ::= 0x00 small object | 0x01 large object | 0x02 small array
#                  | 0x03 large array | 0x04 literal | 0x05 int16 | 0x06 uint16
#                  | 0x07 int32 | 0x08 uint32 | 0x09 int64 | 0x0a uint64
#                  | 0x0b double | 0x0c utf8mb4 string | 0x0f opaque (custom data)
#     object     ::= count size key-entry* value-entry* key* value*
#     array      ::= count size value-entry* value*
#     count/size ::= uint16 (small format) | uint32 (large format)
#     key-entry  ::= key-offset (uint16 | uint32) key-length (uint16)
#     value-entry::= type offset-or-inlined-value (uint16 | uint32)
#     literal    ::= 0x00 null | 0x01 true | 0x02 false
#     string     ::= data-length utf8mb4-data
#     opaque     ::= field-type (uint8) data-length binary-data
#     data-length::= 1..5 bytes, 7 bits each, least significant first, high bit = more
#
# All integers are little-endian.  Offsets in entries are relative to the start of
# the object/array (the byte after its type byte).  Literals, int16 and uint16 are
# always inlined in the value entry; int32 and uint32 only in the large format.
def _container(data: bytes, base: int, end: int, kind: int) -> Any:
    """Decode an object/array whose header (element count) starts at ``base``."""
    # Hot path: type codes are written as literals (constants are cheaper than globals).
    large = kind & 1
    if large:
        if base + 8 > end:
            raise JsonBinaryError(f"truncated container header at offset {base}")
        count, size = _II(data, base)
        header = 8 + count * (11 if kind == 1 else 5)
    else:
        if base + 4 > end:
            raise JsonBinaryError(f"truncated container header at offset {base}")
        count, size = _HH(data, base)
        header = 4 + count * (7 if kind == 0 else 3)
    cend = base + size
    if cend > end or header > size:
        raise JsonBinaryError(f"container at offset {base} exceeds its buffer")
    if not count:
        return {} if kind < 2 else []
    start = base + 8 if large else base + 4
    if count <= _ENTRY_CACHE_MAX_COUNT:
        # One precompiled struct reads all key and value entries at once.
        unpack = _entry_unpackers.get((kind, count)) or _entry_unpacker(kind, count)
        e = unpack(data, start)
        if kind < 2:
            n2 = count + count
            types = e[n2::2]
            vals = e[n2 + 1 :: 2]
            kos = e[0:n2:2]
            kls = e[1:n2:2]
        else:
            types = e[::2]
            vals = e[1::2]
    else:
        # Very large containers: stream the entries instead of compiling a huge struct.
        if kind < 2:
            kend = start + count * (6 if large else 4)
            kos, kls = zip(*_iter_unpack("<IH" if large else "<HH", data[start:kend]))
            start = kend
        vend = start + count * (5 if large else 3)
        types, vals = zip(*_iter_unpack("<BI" if large else "<BH", data[start:vend]))

    out: list[Any] = []
    append = out.append
    for t, v in zip(types, vals):
        if t == 12:  # string
            if v >= size:
                raise JsonBinaryError(f"value offset {v} outside container at {base}")
            p = base + v
            n = data[p]
            if n < 0x80:
                p += 1
            else:
                n, p = _read_varlen(data, p, cend)
            q = p + n
            if q > cend:
                raise JsonBinaryError(f"string at offset {p} exceeds its container")
            append(data[p:q].decode())
        elif t == 5:  # int16, inlined
            append(((v & 0xFFFF) ^ 0x8000) - 0x8000)
        elif t == 4:  # literal, inlined
            v &= 0xFF
            if v > 2:
                raise JsonBinaryError(f"invalid literal {v} in container at {base}")
            append(None if v == 0 else v == 1)
        elif t == 6:  # uint16, inlined
            append(v & 0xFFFF)
        elif large and t == 7:  # int32, inlined in the large format
            append((v ^ 0x80000000) - 0x80000000)
        elif large and t == 8:  # uint32, inlined in the large format
            append(v)
        else:
            if v >= size:
                raise JsonBinaryError(f"value offset {v} outside container at {base}")
            parse = _PARSERS[t] if t < 16 else None
            if parse is None:
                raise JsonBinaryError(f"invalid JSON value type 0x{t:02x} in container at {base}")
            append(parse(data, base + v, cend, t))

    if kind > 1:
        return out
    keys: list[str] = []
    kappend = keys.append
    for ko, kl in zip(kos, kls):
        q = ko + kl
        if q > size:
            raise JsonBinaryError(f"key at offset {ko} outside container at {base}")
        kappend(data[base + ko : base + q].decode())
    return dict(zip(keys, out))


def _p_literal(data: bytes, p: int, end: int, t: int) -> Any:
    if p >= end or data[p] > 2:
        raise JsonBinaryError(f"invalid literal at offset {p}")
    return _LITERALS[data[p]]


def _fixed(unpack, width: int):
    def parse(data: bytes, p: int, end: int, t: int) -> Any:
        if p + width > end:
            raise JsonBinaryError(f"truncated number at offset {p}")
        return unpack(data, p)[0]

    return parse


def _p_string(data: bytes, p: int, end: int, t: int) -> str:
    n, p = _read_varlen(data, p, end)
    q = p + n
    if q > end:
        raise JsonBinaryError(f"string at offset {p} exceeds its buffer")
    return data[p:q].decode()


def _format_datetime(packed: int, field_type: int) -> str:
    if field_type == _MYSQL_TYPE_TIME:
        sign = "-" if packed < 0 else ""
        packed = abs(packed)
        frac = packed & 0xFFFFFF
        hms = packed >> 24
        hour = (hms >> 12) & 0x3FF
        return f"{sign}{hour:02d}:{(hms >> 6) & 0x3F:02d}:{hms & 0x3F:02d}.{frac:06d}"
    packed = abs(packed)
    frac = packed & 0xFFFFFF
    ymdhms = packed >> 24
    ymd = ymdhms >> 17
    ym = ymd >> 5
    year, month = divmod(ym, 13)
    date = f"{year:04d}-{month:02d}-{ymd & 0x1F:02d}"
    if field_type == _MYSQL_TYPE_DATE:
        return date
    hms = ymdhms & 0x1FFFF
    return f"{date} {hms >> 12:02d}:{(hms >> 6) & 0x3F:02d}:{hms & 0x3F:02d}.{frac:06d}"


def _base64_mysql(raw: bytes) -> str:
    """base64 as MySQL's ``base64_encode`` writes it: a newline after every 76 chars."""
    enc = base64.b64encode(raw).decode("ascii")
    if len(enc) > 76:
        enc = "\n".join([enc[i : i + 76] for i in range(0, len(enc), 76)])
    return enc


def _p_opaque(data: bytes, p: int, end: int, t: int) -> Any:
    if p >= end:
        raise JsonBinaryError(f"truncated opaque value at offset {p}")
    field_type = data[p]
    n, s = _read_varlen(data, p + 1, end)
    q = s + n
    if q > end:
        raise JsonBinaryError(f"opaque value at offset {p} exceeds its buffer")
    if field_type == _MYSQL_TYPE_NEWDECIMAL:
        if n < 2:
            raise JsonBinaryError(f"truncated opaque DECIMAL at offset {p}")
        try:
            value, used = decode_decimal(data, s + 2, data[s], data[s + 1])
        except ValueError as exc:
            raise JsonBinaryError(f"bad opaque DECIMAL at offset {p}: {exc}") from None
        if s + 2 + used > q:
            raise JsonBinaryError(f"truncated opaque DECIMAL at offset {p}")
        return value
    if field_type in _DATETIME_TYPES:
        if n < 8:
            raise JsonBinaryError(f"truncated opaque temporal value at offset {p}")
        return _format_datetime(_I64(data, s)[0], field_type)
    if field_type == _MYSQL_TYPE_VAR_STRING:
        return data[s:q].decode()
    return f"base64:type{field_type}:{_base64_mysql(data[s:q])}"


_DATETIME_TYPES = frozenset(
    (_MYSQL_TYPE_DATE, _MYSQL_TYPE_TIME, _MYSQL_TYPE_DATETIME, _MYSQL_TYPE_TIMESTAMP)
)

_PARSERS: tuple[Any, ...] = (
    _container,  # 0x00 small object
    _container,  # 0x01 large object
    _container,  # 0x02 small array
    _container,  # 0x03 large array
    _p_literal,  # 0x04
    _fixed(_I16, 2),  # 0x05 int16
    _fixed(_U16, 2),  # 0x06 uint16
    _fixed(_I32, 4),  # 0x07 int32
    _fixed(_U32, 4),  # 0x08 uint32
    _fixed(_I64, 8),  # 0x09 int64
    _fixed(_U64, 8),  # 0x0a uint64
    _fixed(_F64, 8),  # 0x0b double
    _p_string,  # 0x0c
    None,
    None,
    _p_opaque,  # 0x0f
)


def decode_json_at(data: bytes, start: int, end: int) -> Any:
    """Decode the binary JSON document in ``data[start:end]`` (``None`` if empty)."""
    if start >= end:
        return None
    t = data[start]
    parse = _PARSERS[t] if t < 16 else None
    if parse is None:
        raise JsonBinaryError(f"invalid JSON value type 0x{t:02x} at offset {start}")
    try:
        return parse(data, start + 1, end, t)
    except JsonBinaryError:
        raise
    except (struct.error, IndexError, UnicodeDecodeError, RecursionError) as exc:
        raise JsonBinaryError(f"malformed binary JSON: {exc}") from None


def decode_json(data: bytes | bytearray | memoryview) -> Any:
    """Decode one binary JSON document (a JSON column value without its length prefix).

    The Python values it returns:

    * object -> ``dict`` (keys in stored order, which is MySQL's order: by byte
      length, then bytewise), array -> ``list``, literals -> ``None``/``True``/``False``;
    * int16/32/64, uint16/32/64 -> ``int`` (exact), double -> ``float``, string -> ``str``;
    * opaque values, as MySQL's JSON printer shows them:

      - DECIMAL (field type 246) -> ``decimal.Decimal`` with the stored scale;
      - DATE (10) -> ``'YYYY-MM-DD'``; DATETIME (12) and TIMESTAMP (7) ->
        ``'YYYY-MM-DD hh:mm:ss.ffffff'``; TIME (11) -> ``'[-]hh:mm:ss.ffffff'``
        (always 6 fractional digits, like ``my_TIME_to_str(..., 6)``);
      - VAR_STRING (253) -> ``str`` (MySQL prints it as a plain JSON string);
      - anything else (BLOB, VARBINARY, BIT, ...) -> ``'base64:type<N>:<base64>'``
        exactly as MySQL prints it, including MySQL's line break after every 76
        base64 characters.

    An empty input (length 0) decodes to ``None``: MySQL stores an empty value in a
    JSON column only when NULL/DEFAULT was forced into a NOT NULL JSON column in a
    non-strict mode, and reads it back as the JSON ``null`` literal.

    Raises :class:`JsonBinaryError` for malformed data.
    """
    if type(data) is not bytes:
        data = bytes(data)
    return decode_json_at(data, 0, len(data))
