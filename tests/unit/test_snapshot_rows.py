"""Snapshot rows from the server's text: the compiled module and the Python generated per
table give the same bytes, and both are what a record writes for the decoder's values."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.encoding.records import JSON_OPTIONS, json_default
from changestream.encoding.temporal_text import column_formats, formatted
from changestream.snapshot import result_set, row_readers
from changestream.snapshot.values import converter, row_converter
from tests.servers import skip_or_fail

UTF8MB4, BINARY = 45, 63
compiled = row_readers.native()


def needs_compiled() -> None:
    if compiled is None:
        skip_or_fail("the compiled module is not built (scripts/install.sh builds it)")

COLUMNS = [
    Column(0, ft.LONG, name="id", nullable=False),
    Column(1, ft.LONGLONG, name="big", unsigned=True),
    Column(2, ft.NEWDECIMAL, name="amount", precision=12, scale=2),
    Column(3, ft.DATETIME2, name="at", fsp=6),
    Column(4, ft.DATETIME2, name="at0", fsp=0),
    Column(5, ft.TIMESTAMP2, name="ts", fsp=3),
    Column(6, ft.DATE, name="day"),
    Column(7, ft.TIME2, name="tm", fsp=2),
    Column(8, ft.YEAR, name="y"),
    Column(9, ft.VARCHAR, name="text", collation=UTF8MB4, max_length=400),
    Column(10, ft.VARCHAR, name="bin", collation=BINARY, max_length=40),
    Column(11, ft.DOUBLE, name="d"),
    Column(12, ft.JSON, name="doc"),
    Column(13, ft.SET, name="tags", set_values=("x", "y", "z"), collation=UTF8MB4),
    Column(14, ft.BIT, name="flags", bits=10),
    Column(15, ft.VARCHAR, name="secret", collation=UTF8MB4, max_length=10),
    Column(16, ft.VARCHAR, name="code", collation=UTF8MB4, max_length=10, nullable=False),
]
SCHEMA = TableSchema("shop", "t\"q", tuple(COLUMNS), primary_key=(0, 16))

# Values as a server prints them, with those where its text and a record's JSON differ.
VALUES: dict[str, list[bytes]] = {
    "big": [b"0", b"18446744073709551615", b"00042", b"7"],
    "amount": [b"1.50", b"-0.50", b"0.00", b"0001.50", b"0", b"-12345.67", b"0.5"],
    "at": [b"2024-02-29 23:59:59.123456", b"0000-00-00 00:00:00.000000",
           b"2024-02-30 00:00:00.000000", b"0999-01-01 00:00:00.000001"],
    "at0": [b"2024-01-01 00:00:00", b"0000-00-00 00:00:00"],
    "ts": [b"2038-01-19 03:14:07.999", b"1970-01-01 00:00:01.000"],
    "day": [b"2024-01-01", b"0000-00-00", b"2024-00-01", b"1000-01-01"],
    "tm": [b"838:59:59.00", b"-00:00:01.50", b"00:00:00.00", b"-838:59:59.00"],
    "y": [b"0000", b"1901", b"2155"],
    "text": ["".join(map(chr, range(32))).encode() + b'"\\/\x7f', "héllo ✓ 𝄞".encode(),
             b"", b"x" * 300, b"y" * 70_000, b"plain"],
    "bin": [b"\x00\xff", b"", b"abc"],
    "d": [b"1.5", b"-3.5e20", b"0", b"1e-300"],
    "doc": [b'{"a": [1, 2, {"b": null}]}', b"null", b"[]", b'"s"'],
    "tags": [b"", b"x,z", b"y"],
    "flags": [b"\x02\xaa", b"\x00\x00"],
    "secret": [b"s1", b"pw"],
    "code": [b"A", b"b\xc3\xa9"],
}


def text_row(values: list[bytes | None]) -> bytes:
    """A text-protocol row (length-encoded values, 0xFB for NULL)."""
    out = bytearray()
    for v in values:
        if v is None:
            out.append(0xFB)
        elif len(v) < 251:
            out += bytes([len(v)]) + v
        elif len(v) < 1 << 16:
            out += b"\xfc" + len(v).to_bytes(2, "little") + v
        elif len(v) < 1 << 24:
            out += b"\xfd" + len(v).to_bytes(3, "little") + v
        else:
            out += b"\xfe" + len(v).to_bytes(8, "little") + v
    return bytes(out)


def rows(count: int, seed: int = 7) -> list[list[bytes | None]]:
    rng = random.Random(seed)
    made = []
    for i in range(count):
        row: list[bytes | None] = [str(i + 1).encode()]
        for c in COLUMNS[1:]:
            nullable = c.nullable and rng.random() < 0.15
            row.append(None if nullable else rng.choice(VALUES[c.name or ""]))
        made.append(row)
    return made


def expected(row: list[bytes | None], excluded: frozenset[str]) -> tuple[bytes, bytes]:
    """A record's ``after`` and ``primary_key`` for the decoder's values of ``row``."""
    values = row_converter(SCHEMA, excluded)(row)
    formats = column_formats(SCHEMA)
    after = formatted(values, formats)
    pk = {n: after[n] for n in ("id", "code") if n not in excluded}

    def dumps(value: Any) -> bytes:
        return orjson.dumps(value, default=json_default,
                            option=JSON_OPTIONS & ~orjson.OPT_APPEND_NEWLINE)

    return dumps(after), dumps(pk) if pk else b"null"


@pytest.mark.parametrize("excluded", [frozenset(), frozenset({"secret", "code"})])
@pytest.mark.parametrize("path", ["python", "compiled"])
def test_a_row_is_written_as_a_record_writes_the_decoders_values(
        path: str, excluded: frozenset[str]) -> None:
    if path == "compiled":
        needs_compiled()
    read = row_readers.encoded_reader(SCHEMA, ("id", "code"), excluded,
                                      compiled=path == "compiled")
    for row in rows(400):
        buf = b"\x00\x01" + text_row(row)
        key, (after, pk) = read(buf, 2)
        assert (after, pk) == expected(row, excluded), row
        assert key == (int(row[0] or 0), converter(COLUMNS[16])(row[16]))


def test_keys_of_every_kind_are_the_values_the_python_reader_gives() -> None:
    """The compiled reader reads integer keys in C when they fit: the same values (and
    types) as ``int`` of the text, NULL as None, the others through their converter."""
    needs_compiled()
    key = ("big", "id", "text", "y", "amount")
    python = row_readers.encoded_reader(SCHEMA, key, compiled=False)
    fast = row_readers.encoded_reader(SCHEMA, key, compiled=True)
    edges = [b"0", b"-0", b"7", b"-7", b"999999999999999999", b"-999999999999999999",
             b"1000000000000000000", b"-1000000000000000000", b"18446744073709551615",
             b"-9223372036854775808", b"00042", b"-00042"]
    made = rows(200, seed=11)
    for n, edge in enumerate(edges):
        made[n][0], made[n][1] = edge, edges[-1 - n]
    for row in made:
        buf = text_row(row)
        got, want = fast(buf, 0), python(buf, 0)
        assert got == want, row
        assert [type(v) for v in got[0]] == [type(v) for v in want[0]], row


@pytest.mark.parametrize("key", [("id",), ("text",)], ids=["in a value", "in the key"])
@pytest.mark.parametrize("path", ["python", "compiled"])
def test_text_that_is_not_utf8_is_refused_as_decoding_refuses_it(
        path: str, key: tuple[str, ...]) -> None:
    if path == "compiled":
        needs_compiled()
    read = row_readers.encoded_reader(SCHEMA, key, compiled=path == "compiled")
    row = rows(1)[0]
    for bad in (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe0\x80\x80", b"\xf4\x90\x80\x80"):
        row[9] = b"ok " + bad
        with pytest.raises(UnicodeDecodeError):
            read(text_row(row), 0)


def test_a_row_cut_short_is_an_error_not_a_read_past_its_buffer() -> None:
    needs_compiled()
    read = row_readers.encoded_reader(SCHEMA, ("id",), compiled=True)
    whole = text_row(rows(1)[0])
    for cut in (1, 5, len(whole) - 1):
        with pytest.raises(ValueError, match="row ends"):
            read(whole[:cut], 0)


def test_compiled_and_python_scans_and_chunk_records_agree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    needs_compiled()
    from changestream.model.changes import TransactionInfo
    from changestream.snapshot.encodings import chunk_records

    packets = b"".join(len(r).to_bytes(3, "little") + bytes([n % 256]) + r
                       for n, r in enumerate(text_row(row) for row in rows(50)))
    eof = b"\x05\x00\x00\x07\xfe\x00\x00\x02\x00"
    read = row_readers.values_reader(len(COLUMNS))
    for buf in (packets + eof, packets + eof[:6], packets[:-3]):
        got_python: list[Any] = []
        got_compiled: list[Any] = []
        python = result_set.scan_rows(buf, 0, read, got_python)
        assert compiled.scan_rows(buf, 0, read, got_compiled) == python
        assert got_python == got_compiled
    assert len(got_python) == 49  # the last row's packet is cut
    read_encoded = row_readers.encoded_reader(SCHEMA, ("id",))
    keyed = [read_encoded(text_row(r), 0) for r in rows(30)]
    encoded = [row for _, row in keyed]
    import datetime as dt
    info = TransactionInfo("snapshot-x-1", None, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
                           30, 0, "mariadb-bin.000001", 4, 4)
    with_compiled = chunk_records("shop", "t\"q", encoded, info)
    keyed_compiled = chunk_records("shop", "t\"q", keyed, info, keyed=True)
    monkeypatch.setenv("CHANGESTREAM_PURE_PYTHON", "1")
    with_python = chunk_records("shop", "t\"q", encoded, info)
    keyed_python = chunk_records("shop", "t\"q", keyed, info, keyed=True)

    def without_ts(lines: bytes) -> list[bytes]:
        return [line.rsplit(b',"ts":', 1)[0] for line in lines.splitlines()]

    assert without_ts(with_compiled) == without_ts(with_python)
    # The (key, row) pairs a chunk holds, given as they are, make the same records.
    assert without_ts(keyed_compiled) == without_ts(keyed_python) == without_ts(with_python)
    assert chunk_records("shop", "t", [], info) == b""
    records = [orjson.loads(line) for line in with_compiled.splitlines()]
    assert [r["transaction"]["seq"] for r in records] == list(range(30))
    assert [r["transaction"]["last"] for r in records] == [False] * 29 + [True]
    # A table read whole comes in pieces of one transaction: numbered on from ``first``,
    # of its whole size, and the last record of the last piece ends it.
    whole = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    info = TransactionInfo("snapshot-x-2", None, None, whole, 75, 0, "mariadb-bin.000001", 4, 4)
    pieces = [(0, keyed[:30]), (30, keyed[:30]), (60, keyed[:15])]
    monkeypatch.delenv("CHANGESTREAM_PURE_PYTHON")
    compiled_pieces = b"".join(chunk_records("shop", "t", rows, info, keyed=True, first=first)
                               for first, rows in pieces)
    monkeypatch.setenv("CHANGESTREAM_PURE_PYTHON", "1")
    python_pieces = b"".join(chunk_records("shop", "t", rows, info, keyed=True, first=first)
                             for first, rows in pieces)
    assert without_ts(compiled_pieces) == without_ts(python_pieces)
    records = [orjson.loads(line)["transaction"] for line in compiled_pieces.splitlines()]
    assert [r["seq"] for r in records] == list(range(75))
    assert {r["size"] for r in records} == {75}
    assert [r["last"] for r in records] == [False] * 74 + [True]


def packets_of(made: list[list[bytes | None]]) -> bytes:
    """``made``'s rows as the packets of a result (sequence numbers from 0)."""
    return b"".join(len(r).to_bytes(3, "little") + bytes([n % 256]) + r
                    for n, r in enumerate(text_row(row) for row in made))


# A table whose columns are all written in C: its rows are read without the interpreter
# lock until one needs it (leading zeros, text that is not UTF-8).
FAST = TableSchema("shop", "fast", tuple(
    Column(i, t, name=n, nullable=n != "id", **extra) for i, (n, t, extra) in enumerate([
        ("id", ft.LONG, {}), ("region", ft.VARCHAR, {"collation": UTF8MB4, "max_length": 8}),
        ("amount", ft.NEWDECIMAL, {"precision": 12, "scale": 2}),
        ("at", ft.DATETIME2, {"fsp": 6}), ("ts", ft.TIMESTAMP2, {"fsp": 0}),
        ("day", ft.DATE, {}), ("text", ft.VARCHAR, {"collation": UTF8MB4, "max_length": 400}),
        ("big", ft.LONGLONG, {"unsigned": True})])), primary_key=(1, 0))


def fast_rows(count: int, seed: int = 3) -> list[list[bytes | None]]:
    rng = random.Random(seed)
    made: list[list[bytes | None]] = []
    for i in range(count):
        made.append([str(i + 1).encode(), rng.choice([b"eu", b"us", "ü".encode(), b""]),
                     rng.choice([b"1.50", b"-0.50", None]),
                     b"2024-02-29 23:59:59.123456", b"2038-01-19 03:14:07",
                     rng.choice([b"2024-01-01", None]),
                     rng.choice([*VALUES["text"][:4], None]),
                     rng.choice([b"0", b"18446744073709551615", b"7"])])
    return made


@pytest.mark.parametrize("schema, made", [(FAST, "fast"), (SCHEMA, "every kind")],
                         ids=["written in C", "with Python writers"])
def test_a_block_reads_the_rows_the_calls_read(schema: TableSchema, made: str) -> None:
    """A result read into a block holds each row as the encoder's call reads it, keys
    included (made when asked for), and its records are the same bytes."""
    needs_compiled()
    from changestream.snapshot.encodings import JsonLinesChunks
    key = ("region", "id") if schema is FAST else ("id", "code")
    made_rows = fast_rows(3000) if schema is FAST else rows(600)
    if schema is FAST:  # rows the C path hands to the writers, amid others
        for n in (5, 6, 1200, 2999):
            made_rows[n][7] = b"00042"  # leading zeros: ZEROFILL's
        made_rows[40][2] = b"0001.50"
    read = JsonLinesChunks().row_reader(schema, key, frozenset())
    assert read is not None
    python = row_readers.encoded_reader(schema, key, compiled=False)
    buf = packets_of(made_rows) + b"\x05\x00\x00\x07\xfe\x00\x00\x02\x00"
    block = read.rows()
    at, stopped, last = block.scan(buf, 0)
    assert stopped == 1 and at == len(buf) - 9  # the end of the rows
    want = [python(text_row(row), 0) for row in made_rows]
    assert len(block) == len(made_rows)
    assert list(block) == want
    assert block.keys() == [k for k, _ in want]
    assert last == len(buf) - 9 - len(text_row(made_rows[-1]))
    import datetime as dt

    from changestream.model.changes import TransactionInfo
    from changestream.snapshot.encodings import chunk_records
    info = TransactionInfo("snapshot-x-1", None, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
                           len(want), 0, "mariadb-bin.000001", 4, 4)
    of_block = chunk_records("shop", "t", block, info, keyed=True)
    of_list = chunk_records("shop", "t", want, info, keyed=True)
    assert [line.rsplit(b',"ts":', 1)[0] for line in of_block.splitlines()] == \
        [line.rsplit(b',"ts":', 1)[0] for line in of_list.splitlines()]


def test_a_block_leaves_out_the_rows_of_keys_a_window_changed() -> None:
    needs_compiled()
    from changestream.snapshot.window import ChangedKeys
    read = row_readers.encoded_reader(FAST, ("region", "id"))
    made = fast_rows(500)
    block = read.rows()
    block.scan(packets_of(made), 0)
    every = list(block)
    window = ChangedKeys(("region", "id"))
    for pair in every[::7]:
        window.note(None, {"region": pair[0][0], "id": pair[0][1]})
    window.note({"region": "nowhere", "id": 1}, None)
    kept = window.kept(block)
    assert type(kept) is type(block)
    assert list(kept) == [pair for n, pair in enumerate(every) if n % 7]
    assert list(window.kept(every)) == list(kept)  # a list's rows the same
    assert len(block) == 500  # the block itself is left as it was


def test_a_block_grows_for_long_rows_and_reads_a_payload_given_whole() -> None:
    """Rows far longer than a block's first room (70,000 bytes of text escaped six times
    over), read by a scan and one by one (a row of 16 MiB or more comes joined)."""
    needs_compiled()
    read = row_readers.encoded_reader(FAST, ("id",))
    python = row_readers.encoded_reader(FAST, ("id",), compiled=False)
    made = fast_rows(40)
    for n, row in enumerate(made):
        row[6] = (b"\x01\"" * (n * 1000)) if n % 2 else b"y" * 70_000
    block = read.rows()
    buf = packets_of(made)
    assert block.scan(buf[:-5], 0)[1] == 0  # the last packet is not whole
    assert len(block) == 39
    block.add(text_row(made[-1]), 0)
    assert list(block) == [python(text_row(row), 0) for row in made]


@pytest.mark.parametrize("where", ["in a value", "in the key"])
def test_a_block_refuses_text_that_is_not_utf8_and_rows_cut_short(where: str) -> None:
    needs_compiled()
    read = row_readers.encoded_reader(FAST, ("region", "id"))
    made = fast_rows(300)
    made[150][6 if where == "in a value" else 1] = b"ok \xed\xa0\x80"
    with pytest.raises(UnicodeDecodeError):
        read.rows().scan(packets_of(made), 0)
    whole = text_row(fast_rows(1)[0])
    cut = len(whole) - 3
    packet = cut.to_bytes(3, "little") + b"\x00" + whole[:cut]
    with pytest.raises(ValueError, match="row ends"):
        read.rows().scan(packet, 0)
