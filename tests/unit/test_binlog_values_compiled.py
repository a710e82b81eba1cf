"""The compiled value writers (changestream.native.binlog_values) against the Python readers
and record writers they stand in for: random and edge bytes of every type they take, the
same JSON text byte for byte, or no text where the Python reader refuses the bytes."""

from __future__ import annotations

import math
import random
import struct
import zlib
from typing import Any

import orjson
import pytest

from changestream.decoding import field_types as ft
from changestream.decoding.row_values import value_reader
from changestream.decoding.table_schema import Column
from changestream.encoding.records import json_default
from changestream.encoding.temporal_text import datetime_format, time_format
from changestream.native import compiled

native = compiled("changestream.native.binlog_values")
pytestmark = pytest.mark.skipif(native is None, reason="the compiled modules are not built")

OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS


def _python_json(column: Column, data: bytes, write: Any = None) -> bytes | None:
    """What the Python path writes for the value in ``data`` (None: its reader refuses)."""
    try:
        value, end = value_reader(column)(data, 0)
    except (ValueError, IndexError, struct.error, OverflowError):
        return None
    assert end == len(data)
    if write is not None:
        value = write(value)
    return orjson.dumps(value, default=json_default, option=OPTIONS)


def _decimal_bytes(rng: random.Random, precision: int, scale: int) -> bytes:
    """A valid binary DECIMAL(precision, scale) of random digits (MySQL's decimal2bin)."""
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    intg = precision - scale
    digits = "".join(rng.choice("0123456789") for _ in range(precision))
    if rng.random() < 0.2:
        digits = "0" * (precision - 3) + digits[-3:]
    if rng.random() < 0.05:
        digits = "0" * precision
    whole, fraction = digits[:intg], digits[intg:]
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(whole[:lead]).to_bytes(dig2bytes[lead], "big")
    for k in range(lead, intg, 9):
        out += int(whole[k:k + 9]).to_bytes(4, "big")
    for k in range(0, scale - scale % 9, 9):
        out += int(fraction[k:k + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fraction[scale - scale % 9:]).to_bytes(dig2bytes[scale % 9], "big")
    out[0] ^= 0x80
    if rng.random() < 0.5:
        out = bytearray(b ^ 0xFF for b in out)
    return bytes(out)


@pytest.mark.parametrize("precision,scale", [(1, 0), (5, 2), (9, 9), (10, 0), (18, 17),
                                             (30, 10), (65, 30), (65, 0), (19, 1), (3, 3)])
def test_decimals(precision: int, scale: int) -> None:
    rng = random.Random(precision * 100 + scale)
    column = Column(0, ft.NEWDECIMAL, precision=precision, scale=scale)
    size = len(_decimal_bytes(rng, precision, scale))
    for n in range(3000):
        data = _decimal_bytes(rng, precision, scale) if n % 4 else rng.randbytes(size)
        expected = _python_json(column, data)
        assert native.json_of("decimal", data, precision, scale) == expected, data.hex()


def test_doubles() -> None:
    rng = random.Random(7)
    values = [0.0, -0.0, 1e16, 1e15, 9999999999999998.0, 1e-5, 1e-4, 0.1, 1 / 3, 5e-324,
              1.7976931348623157e308, float("inf"), float("-inf"), float("nan"), 123.0]
    values += [rng.uniform(-1, 1) * 10 ** rng.randint(-40, 40) for _ in range(20000)]
    values += [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(20000)]
    column = Column(0, ft.DOUBLE)
    written = 0
    for value in values:
        data = struct.pack("<d", value)
        text = native.json_of("double", data)
        if text is not None:  # else orjson writes it, as the Python path does
            written += 1
            assert text == _python_json(column, data), repr(value)
    # Python's shortest form without an exponent is written here, the rest by orjson.
    plain = sum(1 for v in values if "e" not in repr(v) and "n" not in repr(v))
    assert written == plain > 5000


def _doubles_in_plain_range(rng: random.Random) -> list[float]:
    """Doubles repr writes without an exponent: random bits, random values, values of a few
    decimals, powers of two and of ten and their neighbours."""
    values: list[float] = []
    for _ in range(60000):
        bits = rng.randint(1023 - 14, 1023 + 49) << 52 | rng.getrandbits(52)
        values.append(struct.unpack("<d", struct.pack("<Q", bits))[0])
    values += [rng.uniform(1e-4, 1e15) * rng.choice((1, -1)) for _ in range(30000)]
    values += [round(rng.uniform(0, 10 ** rng.randint(0, 14)), rng.randint(0, 10))
               for _ in range(30000)]
    values += [rng.randint(1, 10**15 - 1) / 10 ** rng.randint(0, 18) for _ in range(30000)]
    for k in range(-14, 50):
        values += [2.0**k, math.nextafter(2.0**k, 0), math.nextafter(2.0**k, math.inf)]
    for k in range(-4, 16):
        below = above = 10.0**k
        for _ in range(30):
            values += [below, above]
            below, above = math.nextafter(below, 0), math.nextafter(above, math.inf)
    return [v for v in values if 1e-4 <= abs(v) < 1e15]


def test_doubles_by_integers_are_repr() -> None:
    """The integer path (no Python dtoa) writes repr's text, and takes nearly every value:
    it leaves only what it cannot be sure of (ties, 16 digits at a power of two)."""
    values = _doubles_in_plain_range(random.Random(11))
    texts = [native.short_double_text(v) for v in values]
    for value, text in zip(values, texts):
        assert text is None or text == repr(value), repr(value)
    left = sum(text is None for text in texts)
    assert left < len(values) / 1000, (left, len(values))
    assert native.short_double_text(1e15) is None and native.short_double_text(1e-5) is None


@pytest.mark.parametrize("fsp", range(7))
def test_temporal_values(fsp: int) -> None:
    rng = random.Random(fsp)
    n = (fsp + 1) // 2
    cases = [
        ("datetime2", Column(0, ft.DATETIME2, fsp=fsp), 5 + n, datetime_format(fsp, False)),
        ("timestamp2", Column(0, ft.TIMESTAMP2, fsp=fsp), 4 + n, datetime_format(fsp, True)),
        ("time2", Column(0, ft.TIME2, fsp=fsp), 3 + n, time_format(fsp)),
        ("date", Column(0, ft.DATE), 3, None),
    ]
    for kind, column, size, write in cases:
        for k in range(4000):
            data = bytearray(rng.randbytes(size))
            if kind == "datetime2" and k % 2:
                data[0] |= 0x80  # a date the server could have written
            if k % 50 == 0:
                data = bytearray(size)  # zeros
            expected = _python_json(column, bytes(data), write)
            got = native.json_of(kind, bytes(data), fsp)
            if got is None:
                # refused: only where the value is not a date the server writes
                assert kind == "datetime2" and not data[0] & 0x80
                continue
            assert got == expected, (kind, fsp, bytes(data).hex())


def test_crc32() -> None:
    rng = random.Random(3)
    for size in [0, 1, 7, 8, 9, 63, 64, 65, 1000, 65536]:
        data = rng.randbytes(size)
        assert native.crc32_of(data) == zlib.crc32(data)


def test_commit_times_are_written_as_the_records_write_them() -> None:
    """A MySQL GTID event's commit time (microseconds) as the compiled fast path writes it,
    against the Python path's datetime from float seconds and its ISO text."""
    from changestream.encoding.records import commit_time_text
    from changestream.transactions.groups import utc_time

    rng = random.Random(7)
    edges = [1, 999_999, 1_000_000, 86_399_999_999, 951_782_400_000_000,  # 2000-02-29
             1_764_089_000_123_456, (1 << 51) - 1]
    for micros in edges + [rng.randrange(1, 1 << 51) for _ in range(20_000)]:
        expected = orjson.dumps(commit_time_text(utc_time.__wrapped__(micros / 1e6)))
        assert native.epoch_micros_json(micros) == expected, micros


def _python_arrow(column: Column, data: bytes) -> Any:
    """What the Spark sink makes of the Python reader's value in ``data``: the integer its
    Arrow column holds (decimal: unscaled; temporal: microseconds or days), the text, or
    ``None``; ``-1`` where the reader refuses the bytes."""
    import pyarrow as pa

    from changestream.sinks.spark.types import column_mapping

    try:
        value, end = value_reader(column)(data, 0)
    except (ValueError, IndexError, struct.error, OverflowError):
        return -1
    assert end == len(data)
    mapping = column_mapping(column)
    if value is not None and mapping.convert is not None:
        value = mapping.convert(value)
    try:
        array = pa.array([value], type=mapping.arrow)
    except pa.ArrowInvalid:  # e.g. more digits than the DECIMAL's precision
        return -1
    if pa.types.is_decimal(mapping.arrow):
        (got,) = array.to_pylist()
        if got is None:
            return None
        sign, digits, exponent = got.as_tuple()
        unscaled = int("".join(map(str, digits))) * 10 ** (exponent + mapping.arrow.scale)
        return -unscaled if sign else unscaled
    if pa.types.is_timestamp(mapping.arrow):
        return array.cast(pa.int64()).to_pylist()[0]
    if pa.types.is_date32(mapping.arrow):
        return array.cast(pa.int32()).to_pylist()[0]
    return array.to_pylist()[0]


@pytest.mark.parametrize("precision,scale", [(1, 0), (5, 2), (9, 9), (18, 17), (30, 10),
                                             (38, 0), (38, 38), (38, 12), (19, 1)])
def test_decimals_as_arrow_holds_them(precision: int, scale: int) -> None:
    rng = random.Random(precision * 1000 + scale)
    column = Column(0, ft.NEWDECIMAL, precision=precision, scale=scale)
    size = len(_decimal_bytes(rng, precision, scale))
    for n in range(2000):
        data = _decimal_bytes(rng, precision, scale) if n % 4 else rng.randbytes(size)
        got = native.arrow_value_of("decimal128", data, precision, scale)
        assert got == _python_arrow(column, data), data.hex()


@pytest.mark.parametrize("fsp", range(7))
def test_temporal_values_as_arrow_holds_them(fsp: int) -> None:
    """Dates and times as the Spark sink's Arrow columns hold them: microseconds, days or
    TIME's text; zero and invalid dates (which Python's datetime refuses) NULL."""
    rng = random.Random(100 + fsp)
    n = (fsp + 1) // 2
    cases = [
        ("datetime2", Column(0, ft.DATETIME2, fsp=fsp), 5 + n),
        ("timestamp2", Column(0, ft.TIMESTAMP2, fsp=fsp), 4 + n),
        ("time2", Column(0, ft.TIME2, fsp=fsp), 3 + n),
        ("date", Column(0, ft.DATE), 3),
    ]
    nulls = 0
    for kind, column, size in cases:
        for k in range(3000):
            data = bytearray(rng.randbytes(size))
            if kind == "datetime2" and k % 2:
                data[0] |= 0x80  # a date the server could have written
            if kind in ("datetime2", "date") and k % 3 == 0:  # mostly valid dates
                year, month, day = rng.randint(1, 9999), rng.randint(0, 12), rng.randint(0, 31)
                if kind == "date":
                    data = bytearray((year << 9 | month << 5 | day).to_bytes(3, "little"))
                else:
                    ymd = ((year * 13 + month) << 5 | day) << 17 | rng.randrange(1 << 17)
                    data[:5] = (ymd + 0x8000000000).to_bytes(5, "big")
            if k % 50 == 0:
                data = bytearray(size)  # zeros
            got = native.arrow_value_of(kind, bytes(data), fsp)
            if got == -1:  # refused: only where the value is not a date the server writes
                assert kind == "datetime2" and not data[0] & 0x80
                continue
            nulls += got is None
            assert got == _python_arrow(column, bytes(data)), (kind, fsp, bytes(data).hex())
    assert nulls > 0
