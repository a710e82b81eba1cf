"""Row readers generated per schema read every value exactly as the generic readers do."""

from __future__ import annotations

import datetime as dt
import math
import random
import struct
from decimal import Decimal
from typing import Any

import pytest

from changestream.decoding import field_types as ft
from changestream.decoding.decimal_binary import decimal_size
from changestream.decoding.rows import RowImageDecoder, RowsFormatError
from changestream.decoding.table_schema import Column, TableSchema

UTF8MB4 = 45
LATIN1 = 8
BINARY = 63


def _columns() -> list[Column]:
    """Every type the generated readers decode inline, with the metadata variants that
    change how, plus a few that go through the generic readers."""
    specs: list[dict[str, Any]] = [
        dict(type_code=ft.TINY), dict(type_code=ft.TINY, unsigned=True),
        dict(type_code=ft.SHORT), dict(type_code=ft.SHORT, unsigned=True),
        dict(type_code=ft.LONG), dict(type_code=ft.LONG, unsigned=True),
        dict(type_code=ft.LONGLONG), dict(type_code=ft.LONGLONG, unsigned=True),
        dict(type_code=ft.INT24), dict(type_code=ft.INT24, unsigned=True),
        dict(type_code=ft.FLOAT), dict(type_code=ft.DOUBLE), dict(type_code=ft.YEAR),
        dict(type_code=ft.DATE), dict(type_code=ft.NEWDATE),
        *[dict(type_code=ft.DATETIME2, fsp=f) for f in range(7)],
        *[dict(type_code=ft.TIMESTAMP2, fsp=f) for f in range(7)],
        *[dict(type_code=ft.NEWDECIMAL, precision=p, scale=s)
          for p, s in ((12, 2), (1, 0), (9, 9), (10, 0), (18, 9), (20, 10), (65, 30), (65, 0),
                       (30, 15), (4, 4))],
        dict(type_code=ft.VARCHAR, max_length=40, collation=UTF8MB4),
        dict(type_code=ft.VARCHAR, max_length=400, collation=UTF8MB4),
        dict(type_code=ft.VARCHAR, max_length=40),  # charset not logged: UTF-8
        dict(type_code=ft.VARCHAR, max_length=40, collation=LATIN1),
        dict(type_code=ft.VARCHAR, max_length=40, collation=BINARY),
        dict(type_code=ft.VAR_STRING, max_length=300, collation=UTF8MB4),
        dict(type_code=ft.STRING, max_length=10, collation=UTF8MB4),
        dict(type_code=ft.STRING, max_length=10, collation=BINARY),
        dict(type_code=ft.STRING, max_length=300, collation=BINARY),
        *[dict(type_code=ft.BLOB, length_bytes=n, collation=c)
          for n in (1, 2, 3, 4) for c in (None, UTF8MB4, BINARY)],
        dict(type_code=ft.ENUM, length_bytes=1, enum_values=("a", "b")),
        dict(type_code=ft.BIT, bits=12),
        dict(type_code=ft.TIME2, fsp=3),
    ]
    return [Column(index=i, **spec) for i, spec in enumerate(specs)]


def _decimal_bytes(rng: random.Random, precision: int, scale: int) -> bytes:
    """A DECIMAL in MySQL's binary format (decimal2bin), random digits."""
    digits = "".join(rng.choice("0123456789") for _ in range(precision))
    value = Decimal(f"{digits[:precision - scale] or '0'}.{digits[precision - scale:] or '0'}")
    if rng.random() < 0.5:
        value = -value
    intg, frac = precision - scale, scale
    sign = value.as_tuple().sign
    text = format(abs(value), f".{scale}f") if scale else format(abs(value), "f")
    int_part, _, frac_part = text.partition(".")
    int_part = int_part.rjust(intg, "0")[-intg:] if intg else ""
    frac_part = frac_part.ljust(frac, "0")
    sizes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    out = b""
    lead = intg % 9
    if lead:
        out += int(int_part[:lead]).to_bytes(sizes[lead], "big")
    for k in range(lead, intg, 9):
        out += int(int_part[k:k + 9]).to_bytes(4, "big")
    for k in range(0, frac - frac % 9, 9):
        out += int(frac_part[k:k + 9]).to_bytes(4, "big")
    if frac % 9:
        out += int(frac_part[frac - frac % 9:]).to_bytes(sizes[frac % 9], "big")
    raw = bytearray(out)
    raw[0] ^= 0x80
    if sign:
        raw = bytearray(b ^ 0xFF for b in raw)
    assert len(raw) == decimal_size(precision, scale)
    return bytes(raw)


def _datetime2_bytes(rng: random.Random, fsp: int) -> bytes:
    if rng.random() < 0.2:  # anything at all: zero or invalid dates among them
        return bytes(rng.getrandbits(8) for _ in range(5 + (fsp + 1) // 2))
    t = dt.datetime(1000, 1, 1) + dt.timedelta(seconds=rng.randint(0, 9000 * 365 * 86400))
    ymd = ((t.year * 13 + t.month) << 5) | t.day
    hms = (t.hour << 12) | (t.minute << 6) | t.second
    packed = ((ymd << 17) | hms) + 0x8000000000
    n = (fsp + 1) // 2
    frac = rng.randint(0, 10 ** (2 * n) - 1) if n else 0
    return packed.to_bytes(5, "big") + (frac.to_bytes(n, "big") if n else b"")


def _value_bytes(rng: random.Random, c: Column) -> bytes:
    t = c.type_code
    if t in (ft.VARCHAR, ft.VAR_STRING, ft.STRING) or t in ft.BLOB_TYPES:
        choice = rng.random()
        if choice < 0.4:
            raw = "".join(rng.choice("abcé✓ü€ 𝄞") for _ in range(rng.randint(0, 8)))
            data = raw.encode("utf-8")
        elif choice < 0.6:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 8)))  # not UTF-8
        else:
            data = bytes(rng.choice(b"abc\0 ") for _ in range(rng.randint(0, 8)))
        if t in ft.BLOB_TYPES:
            size = c.length_bytes
        else:
            size = 1 if c.max_length < 256 else 2
        return len(data).to_bytes(size, "little") + data
    if t == ft.NEWDECIMAL:
        return _decimal_bytes(rng, c.precision, c.scale)
    if t == ft.DATETIME2:
        return _datetime2_bytes(rng, c.fsp)
    if t == ft.TIMESTAMP2:
        n = (c.fsp + 1) // 2
        seconds = 0 if rng.random() < 0.2 else rng.getrandbits(32)
        frac = 0 if rng.random() < 0.3 else rng.randint(0, 10 ** (2 * n) - 1) if n else 0
        return seconds.to_bytes(4, "big") + (frac.to_bytes(n, "big") if n else b"")
    if t in (ft.DATE, ft.NEWDATE):
        if rng.random() < 0.7:
            d = dt.date(1000, 1, 1) + dt.timedelta(days=rng.randint(0, 3_000_000))
            return ((d.year << 9) | (d.month << 5) | d.day).to_bytes(3, "little")
        return bytes(rng.getrandbits(8) for _ in range(3))  # zero or invalid dates
    if t == ft.FLOAT:
        return struct.pack("<f", rng.uniform(-1e30, 1e30)) if rng.random() < 0.9 else \
            bytes(rng.getrandbits(8) for _ in range(4))  # NaNs and infinities too
    if t == ft.DOUBLE:
        return struct.pack("<d", rng.uniform(-1e300, 1e300)) if rng.random() < 0.9 else \
            bytes(rng.getrandbits(8) for _ in range(8))
    if t == ft.ENUM:
        return bytes([rng.randint(0, 2)])
    if t == ft.BIT:
        return bytes(rng.getrandbits(8) for _ in range(2))
    if t == ft.TIME2:
        return (0x800000 << 16 | rng.getrandbits(30)).to_bytes(5, "big")
    size = {ft.TINY: 1, ft.SHORT: 2, ft.INT24: 3, ft.LONG: 4, ft.LONGLONG: 8, ft.YEAR: 1}[t]
    return bytes(rng.getrandbits(8) for _ in range(size))


def _image(rng: random.Random, columns: list[Column], null_rate: float) -> bytes:
    nulls = 0
    data = b""
    for c in columns:
        if rng.random() < null_rate:
            nulls |= 1 << c.index
        else:
            data += _value_bytes(rng, c)
    return nulls.to_bytes((len(columns) + 7) >> 3, "little") + data


def _body(columns: list[Column], images: list[bytes], update: bool) -> bytes:
    n = len(columns)
    bitmap = ((1 << n) - 1).to_bytes((n + 7) >> 3, "little")
    return bytes([n]) + bitmap + (bitmap if update else b"") + b"".join(images)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list | tuple) and type(a) is type(b):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    # Equal values of the same type, and for Decimal the same exponent (scale).
    if type(a) is not type(b) or a != b:
        return False
    return not isinstance(a, Decimal) or a.as_tuple() == b.as_tuple()


def _both_paths(decoder: RowImageDecoder, body: bytes, kind: str) -> tuple[Any, Any]:
    """What the generated readers and the generic path make of a body (an exception's
    type and text for the generic path when it refuses it; ``None`` for the generated
    readers when they hand over to the generic path)."""
    fast = decoder._fast_readers()
    assert fast is not None
    nbytes = (decoder.ncols + 7) >> 3
    pos = 1 + nbytes * (2 if kind == "update" else 1)
    present = tuple(range(decoder.ncols))
    fast_rows = decoder._fast_rows(fast, body, pos, len(body), kind)
    try:
        generic = decoder._generic_rows(body, pos, len(body), kind, False, present,
                                        present if kind == "update" else None).rows
    except RowsFormatError as exc:
        generic = exc
    return fast_rows, generic


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", ["insert", "update"])
def test_generated_readers_equal_generic_readers_for_every_inline_type(seed: int,
                                                                       kind: str) -> None:
    rng = random.Random(seed)
    columns = _columns()
    rng.shuffle(columns)
    columns = [Column(index=i, **{f: getattr(c, f) for f in c.__slots__ if f != "index"})
               for i, c in enumerate(columns)]
    decoder = RowImageDecoder(TableSchema("db", "t", tuple(columns)))
    compared = 0
    for _ in range(40):
        images = [_image(rng, columns, rng.choice((0.0, 0.1, 0.5)))
                  for _ in range(rng.randint(1, 4) * (2 if kind == "update" else 1))]
        fast, generic = _both_paths(decoder, _body(columns, images, kind == "update"), kind)
        if isinstance(generic, RowsFormatError):
            assert fast is None  # the generic path then gives its error
            continue
        assert fast is not None
        assert _same(fast, generic)
        compared += 1
    assert compared >= 10


def test_generated_readers_hand_malformed_images_to_the_generic_path() -> None:
    columns = [Column(0, ft.LONGLONG), Column(1, ft.VARCHAR, max_length=40, collation=UTF8MB4),
               Column(2, ft.NEWDECIMAL, precision=12, scale=2)]
    decoder = RowImageDecoder(TableSchema("db", "t", tuple(columns)))
    good = b"\x00" + struct.pack("<q", 7) + b"\x02hi" + b"\x80\x00\x00\x00\x05\x63"
    body = _body(columns, [good], False)
    rows = decoder.decode_body(body, 0, "insert", False).rows
    assert rows == [[7, "hi", Decimal("5.99")]]
    # cut short, a row too many, a fraction group of 200 (two digits hold at most 99)
    for bad in (body[:-1], body + b"\x00", body[:-1] + b"\xc8"):
        with pytest.raises(RowsFormatError) as fast_error:
            decoder.decode_body(bad, 0, "insert", False)
        pos = 1 + 1
        with pytest.raises(RowsFormatError) as generic_error:
            decoder._generic_rows(bad, pos, len(bad), "insert", False, (0, 1, 2), None)
        assert str(fast_error.value) == str(generic_error.value)


def test_decimal_keeps_the_column_scale_and_no_negative_zero() -> None:
    columns = [Column(0, ft.NEWDECIMAL, precision=20, scale=10)]
    decoder = RowImageDecoder(TableSchema("db", "t", tuple(columns)))
    zero = bytearray(decimal_size(20, 10))
    positive_zero = bytes([zero[0] | 0x80]) + bytes(zero[1:])
    negative_zero = bytes(b ^ 0xFF for b in positive_zero)  # all groups zero, sign negative
    for image in (positive_zero, negative_zero):
        rows = decoder.decode_body(_body(columns, [b"\x00" + image], False), 0, "insert",
                                   False).rows
        assert str(rows[0][0]) == "0E-10" and rows[0][0].as_tuple().sign == 0


def test_float_is_the_shortest_decimal_that_reads_back_as_the_same_4_byte_float() -> None:
    import random

    from changestream.decoding.row_values import shortest_float32

    def as_float32(x: float) -> float:
        return struct.unpack("<f", struct.pack("<f", x))[0]

    assert shortest_float32(as_float32(5.6)) == 5.6
    assert shortest_float32(as_float32(1e-45)) == 1e-45  # the least subnormal
    assert shortest_float32(as_float32(16777217.0)) == 16777216.0
    rng = random.Random(7)
    for _ in range(5000):
        value = struct.unpack("<f", rng.getrandbits(32).to_bytes(4, "little"))[0]
        if value != value or abs(value) == float("inf"):
            continue
        short = shortest_float32(value)
        assert as_float32(short) == value
        assert len(repr(short)) <= len(repr(float(f"{value:.9g}")))
