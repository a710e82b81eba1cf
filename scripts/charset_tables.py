"""Generate the collation and character-set tables of ``changestream.decoding`` from servers.

    .venv/bin/python scripts/charset_tables.py                  # the test suite's private servers
    .venv/bin/python scripts/charset_tables.py URL [URL ...]   # e.g. mariadb://root@127.0.0.1:3307

Writes ``changestream/decoding/data/collations.json`` (every collation id with its character
set and name) and ``changestream/decoding/data/charsets.json`` (how each character set
decodes), which ``changestream.decoding.collation_ids`` and ``.charset_tables`` read.
Every server is asked:

- for its collations: information_schema.COLLATIONS, or on MariaDB 10.10+
  COLLATION_CHARACTER_SET_APPLICABILITY (the UCA-14.0 collations' ids are only there);
- for each single-byte character set, what every byte 0..255 is in utf8mb4;
- for each other non-Unicode character set, what every 1- and 2-byte sequence, every 3-byte
  sequence after 0x8F (EUC-JP's JIS X 0212) and, for gb18030, the 4-byte sequences of the
  BMP is in utf8mb4;
- for the Unicode character sets, every BMP character and a sample above it, encoded.

The servers must agree (an id with two character sets, or two servers converting a byte
differently, stops the script: the decoder would then need to know the server's flavour).
A character set decodes with Python's own codec where that gives exactly the server's text
for every byte or sequence; a single-byte one otherwise with a table from the server; a
multibyte one with the closest Python codec plus what the server has beyond or unlike it,
which the script checks sequence by sequence before writing. Bytes the server cannot
convert (it shows '?' or U+FFFD) are left undefined, so a value holding one keeps its raw
bytes (a multibyte Python codec may know a character for some of them: it is kept).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from changestream.sources.source_url import parse_source_url  # noqa: E402

OUT_COLLATIONS = ROOT / "changestream/decoding/data/collations.json"
OUT_TABLES = ROOT / "changestream/decoding/data/charsets.json"
PROBE_DB = "changestream_charset_probe"
UNDEFINED = "\ufffe"  # what codecs.charmap_decode takes for "no character"

UNICODE_CODECS = {"utf8": "utf-8", "utf8mb3": "utf-8", "utf8mb4": "utf-8", "ucs2": "utf-16-be",
                  "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be"}
SINGLE_BYTE_CANDIDATES = {
    "ascii": ["ascii"], "latin1": ["cp1252", "latin-1"], "latin2": ["iso8859-2"],
    "latin5": ["iso8859-9"], "latin7": ["iso8859-13"], "greek": ["iso8859-7"],
    "hebrew": ["iso8859-8"], "cp1250": ["cp1250"], "cp1251": ["cp1251"], "cp1256": ["cp1256"],
    "cp1257": ["cp1257"], "cp850": ["cp850"], "cp852": ["cp852"], "cp866": ["cp866"],
    "koi8r": ["koi8-r"], "koi8u": ["koi8-u"], "macroman": ["mac-roman"],
    "macce": ["mac-latin2"], "tis620": ["tis-620", "cp874"], "hp8": ["hp-roman8"],
}
MULTIBYTE_CANDIDATES = {
    "sjis": ["shift_jis", "cp932", "shift_jisx0213"], "cp932": ["cp932", "shift_jis"],
    "ujis": ["euc_jp", "euc_jis_2004", "euc_jisx0213"],
    "eucjpms": ["euc_jp", "euc_jis_2004", "euc_jisx0213"], "euckr": ["euc_kr", "cp949"],
    "gb2312": ["gb2312", "gbk"], "gbk": ["gbk", "gb18030"], "gb18030": ["gb18030"],
    "big5": ["big5", "cp950", "big5hkscs"],
}


class Disagreement(RuntimeError):
    """The servers, or a server and every Python codec, do not agree."""


def connect(url: str) -> pymysql.Connection[Any]:
    spec = parse_source_url(url)
    return pymysql.connect(**spec.connection, charset="utf8mb4", autocommit=True)


@contextlib.contextmanager
def private_servers() -> Iterator[list[str]]:
    """The test suite's private servers (MariaDB 10.11, MySQL 9.x, and MariaDB 11.8 where
    its root is built), as URLs."""
    from changestream.devserver import EmbeddedMariaDB, ServerNotAvailableError
    from tests import servers

    with contextlib.ExitStack() as stack:
        kinds: list[Any] = [EmbeddedMariaDB, servers.PrivateMySQL,
                            getattr(servers, "PrivateMariaDB11", None)]
        urls = []
        for kind in filter(None, kinds):
            try:
                server = stack.enter_context(kind())
            except ServerNotAvailableError as error:
                print(f"skipped: {error}")
                continue
            urls.append(server.start().url)
        yield urls


class Server:
    """One server's answers."""

    def __init__(self, url: str) -> None:
        self.connection = connect(url)
        self.cursor = self.connection.cursor()
        self.version = self.query("SELECT VERSION()")[0][0]
        self.flavor = "MariaDB" if "mariadb" in self.version.lower() else "MySQL"
        self.label = f"{self.flavor} {self.version.split('-')[0]}"
        self.query("SET SESSION sql_log_bin = 0")
        self.charsets = {name: maxlen for name, maxlen in self.query(
            "SELECT CHARACTER_SET_NAME, MAXLEN FROM information_schema.CHARACTER_SETS")}

    def query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        self.cursor.execute(sql, args)
        return list(self.cursor.fetchall())

    def collations(self) -> list[tuple[int, str, str]]:
        """``(id, name, charset)`` of every collation."""
        columns = {row[0] for row in self.query(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
            "'information_schema' AND TABLE_NAME = 'COLLATION_CHARACTER_SET_APPLICABILITY'")}
        if "ID" in columns:
            sql = ("SELECT ID, FULL_COLLATION_NAME, CHARACTER_SET_NAME FROM "
                   "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID IS NOT NULL")
        else:
            sql = ("SELECT ID, COLLATION_NAME, CHARACTER_SET_NAME FROM "
                   "information_schema.COLLATIONS WHERE ID IS NOT NULL")
        return [(int(i), name, charset) for i, name, charset in self.query(sql)]

    def bytes_to_text(self, charset: str) -> list[str | None]:
        """What each byte 0..255 is in utf8mb4 (``None``: not a character here)."""
        columns = ", ".join(f"HEX(CONVERT(CONVERT(X'{b:02X}' USING {charset}) USING utf8mb4))"
                            for b in range(256))
        row = self.query(f"SELECT {columns}")[0]
        return [_character(bytes([b]), h) for b, h in enumerate(row)]

    def sequences_to_text(self, charset: str, sequences: list[bytes]) -> list[str | None]:
        """What each byte sequence is in utf8mb4 (``None``: not a character here)."""
        self.query(f"CREATE DATABASE IF NOT EXISTS {PROBE_DB}")
        self.query(f"DROP TABLE IF EXISTS {PROBE_DB}.seqs")
        self.query(f"CREATE TABLE {PROBE_DB}.seqs (id INT PRIMARY KEY, b VARBINARY(4))")
        for start in range(0, len(sequences), 5000):
            self.cursor.executemany(f"INSERT INTO {PROBE_DB}.seqs VALUES (%s, %s)", [
                (start + i, s) for i, s in enumerate(sequences[start:start + 5000])])
        rows = self.query(f"SELECT id, HEX(CONVERT(CONVERT(b USING {charset}) USING utf8mb4)) "
                          f"FROM {PROBE_DB}.seqs ORDER BY id")
        return [_character(sequences[i], h) for i, h in rows]

    def encodes_as(self, charset: str, text: str) -> bytes:
        return bytes.fromhex(self.query(
            f"SELECT HEX(CONVERT(%s USING {charset}))", (text,))[0][0])

    def close(self) -> None:
        self.query(f"DROP DATABASE IF EXISTS {PROBE_DB}")
        self.connection.close()


def _character(seq: bytes, hex_text: str | None) -> str | None:
    if hex_text is None:  # MySQL: not valid in the character set
        return None
    text = bytes.fromhex(hex_text).decode()
    if not text or "\ufffd" in text or ("?" in text and seq != b"?"):
        return None  # no such character, or none in Unicode
    return text


def agree(what: str, answers: dict[str, Any]) -> Any:
    values = list(answers.values())
    if any(v != values[0] for v in values[1:]):
        raise Disagreement(f"{what}: the servers differ ({', '.join(answers)})")
    return values[0]


def python_text(seq: bytes, codec: str) -> str | None:
    try:
        return seq.decode(codec)
    except UnicodeDecodeError:
        return None


def collation_table(servers: list[Server]) -> dict[int, tuple[str, str]]:
    table: dict[int, tuple[str, list[str]]] = {}
    for server in servers:
        for i, name, charset in server.collations():
            known = table.setdefault(i, (charset, []))
            if known[0] != charset:
                raise Disagreement(f"collation id {i} is {known[0]} on one server and "
                                   f"{charset} ({name}) on {server.label}")
            if name not in known[1]:
                known[1].append(name)
    return {i: (charset, "/".join(names)) for i, (charset, names) in sorted(table.items())}


def single_byte_table(servers: list[Server], charset: str) -> tuple[str, str | None]:
    """``(python codec, "")`` if one is exact, else ``("", 256-character decoding table)``."""
    server = agree(charset, {s.label: s.bytes_to_text(charset) for s in servers
                             if charset in s.charsets})
    for codec in SINGLE_BYTE_CANDIDATES.get(charset, []):
        if all(python_text(bytes([b]), codec) == server[b] for b in range(256)):
            return codec, None
    return "", "".join(UNDEFINED if c is None else c for c in server)


def multibyte_sequences(charset: str) -> list[bytes]:
    seqs = [bytes([b]) for b in range(256)]
    trails = [t for t in range(0x21, 0x100) if t != 0x3F]  # '?' is what failures look like
    seqs += [bytes([a, b]) for a in range(0x80, 0x100) for b in trails]
    seqs += [bytes([0x8F, a, b]) for a in range(0xA1, 0xFF) for b in range(0xA1, 0xFF)]
    if charset == "gb18030":
        seqs += [bytes([a, b, c, d]) for a in (0x81, 0x82, 0x83, 0x84, 0x90, 0xE3)
                 for b in range(0x30, 0x3A) for c in range(0x81, 0xFF) for d in range(0x30, 0x3A)]
    return seqs


Overlay = tuple[str, dict[bytes, str], dict[str, str], dict[bytes, str]]


def overlay(codec: str, seqs: list[bytes], server: list[str | None]) -> Overlay:
    """``codec`` and what puts it right: the server's sequences it lacks (extras), characters
    it decodes unlike the server wherever they come from (translate), and sequences it
    decodes unlike the server that a translation cannot fix (overrides)."""
    python = [python_text(s, codec) for s in seqs]
    extras: dict[bytes, str] = {}
    wrong: dict[bytes, tuple[str, str]] = {}
    for seq, mine, theirs in zip(seqs, python, server):
        if theirs is None or mine == theirs:
            continue
        if mine is None:
            extras[seq] = theirs
        else:
            wrong[seq] = (mine, theirs)
    # A character may be translated only if every sequence Python decodes to it is one the
    # server decodes to the same translation (or rejects).
    wanted: dict[str, set[str]] = {}
    for mine, theirs in zip(python, server):
        if mine is not None and theirs is not None and len(mine) == 1:
            wanted.setdefault(mine, set()).add(theirs)
    translate = {mine: theirs for mine, theirs in wrong.values()
                 if len(mine) == 1 and len(theirs) == 1 and wanted[mine] == {theirs}}
    overrides = {seq: theirs for seq, (mine, theirs) in wrong.items() if mine not in translate}
    return codec, extras, translate, overrides


def multibyte_table(servers: list[Server], charset: str
                    ) -> tuple[Overlay, list[bytes], list[str | None]]:
    """The smallest overlay of the candidate codecs, with the sequences and the servers'
    text for them (to check the decoder against)."""
    seqs = multibyte_sequences(charset)
    server = agree(charset, {s.label: s.sequences_to_text(charset, seqs) for s in servers
                             if charset in s.charsets})
    found = [overlay(codec, seqs, server) for codec in MULTIBYTE_CANDIDATES[charset]]
    return min(found, key=lambda o: len(o[1]) + len(o[2]) + 2 * len(o[3])), seqs, server


def check_unicode(servers: list[Server], charset: str) -> None:
    text = "".join(chr(c) for c in range(0x20, 0x10000) if not 0xD800 <= c < 0xE000)
    if charset not in ("utf8", "utf8mb3", "ucs2"):
        text += "".join(chr(c) for c in range(0x10000, 0x110000, 997))
    for server in servers:
        if charset in server.charsets and server.encodes_as(charset, text) != text.encode(
                UNICODE_CODECS[charset]):
            raise Disagreement(f"{charset}: {server.label} encodes unlike Python's "
                               f"{UNICODE_CODECS[charset]}")


def write_collations(table: dict[int, tuple[str, str]], labels: list[str]) -> None:
    """The collation ids as data (read by changestream.decoding.collation_ids)."""
    _write_json(OUT_COLLATIONS, {
        "generated_from": labels,
        "collations": {str(i): [charset, name] for i, (charset, name) in table.items()},
    })


def write_tables(python: dict[str, str], tables: dict[str, str],
                 multibyte: dict[str, Overlay], labels: list[str]) -> None:
    """How each character set decodes, as data (read by
    changestream.decoding.charset_tables)."""
    def hex_keys(part: dict[Any, str]) -> dict[str, str]:
        return {k.hex() if isinstance(k, bytes) else k: v for k, v in part.items()}

    _write_json(OUT_TABLES, {
        "generated_from": labels,
        "python_codecs": dict(sorted(python.items())),
        "decoding_tables": dict(sorted(tables.items())),
        "multibyte": {cs: [codec, hex_keys(extras), hex_keys(translate), hex_keys(overrides)]
                      for cs, (codec, extras, translate, overrides)
                      in sorted(multibyte.items())},
    })


def _write_json(path: Path, data: dict[str, Any]) -> None:
    # ASCII only, one entry per line: reviewable diffs when the servers change.
    path.write_text(json.dumps(data, indent=1, ensure_ascii=True) + "\n")


def check_decoder(tables: dict[str, str], multibyte: dict[str, tuple[Overlay, list[bytes],
                  list[str | None]]]) -> list[str]:
    """Decode every byte and sequence asked about with the freshly written tables, as the
    router will; returns what differs from the servers, and prints what only Python takes."""
    assert "changestream.decoding.charsets" not in sys.modules, "would check stale tables"
    from changestream.decoding.charsets import codec_for_charset

    problems: list[str] = []
    for cs, table in tables.items():
        codec = codec_for_charset(cs)
        for b in range(256):
            expected = None if table[b] == UNDEFINED else table[b]
            if python_text(bytes([b]), codec) != expected:
                problems.append(f"{cs} {b:02x}")
    for cs, (_, seqs, server) in multibyte.items():
        codec = codec_for_charset(cs)
        lenient = 0
        for seq, theirs in zip(seqs, server):
            mine = python_text(seq, codec)
            if theirs is None:
                lenient += mine is not None
            elif mine != theirs or python_text(b"a" + seq + b"b", codec) != f"a{theirs}b":
                problems.append(f"{cs} {seq.hex()}: {mine!r} != {theirs!r}")
        print(f"{cs}: {lenient} sequences the server has no character for decode in Python")
    return problems


def generate(urls: list[str]) -> None:
    servers = [Server(url) for url in urls]
    try:
        labels = sorted({s.label for s in servers})
        collations = collation_table(servers)
        charsets = sorted({cs for s in servers for cs in s.charsets} - {"binary"})
        python: dict[str, str] = {}
        tables: dict[str, str] = {}
        multibyte: dict[str, tuple[Overlay, list[bytes], list[str | None]]] = {}
        for cs in charsets:
            maxlen = max(s.charsets.get(cs, 0) for s in servers)
            if cs in UNICODE_CODECS:
                check_unicode(servers, cs)
                python[cs] = UNICODE_CODECS[cs]
            elif maxlen == 1:
                codec, table = single_byte_table(servers, cs)
                if table is None:
                    python[cs] = codec
                else:
                    tables[cs] = table
            else:
                multibyte[cs] = multibyte_table(servers, cs)
                codec, extras, translate, overrides = multibyte[cs][0]
                print(f"{cs}: {codec} + {len(extras)} sequences, {len(translate)} characters "
                      f"translated, {len(overrides)} sequences overridden")
                continue
            print(f"{cs}: {python.get(cs) or 'table from the server'}")
        missing = {cs for cs, _ in collations.values()} - set(python) - set(tables) - set(
            multibyte) - {"binary"}
        if missing:
            raise Disagreement(f"character sets without a decoding: {sorted(missing)}")
        write_collations(collations, labels)
        write_tables(python, tables, {cs: m[0] for cs, m in multibyte.items()}, labels)
        print(f"{len(collations)} collations, {len(charsets)} character sets from {labels}")
        problems = check_decoder(tables, multibyte)
        if problems:
            raise Disagreement(f"the written tables decode {len(problems)} sequences unlike "
                               f"the servers: {problems[:20]}")
    finally:
        for server in servers:
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", nargs="*", help="mysql:// or mariadb:// URLs (default: the "
                        "test suite's private MariaDB and MySQL)")
    urls = parser.parse_args().urls
    if urls:
        generate(urls)
    else:
        with private_servers() as private:
            generate(private)


if __name__ == "__main__":
    main()
