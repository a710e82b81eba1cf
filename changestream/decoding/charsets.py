"""From MySQL/MariaDB collation ids to Python codecs."""

from __future__ import annotations

from functools import lru_cache

from pymysql.charset import charset_by_id

BINARY_COLLATION = 63

_CODECS = {
    "utf8": "utf-8",
    "utf8mb3": "utf-8",
    "utf8mb4": "utf-8",
    "latin1": "cp1252",  # MySQL's latin1 is Windows-1252
    "ascii": "ascii",
    "binary": None,
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "latin2": "iso8859-2",
    "latin5": "iso8859-9",
    "latin7": "iso8859-13",
    "greek": "iso8859-7",
    "hebrew": "iso8859-8",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "koi8r": "koi8-r",
    "koi8u": "koi8-u",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "ujis": "euc_jp",
    "eucjpms": "euc_jp",
    "euckr": "euc_kr",
    "gb2312": "gb2312",
    "gbk": "gbk",
    "gb18030": "gb18030",
    "big5": "big5",
    "tis620": "tis-620",
    "macroman": "mac-roman",
    "dec8": "latin1",
    "swe7": "latin1",
    "hp8": "latin1",
    "armscii8": "latin1",
    "geostd8": "latin1",
    "keybcs2": "latin1",
    "macce": "mac-latin2",
    "cp1258": "cp1258",
}

# MariaDB 11 UCA-14.0 collations are numbered by character set in blocks of 256.
_MARIADB_UCA1400_BLOCKS = {
    8: "utf-8", 9: "utf-8", 10: "utf-16-be", 11: "utf-16-be", 12: "utf-32-be",
}


class UnknownCollationError(LookupError):
    """A collation id that neither MySQL's nor MariaDB's tables know."""


@lru_cache(maxsize=512)
def codec_for_collation(collation_id: int) -> str | None:
    """The Python codec for a collation id; ``None`` for the binary collation."""
    if collation_id == BINARY_COLLATION:
        return None
    if collation_id >= 2048:
        codec = _MARIADB_UCA1400_BLOCKS.get(collation_id >> 8)
        if codec:
            return codec
    try:
        name = charset_by_id(collation_id).name
    except KeyError:
        raise UnknownCollationError(f"unknown collation id {collation_id}") from None
    if name not in _CODECS:
        raise UnknownCollationError(f"no Python codec for character set {name!r}")
    return _CODECS[name]
