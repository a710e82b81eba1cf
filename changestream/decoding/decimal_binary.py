"""Exact decoder for MySQL's binary DECIMAL format (``decimal2bin`` / ``bin2decimal``), used in
binlog row images and inside binary JSON (opaque type 246, after precision and scale bytes).

Integer arithmetic only, so the result is exact for every precision (columns: up to 65,
scale up to 30; JSON values: up to 81), whatever the ``decimal`` context. The layout is
described at :func:`_layout`."""

from __future__ import annotations

from decimal import Decimal
from functools import cache

__all__ = ["decimal_size", "decode_decimal"]

DIG_PER_DEC = 9
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
# Columns allow DECIMAL(65, 30); decimals inside JSON documents carry the precision of an
# in-memory decimal, which can be up to DECIMAL_MAX_POSSIBLE_PRECISION (81) digits.
_MAX_PRECISION = 81


@cache
def _layout(precision: int, scale: int) -> tuple[int, tuple[tuple[int, int, int, int], ...]]:
    """Return ``(size, groups)``; each group is ``(shift, mask, multiplier, limit)``.

    The layout of ``DECIMAL(precision, scale)``: the integer part has ``precision - scale``
    digits, the fraction ``scale`` digits; each part is split into groups of 9 decimal
    digits stored as 4-byte big-endian integers. The integer part's leftover digits (the
    most significant ones) come first, the fraction's leftover digits (the least
    significant ones) last; leftover groups of ``n`` digits take
    ``[0, 1, 1, 2, 2, 3, 3, 4, 4, 4][n]`` bytes. Positive values have the top bit of the
    first byte set (it is flipped on write); for negative values every byte is
    additionally inverted.

    ``shift``/``mask`` extract the group from the whole value read as one
    big-endian integer; ``multiplier`` is ``10 ** digits`` of the group (the
    accumulated value is multiplied by it before the group is added);
    ``limit`` is the exclusive upper bound of a valid group value (0: unchecked).
    """
    if not 0 <= precision <= _MAX_PRECISION:
        raise ValueError(f"DECIMAL precision {precision} out of range 0..{_MAX_PRECISION}")
    if not 0 <= scale <= precision:
        raise ValueError(f"DECIMAL scale {scale} out of range for precision {precision}")
    intg = precision - scale
    intg0, intg0x = divmod(intg, DIG_PER_DEC)
    frac0, frac0x = divmod(scale, DIG_PER_DEC)
    # (bytes, digits, checked) in storage order, most significant first.
    parts: list[tuple[int, int, bool]] = []
    if intg0x:
        # The most significant group cannot overlap anything: no range check needed.
        parts.append((_DIG2BYTES[intg0x], intg0x, False))
    parts.extend([(4, DIG_PER_DEC, True)] * (intg0 + frac0))
    if frac0x:
        parts.append((_DIG2BYTES[frac0x], frac0x, True))
    size = sum(p[0] for p in parts)
    groups = []
    remaining = size
    for nbytes, digits, checked in parts:
        remaining -= nbytes
        groups.append(
            (remaining * 8, (1 << (nbytes * 8)) - 1, 10**digits, 10**digits if checked else 0)
        )
    return size, tuple(groups)


def decimal_size(precision: int, scale: int) -> int:
    """Number of bytes ``DECIMAL(precision, scale)`` takes in binary form."""
    return _layout(precision, scale)[0]


def decode_decimal(
    data: bytes | bytearray | memoryview, offset: int, precision: int, scale: int
) -> tuple[Decimal, int]:
    """Decode a binary DECIMAL(precision, scale) at ``data[offset]``.

    Returns ``(value, bytes_consumed)``.  The value keeps the column's scale
    (``DECIMAL(10,2)`` zero decodes as ``Decimal('0.00')``), which is also how
    MySQL prints it.  Raises ``ValueError`` for truncated or malformed input.
    """
    size, groups = _layout(precision, scale)
    if not size:  # DECIMAL(0,0): no digits at all, only zero is representable
        return Decimal(0), 0
    end = offset + size
    if offset < 0 or end > len(data):
        raise ValueError(
            f"DECIMAL({precision},{scale}) needs {size} bytes at offset {offset}, "
            f"buffer has {len(data) - offset}"
        )
    raw = int.from_bytes(data[offset:end], "big")
    top = 1 << (size * 8 - 1)
    negative = not raw & top
    if negative:
        raw ^= (top << 1) - 1 ^ top  # undo the sign-bit flip and invert everything
    else:
        raw ^= top
    n = 0
    for shift, mask, mult, limit in groups:
        g = (raw >> shift) & mask
        if limit and g >= limit:
            raise ValueError(f"DECIMAL({precision},{scale}): invalid digit group {g}")
        n = n * mult + g
    if scale:
        digits = str(n)
        if len(digits) <= scale:
            digits = "0" * (scale + 1 - len(digits)) + digits
        text = f"{digits[:-scale]}.{digits[-scale:]}"
    else:
        text = str(n)
    if negative and n:
        text = "-" + text
    return Decimal(text), size
