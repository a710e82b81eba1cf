"""Collation ids to codecs: every id of both servers decodes, as the server converts it."""

from __future__ import annotations

import codecs

import pytest

from changestream.decoding.charsets import (
    UnknownCollationError,
    charset_of_collation,
    codec_for_charset,
    codec_for_collation,
)
from changestream.decoding.collation_ids import COLLATIONS

# "ab12" in each character set whose bytes for it are not ASCII's.
_WIDE = {
    "ucs2": b"\0a\0b\x001\x002", "utf16": b"\0a\0b\x001\x002", "utf16le": b"a\0b\x001\x002\0",
    "utf32": b"\0\0\0a\0\0\0b\0\0\x001\0\0\x002",
}

# Bytes and what MySQL 9.7 and MariaDB 10.11 convert them to in utf8mb4
# (SELECT CONVERT(CONVERT(X'..' USING charset) USING utf8mb4)).
SERVER_TEXT = [
    ("hp8", "61C5DE", "a\xe9\xdf"),
    ("geostd8", "6180C0", "a\u20ac\u10d0"),
    ("keybcs2", "619FA0", "a\u0165\xe1"),
    ("swe7", "5B5C5D7B", "\xc4\xd6\xc5\xe4"),
    ("dec8", "C4E9", "\xc4\xe9"),
    ("armscii8", "B2E1", "\u0531\u0578"),
    ("latin1", "80819D", "\u20ac\x81\x9d"),
    ("greek", "A1A2", "\u02bd\u02bc"),
    ("koi8u", "95", "\u2022"),
    ("cp866", "FCFD", "\u207f\xb2"),
    ("hebrew", "AF", "\u203e"),
    ("sjis", "815F", "\\"),
    ("ujis", "F5A1", "\ue000"),
    ("gb18030", "A8BC8135F437", "\u1e3f\ue7c7"),
    ("eucjpms", "8FA2B7A1C1", "\uff5e\uff5e"),
    ("big5", "F9D6", "\u7881"),
    ("euckr", "8141", "\uac02"),
    ("utf16", "D83DDE00", "\U0001f600"),
]


@pytest.mark.parametrize("collation_id", sorted(COLLATIONS))
def test_every_collation_id_has_a_codec_that_decodes(collation_id: int) -> None:
    charset = COLLATIONS[collation_id][0]
    codec = codec_for_collation(collation_id)
    if charset == "binary":
        assert codec is None
        return
    assert codec is not None
    assert _WIDE.get(charset, b"ab12").decode(codec) == "ab12"


def test_the_table_covers_both_servers_ids() -> None:
    assert len(COLLATIONS) >= 1300
    for collation_id, charset in [
        (35, "ucs2"), (54, "utf16"), (56, "utf16le"), (60, "utf32"), (76, "utf8mb3"),
        (248, "gb18030"), (255, "utf8mb4"), (309, "utf8mb4"), (323, "utf8mb4"), (1025, "big5"),
        (1059, "ucs2"), (1270, "utf8mb4"), (2304, "utf8mb4"), (3271, "utf32"),
    ]:
        assert charset_of_collation(collation_id) == charset


@pytest.mark.parametrize(("charset", "raw", "text"), SERVER_TEXT)
def test_bytes_decode_as_the_server_converts_them(charset: str, raw: str, text: str) -> None:
    codec = codec_for_charset(charset)
    assert codec is not None
    assert bytes.fromhex(raw).decode(codec) == text


def test_bytes_the_server_cannot_convert_are_a_decode_error() -> None:
    for charset, raw in [("ascii", b"\x80"), ("cp1256", b"\x8a"), ("swe7", b"\x80"),
                         ("sjis", b"\x81")]:
        codec = codec_for_charset(charset)
        assert codec is not None
        with pytest.raises(UnicodeDecodeError):
            raw.decode(codec)


def test_a_multibyte_overlay_decodes_the_same_in_context() -> None:
    # eucjpms: 8FA2B7 must not decode as Python's '~', while a plain 7E still does.
    codec = codec_for_charset("eucjpms")
    assert codec is not None
    raw = b"~a\x8f\xa2\xb7b\xa1\xc1\xad\xa1~"
    assert raw.decode(codec) == "~a\uff5eb\uff5e\u2460~"
    assert raw.decode(codec, "replace") == raw.decode(codec)
    assert b"a\xff\x8f\xa2\xb7".decode(codec, "replace") == "a\ufffd\uff5e"


def test_registered_codecs_are_found_by_name() -> None:
    for charset in ("latin1", "geostd8", "eucjpms", "big5"):
        name = codec_for_charset(charset)
        assert name == f"changestream_{charset}"
        assert codecs.lookup(name).name == name


def test_unknown_collation_ids_are_named() -> None:
    with pytest.raises(UnknownCollationError, match="unknown collation id 1999"):
        codec_for_collation(1999)
    # A UCA-14.0 id a later MariaDB may add still names its block's character set.
    assert codec_for_collation((9 << 8) + 255) == "utf-8"
