"""MySQL column type codes as they appear in TABLE_MAP events."""

from __future__ import annotations

DECIMAL = 0
TINY = 1
SHORT = 2
LONG = 3
FLOAT = 4
DOUBLE = 5
NULL = 6
TIMESTAMP = 7
LONGLONG = 8
INT24 = 9
DATE = 10
TIME = 11
DATETIME = 12
YEAR = 13
NEWDATE = 14
VARCHAR = 15
BIT = 16
TIMESTAMP2 = 17
DATETIME2 = 18
TIME2 = 19
TYPED_ARRAY = 20
VECTOR = 242
INVALID = 243
BOOL = 244
JSON = 245
NEWDECIMAL = 246
ENUM = 247
SET = 248
TINY_BLOB = 249
MEDIUM_BLOB = 250
LONG_BLOB = 251
BLOB = 252
VAR_STRING = 253
STRING = 254
GEOMETRY = 255

NAMES: dict[int, str] = {
    code: name for name, code in globals().items() if name.isupper() and isinstance(code, int)
}

INTEGER_TYPES = frozenset({TINY, SHORT, INT24, LONG, LONGLONG})
# Types that may be UNSIGNED.
NUMERIC_TYPES = frozenset({TINY, SHORT, INT24, LONG, LONGLONG, FLOAT, DOUBLE, NEWDECIMAL, DECIMAL})
# Types the SIGNEDNESS optional metadata has one bit for, in column order: the numeric types
# and YEAR, which both servers count among them (a YEAR column's bit is set: unsigned).
SIGNEDNESS_TYPES = NUMERIC_TYPES | {YEAR}
# Types the (DEFAULT_|COLUMN_)CHARSET optional metadata covers (by real type).
CHARACTER_TYPES = frozenset({STRING, VAR_STRING, VARCHAR, BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB})
ENUM_SET_TYPES = frozenset({ENUM, SET})
BLOB_TYPES = frozenset({BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB})


def type_name(code: int) -> str:
    """The name of a column type code, or ``TYPE_<code>``."""
    return NAMES.get(code, f"TYPE_{code}")
