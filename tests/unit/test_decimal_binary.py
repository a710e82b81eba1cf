"""Tests for changestream.decoding.decimal_binary (MySQL binary DECIMAL)."""

from __future__ import annotations

import decimal
import random
from decimal import Decimal

import pytest

from changestream.decoding.decimal_binary import decimal_size, decode_decimal


def plain(value: Decimal) -> str:
    """Positional notation (what MySQL prints); str() would use 1E-30 style for tiny values."""
    return format(value, "f")


# Bytes per number of leftover digits, from the format description in strings/decimal.cc.
DIG2BYTES = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4]


def encode_decimal(text: str, precision: int, scale: int) -> bytes:
    """Independent encoder following the documented decimal2bin algorithm.

    Integer and fraction digits are zero-padded to the column's widths, split into
    9-digit groups (leftover integer digits first, leftover fraction digits last),
    each group written big-endian in 4 bytes (or DIG2BYTES[n] for n leftover
    digits); negative numbers have every byte inverted; finally the top bit of the
    first byte is flipped.
    """
    negative = text.startswith("-")
    text = text.lstrip("-")
    int_part, _, frac_part = text.partition(".")
    intg = precision - scale
    int_digits = int_part.lstrip("0").rjust(intg, "0")
    frac_digits = frac_part.ljust(scale, "0")
    assert len(int_digits) == intg and len(frac_digits) == scale, (text, precision, scale)

    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(int_digits[:lead]).to_bytes(DIG2BYTES[lead], "big")
    for i in range(lead, intg, 9):
        out += int(int_digits[i : i + 9]).to_bytes(4, "big")
    full = scale - scale % 9
    for i in range(0, full, 9):
        out += int(frac_digits[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac_digits[full:]).to_bytes(DIG2BYTES[scale % 9], "big")
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


# Known encodings.  The first pair is the worked example in MySQL's strings/decimal.cc
# (decimal2bin): 1234567890.1234 as DECIMAL(14,4) and its negation.
KNOWN = [
    ("810dfb38d204d2", 14, 4, "1234567890.1234"),
    ("7ef204c72dfb2d", 14, 4, "-1234567890.1234"),
    ("8012d68759", 10, 2, "1234567.89"),
    ("7fed2978a6", 10, 2, "-1234567.89"),
    ("8000", 4, 0, "0"),
    ("8000000000", 10, 2, "0.00"),
    ("8001", 4, 0, "1"),
    ("7ffe", 4, 0, "-1"),
    ("8000000000000001", 18, 18, "0.000000000000000001"),
    ("8000000001", 10, 0, "1"),
    ("803b9ac9ff", 10, 0, "999999999"),
    # 00 01 | 17 -> inverted FF FE | E8 -> sign bit flipped 7F FE | E8
    ("7ffee8", 5, 2, "-1.23"),
    ("800117", 5, 2, "1.23"),
]


@pytest.mark.parametrize(("hexbytes", "precision", "scale", "text"), KNOWN)
def test_known_encodings(hexbytes: str, precision: int, scale: int, text: str) -> None:
    data = bytes.fromhex(hexbytes)
    value, used = decode_decimal(data, 0, precision, scale)
    assert used == len(data) == decimal_size(precision, scale)
    assert value == Decimal(text)
    assert plain(value) == text  # keeps the column's scale, like MySQL prints it


def test_encoder_matches_known_bytes() -> None:
    # Guards the independent test encoder itself against the documented example.
    assert encode_decimal("1234567890.1234", 14, 4).hex() == "810dfb38d204d2"
    assert encode_decimal("-1234567890.1234", 14, 4).hex() == "7ef204c72dfb2d"
    assert encode_decimal("1234567.89", 10, 2).hex() == "8012d68759"
    assert encode_decimal("-1234567.89", 10, 2).hex() == "7fed2978a6"


@pytest.mark.parametrize(
    ("precision", "scale", "size"),
    [
        (1, 0, 1),
        (4, 0, 2),
        (9, 0, 4),
        (10, 0, 5),
        (10, 2, 5),
        (14, 4, 7),
        (18, 9, 8),
        (20, 10, 10),
        (65, 0, 29),
        (65, 30, 30),
        (30, 30, 14),
        (1, 1, 1),
    ],
)
def test_sizes(precision: int, scale: int, size: int) -> None:
    assert decimal_size(precision, scale) == size


def test_extremes_65_30() -> None:
    biggest = "9" * 35 + "." + "9" * 30
    for text in (biggest, "-" + biggest):
        data = encode_decimal(text, 65, 30)
        assert len(data) == 30
        value, used = decode_decimal(data, 0, 65, 30)
        assert used == 30
        assert plain(value) == text
    smallest = "0." + "0" * 29 + "1"
    value, _ = decode_decimal(encode_decimal("-" + smallest, 65, 30), 0, 65, 30)
    assert plain(value) == "-" + smallest
    value, _ = decode_decimal(encode_decimal("0", 65, 30), 0, 65, 30)
    assert plain(value) == "0." + "0" * 30


def test_65_digits_integer() -> None:
    text = "12345678901234567890123456789012345678901234567890123456789012345"
    value, used = decode_decimal(encode_decimal("-" + text, 65, 0), 0, 65, 0)
    assert used == 29
    assert plain(value) == "-" + text


def test_exact_regardless_of_decimal_context() -> None:
    data = encode_decimal("-" + "9" * 35 + "." + "1" * 30, 65, 30)
    with decimal.localcontext() as ctx:
        ctx.prec = 3
        value, _ = decode_decimal(data, 0, 65, 30)
    assert plain(value) == "-" + "9" * 35 + "." + "1" * 30


def test_negative_zero_decodes_as_zero() -> None:
    data = encode_decimal("-0.00", 10, 2)
    value, _ = decode_decimal(data, 0, 10, 2)
    assert plain(value) == "0.00"
    assert not value.is_signed()


def test_offset_and_trailing_bytes() -> None:
    data = b"\xaa\xbb" + bytes.fromhex("8012d68759") + b"\xcc"
    value, used = decode_decimal(data, 2, 10, 2)
    assert (value, used) == (Decimal("1234567.89"), 5)
    value, used = decode_decimal(memoryview(data), 2, 10, 2)
    assert (value, used) == (Decimal("1234567.89"), 5)
    value, used = decode_decimal(bytearray(data), 2, 10, 2)
    assert (value, used) == (Decimal("1234567.89"), 5)


def test_random_round_trip_all_precisions_and_scales() -> None:
    rng = random.Random(20240102)
    for precision in range(1, 66):
        for scale in range(0, min(precision, 30) + 1):
            for _ in range(4):
                intg = precision - scale
                int_digits = "".join(rng.choice("0123456789") for _ in range(intg)) or "0"
                frac_digits = "".join(rng.choice("0123456789") for _ in range(scale))
                int_digits = int_digits.lstrip("0") or "0"
                text = int_digits + ("." + frac_digits if scale else "")
                if rng.random() < 0.5 and Decimal(text) != 0:
                    text = "-" + text
                data = encode_decimal(text, precision, scale)
                value, used = decode_decimal(b"\x00" + data, 1, precision, scale)
                assert used == len(data)
                assert plain(value) == text, (precision, scale, data.hex())


def test_truncated_input_raises() -> None:
    with pytest.raises(ValueError):
        decode_decimal(bytes.fromhex("8012d687"), 0, 10, 2)
    with pytest.raises(ValueError):
        decode_decimal(bytes.fromhex("8012d68759"), 1, 10, 2)


@pytest.mark.parametrize(("precision", "scale"), [(-1, 0), (82, 0), (10, 11), (5, -1)])
def test_invalid_precision_or_scale_raises(precision: int, scale: int) -> None:
    with pytest.raises(ValueError):
        decode_decimal(bytes(40), 0, precision, scale)


def test_precision_zero_and_json_precisions_beyond_65() -> None:
    # In-memory decimals (as stored in JSON documents) may carry up to 81 digits.
    assert decode_decimal(b"\x80", 0, 0, 0) == (Decimal(0), 0)
    text = "9" * 51 + "." + "1" * 30
    data = encode_decimal("-" + text, 81, 30)
    assert decode_decimal(data, 0, 81, 30) == (Decimal("-" + text), len(data))


def test_invalid_digit_group_raises() -> None:
    # A full 9-digit group holding 10**9 is not valid decimal2bin output.
    data = bytes([0x80]) + (10**9).to_bytes(4, "big")
    with pytest.raises(ValueError):
        decode_decimal(data, 0, 10, 0)
