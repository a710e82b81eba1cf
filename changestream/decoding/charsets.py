"""From MySQL/MariaDB collation ids to Python codecs.

Collation ids (:mod:`collation_ids`) and how each character set decodes
(:mod:`charset_tables`) are generated from the servers by ``scripts/charset_tables.py``; no
id means different character sets on the two, so the decoder needs no flavour. A character
set Python decodes exactly uses Python's codec; the others are registered here as codecs
``changestream_<charset>`` (a charmap of the server's table, or the closest Python codec
plus where the server differs). A byte the server cannot convert is left undefined (a
decode error), so the caller can keep the value's raw bytes."""

from __future__ import annotations

import codecs
from functools import lru_cache
from typing import Any, cast

from changestream.decoding.charset_tables import DECODING_TABLES, MULTIBYTE, PYTHON_CODECS
from changestream.decoding.collation_ids import COLLATIONS

__all__ = ["BINARY_COLLATION", "UnknownCollationError", "charset_of_collation",
           "codec_for_charset", "codec_for_collation"]

BINARY_COLLATION = 63
CODEC_PREFIX = "changestream_"

# MariaDB numbers its UCA-14.0 collations by character set in blocks of 256 from id 2048:
# an id a later MariaDB adds to a block still names its character set.
_MARIADB_UCA1400_BLOCKS = {8: "utf8mb3", 9: "utf8mb4", 10: "ucs2", 11: "utf16", 12: "utf32"}


class UnknownCollationError(LookupError):
    """A collation id that neither MySQL's nor MariaDB's tables know."""


def charset_of_collation(collation_id: int) -> str:
    """The character set of a collation id, e.g. ``'utf16'`` for 54."""
    known = COLLATIONS.get(collation_id)
    if known is not None:
        return known[0]
    charset = _MARIADB_UCA1400_BLOCKS.get(collation_id >> 8) if collation_id >= 2048 else None
    if charset is None:
        raise UnknownCollationError(f"unknown collation id {collation_id}")
    return charset


def codec_for_charset(charset: str) -> str | None:
    """The Python codec name for a character set; ``None`` for ``binary``."""
    if charset == "binary":
        return None
    codec = PYTHON_CODECS.get(charset)
    if codec is not None:
        return codec
    if charset in _CODECS:
        return CODEC_PREFIX + charset
    raise UnknownCollationError(f"no decoding for character set {charset!r}")


@lru_cache(maxsize=512)
def codec_for_collation(collation_id: int) -> str | None:
    """The Python codec for a collation id; ``None`` for the binary collation."""
    if collation_id == BINARY_COLLATION:
        return None
    return codec_for_charset(charset_of_collation(collation_id))


def _decodes_only(text: str, errors: str = "strict") -> tuple[bytes, int]:
    raise UnicodeError("changestream's MySQL character set codecs only decode")


def _charmap(charset: str, table: str) -> codecs.CodecInfo:
    encoding_map = codecs.charmap_build(table)

    def decode(data: bytes, errors: str = "strict", _decode: Any = codecs.charmap_decode,
               _table: str = table) -> tuple[str, int]:
        return _decode(data, errors, _table)

    def encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
        return codecs.charmap_encode(text, errors, encoding_map)

    return codecs.CodecInfo(encode, cast(Any, decode), name=CODEC_PREFIX + charset)


class _Overlay:
    """A Python multibyte codec put right: ``extras`` are sequences it rejects (found through
    an error handler), ``translate`` characters it decodes unlike the server wherever they
    come from, ``overrides`` sequences it decodes wrongly that a translation cannot fix
    (decoded sequence by sequence, only when one may be present)."""

    def __init__(self, charset: str, codec: str, extras: dict[str, str],
                 translate: dict[str, str], overrides: dict[str, str]) -> None:
        self.name = CODEC_PREFIX + charset
        self.codec = codec
        self.extras = {bytes.fromhex(seq): text for seq, text in extras.items()}
        self.table = str.maketrans(translate) if translate else None
        self.overrides = {bytes.fromhex(seq): text for seq, text in overrides.items()}
        self.longest = max(map(len, [*self.extras, *self.overrides]), default=1)
        codecs.register_error(self.name, self._extra)

    def _extra(self, error: UnicodeError) -> tuple[str, int]:
        if isinstance(error, UnicodeDecodeError):
            data, start = error.object, error.start
            for n in range(1, self.longest + 1):
                text = self.extras.get(data[start:start + n])
                if text is not None:
                    return text, start + n
        raise error

    def decode(self, data: bytes, errors: str = "strict") -> tuple[str, int]:
        data = bytes(data)
        if not any(seq in data for seq in self.overrides):
            try:
                text = data.decode(self.codec, self.name)
                return (text.translate(self.table) if self.table else text), len(data)
            except UnicodeDecodeError:
                if errors == "strict":
                    raise
        return self._by_sequence(data, errors), len(data)

    def _by_sequence(self, data: bytes, errors: str) -> str:
        # Shortest match: in these encodings no character's bytes begin another's.
        out: list[str] = []
        pos = 0
        while pos < len(data):
            for n in range(1, 5):
                seq = data[pos:pos + n]
                text = self.overrides.get(seq) or self.extras.get(seq)
                if text is None:
                    try:
                        text = seq.decode(self.codec)
                    except UnicodeDecodeError:
                        continue
                    if self.table:
                        text = text.translate(self.table)
                out.append(text)
                pos += n
                break
            else:
                error = UnicodeDecodeError(self.name, data, pos, pos + 1, "invalid sequence")
                replacement, pos = codecs.lookup_error(errors)(error)
                out.append(cast(str, replacement))  # a decoding handler gives text
        return "".join(out)

    def codec_info(self) -> codecs.CodecInfo:
        return codecs.CodecInfo(_decodes_only, cast(Any, self.decode), name=self.name)


_CODECS: dict[str, codecs.CodecInfo] = {
    **{cs: _charmap(cs, table) for cs, table in DECODING_TABLES.items()},
    **{cs: _Overlay(cs, *tables).codec_info() for cs, tables in MULTIBYTE.items()},
}


def _search(name: str) -> codecs.CodecInfo | None:
    if name.startswith(CODEC_PREFIX):
        return _CODECS.get(name[len(CODEC_PREFIX):])
    return None


codecs.register(_search)
