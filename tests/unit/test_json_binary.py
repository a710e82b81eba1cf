"""Tests for changestream.decoding.json_binary (MySQL binary JSON and JSON diffs).

Expectations come from three independent places:

* a real MySQL 8.0.22 binlog (``json.binlog.000001`` from rust_mysql_common) whose JSON
  column values are extracted by a tiny event walker below, checked against the
  server's own ``mysqlbinlog -vv`` decode of the same file;
* byte strings built in this file by a small encoder written from the format
  description in MySQL's json_binary.h (not from the decoder), plus hand-written bytes;
* python-mysql-replication's decoder, compared only on documents it handles correctly
  (no opaque values; its keys/strings come back as bytes and are normalised).
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import FrozenInstanceError
from decimal import Decimal
from typing import Any

import pytest

from changestream.decoding.json_binary import JsonBinaryError, decode_json
from changestream.decoding.json_diff import (
    JsonDiff,
    JsonDiffError,
    apply_json_diffs,
    decode_json_diffs,
)
from changestream.decoding.packed import read_packed_int
from tests.corpus.reference import CORPUS, require_corpus

JSON_BINLOG_NAME = "rust_mysql_common/json.binlog.000001"
JSON_BINLOG_REF_NAME = "reference/rust_mysql_common__json.binlog.000001.txt.gz"
JSON_BINLOG = CORPUS / JSON_BINLOG_NAME
JSON_BINLOG_REF = CORPUS / JSON_BINLOG_REF_NAME


# ---------------------------------------------------------------------------------------
# Independent encoder (from the json_binary.h grammar)
# ---------------------------------------------------------------------------------------


class U16(int):
    """Marks an int to be stored as uint16 (JSON from an unsigned SMALLINT, etc.)."""


class U32(int):
    pass


class U64(int):
    pass


class Opaque:
    def __init__(self, field_type: int, payload: bytes) -> None:
        self.field_type = field_type
        self.payload = payload


def varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def scalar(value: Any) -> tuple[int, bytes]:
    """(type, payload) of a non-container value."""
    if value is None:
        return 0x04, b"\x00"
    if value is True:
        return 0x04, b"\x01"
    if value is False:
        return 0x04, b"\x02"
    if isinstance(value, U16):
        return 0x06, struct.pack("<H", value)
    if isinstance(value, U32):
        return 0x08, struct.pack("<I", value)
    if isinstance(value, U64):
        return 0x0A, struct.pack("<Q", value)
    if isinstance(value, int):
        if -(2**15) <= value < 2**15:
            return 0x05, struct.pack("<h", value)
        if -(2**31) <= value < 2**31:
            return 0x07, struct.pack("<i", value)
        if -(2**63) <= value < 2**63:
            return 0x09, struct.pack("<q", value)
        return 0x0A, struct.pack("<Q", value)
    if isinstance(value, float):
        return 0x0B, struct.pack("<d", value)
    if isinstance(value, str):
        raw = value.encode()
        return 0x0C, varlen(len(raw)) + raw
    if isinstance(value, Opaque):
        return 0x0F, bytes([value.field_type]) + varlen(len(value.payload)) + value.payload
    raise TypeError(value)


def inlinable(type_: int, large: bool) -> bool:
    return type_ in (0x04, 0x05, 0x06) or (large and type_ in (0x07, 0x08))


def encode_value(value: Any, large: bool | None) -> tuple[int, bytes]:
    """(type, payload); large=None picks the small format unless it does not fit."""
    if isinstance(value, (dict, list)):
        if large is None:
            try:
                return encode_container(value, False, None)
            except (OverflowError, struct.error):
                return encode_container(value, True, None)
        return encode_container(value, large, large)
    return scalar(value)


def encode_container(value: dict | list, large: bool, child_large: bool | None):
    osz = 4 if large else 2
    is_obj = isinstance(value, dict)
    items = list(value.items()) if is_obj else [(None, v) for v in value]
    count = len(items)
    header = 2 * osz + count * (1 + osz) + (count * (osz + 2) if is_obj else 0)
    keys = [k.encode() for k, _ in items] if is_obj else []
    offset = header + sum(len(k) for k in keys)
    key_entries = bytearray()
    pos = header
    for k in keys:
        key_entries += (struct.pack("<I", pos) if large else struct.pack("<H", pos)) + struct.pack(
            "<H", len(k)
        )
        pos += len(k)
    value_entries = bytearray()
    blob = bytearray()
    for _, v in items:
        t, payload = encode_value(v, child_large)
        if inlinable(t, large):
            value_entries += bytes([t]) + payload.ljust(osz, b"\x00")
        else:
            value_entries += bytes([t]) + (
                struct.pack("<I", offset + len(blob))
                if large
                else struct.pack("<H", offset + len(blob))
            )
            blob += payload
    size = offset + len(blob)
    if not large and size > 0xFFFF:
        raise OverflowError
    fmt = "<II" if large else "<HH"
    body = struct.pack(fmt, count, size) + key_entries + value_entries + b"".join(keys) + blob
    assert len(body) == size
    if is_obj:
        return (0x01 if large else 0x00), body
    return (0x03 if large else 0x02), body


def encode(value: Any, large: bool | None = None) -> bytes:
    t, payload = encode_value(value, large)
    return bytes([t]) + payload


def pack_datetime(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, us: int = 0):
    """MySQL's TIME_to_longlong_datetime_packed."""
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return struct.pack("<q", (((ymd << 17) | hms) << 24) + us)


def pack_time(h: int, mi: int, s: int, us: int = 0, negative: bool = False) -> bytes:
    """MySQL's TIME_to_longlong_time_packed."""
    v = (((h << 12) | (mi << 6) | s) << 24) + us
    return struct.pack("<q", -v if negative else v)


def normalise_pymysqlrepl(value: Any) -> Any:
    if isinstance(value, dict):
        return {k.decode(): normalise_pymysqlrepl(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise_pymysqlrepl(v) for v in value]
    if isinstance(value, bytes):
        return value.decode()
    return value


def plain(value: Any) -> Any:
    """Drop the U16/U32/U64 markers: the decoder returns plain ints."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return value


def assert_same(actual: Any, expected: Any) -> None:
    """Equal, same types (True is not 1, 1.0 is not 1) and same key order."""
    assert type(actual) is type(expected), (actual, expected)
    if isinstance(expected, dict):
        assert list(actual) == list(expected)
        for k in expected:
            assert_same(actual[k], expected[k])
    elif isinstance(expected, list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
    else:
        assert actual == expected


# ---------------------------------------------------------------------------------------
# Real binlog: tiny event walker + mysqlbinlog reference
# ---------------------------------------------------------------------------------------

MYSQL_TYPE_LONG = 3
MYSQL_TYPE_VARCHAR = 15
MYSQL_TYPE_JSON = 245


def iter_events(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    assert data[:4] == b"\xfebin"
    pos = 4
    while pos < len(data):
        _ts, type_code, _sid, size, _log_pos, _flags = struct.unpack_from("<IBIIIH", data, pos)
        (crc,) = struct.unpack_from("<I", data, pos + size - 4)
        covered = bytearray(data[pos : pos + size - 4])
        if type_code == 15:
            covered[17] &= 0xFE  # the FDE checksum is taken with LOG_EVENT_BINLOG_IN_USE_F clear
        assert zlib.crc32(covered) == crc
        yield pos, type_code, data[pos + 19 : pos + size - 4]
        pos += size


def packed(buf: bytes, pos: int) -> tuple[int, int]:
    first = buf[pos]
    if first < 251:
        return first, pos + 1
    width = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(buf[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


def parse_table_map(body: bytes) -> tuple[list[int], list[int]]:
    pos = 8
    pos += 1 + body[pos] + 1  # schema
    pos += 1 + body[pos] + 1  # table
    ncols, pos = packed(body, pos)
    types = list(body[pos : pos + ncols])
    pos += ncols
    _meta_len, pos = packed(body, pos)
    metas = []
    for t in types:
        if t == MYSQL_TYPE_JSON:
            metas.append(body[pos])
            pos += 1
        elif t == MYSQL_TYPE_VARCHAR:
            metas.append(struct.unpack_from("<H", body, pos)[0])
            pos += 2
        elif t == MYSQL_TYPE_LONG:
            metas.append(0)
        else:
            raise AssertionError(f"column type {t} not needed for this file")
    return types, metas


def parse_rows(body: bytes, type_code: int, types: list[int], metas: list[int]):
    """Rows of a v2 WRITE(30)/UPDATE(31)/PARTIAL_UPDATE(39) event as lists of images.

    An image is {column index: value}; JSON values stay raw bytes, tagged 'json' or
    'diff' (when the partial-update bit of the column is set).
    """
    pos = 8
    (extra_len,) = struct.unpack_from("<H", body, pos)
    pos += extra_len
    ncols, pos = packed(body, pos)
    nbytes = (ncols + 7) // 8
    bitmaps = [int.from_bytes(body[pos : pos + nbytes], "little")]
    pos += nbytes
    if type_code in (31, 39):
        bitmaps.append(int.from_bytes(body[pos : pos + nbytes], "little"))
        pos += nbytes
    json_cols = [i for i, t in enumerate(types) if t == MYSQL_TYPE_JSON]
    rows = []
    while pos < len(body):
        images = []
        for n_image, bitmap in enumerate(bitmaps):
            partial_bits = 0
            if type_code == 39 and n_image == 1:
                options, pos = packed(body, pos)
                if options & 1:
                    pb_len = (len(json_cols) + 7) // 8
                    partial_bits = int.from_bytes(body[pos : pos + pb_len], "little")
                    pos += pb_len
            present = [i for i in range(ncols) if bitmap >> i & 1]
            null_len = (len(present) + 7) // 8
            nulls = int.from_bytes(body[pos : pos + null_len], "little")
            pos += null_len
            image: dict[int, Any] = {}
            for k, col in enumerate(present):
                if nulls >> k & 1:
                    image[col] = None
                    continue
                t, meta = types[col], metas[col]
                if t == MYSQL_TYPE_LONG:
                    image[col] = struct.unpack_from("<i", body, pos)[0]
                    pos += 4
                elif t == MYSQL_TYPE_VARCHAR:
                    width = 2 if meta > 255 else 1
                    n = int.from_bytes(body[pos : pos + width], "little")
                    image[col] = body[pos + width : pos + width + n].decode()
                    pos += width + n
                else:
                    n = int.from_bytes(body[pos : pos + meta], "little")
                    raw = body[pos + meta : pos + meta + n]
                    is_diff = partial_bits >> json_cols.index(col) & 1
                    image[col] = ("diff" if is_diff else "json", raw)
                    pos += meta + n
            images.append(image)
        rows.append(images)
    return rows


def corpus_rows() -> dict[int, tuple[int, list]]:
    """{event position: (type code, rows)} for the rows events of json.binlog.000001."""
    data = JSON_BINLOG.read_bytes()
    table = None
    out = {}
    for pos, type_code, body in iter_events(data):
        if type_code == 19:
            table = parse_table_map(body)
        elif type_code in (30, 31, 39):
            assert table is not None
            out[pos] = (type_code, parse_rows(body, type_code, *table))
    return out


def reference_rows() -> dict[int, list[list[dict[int, str]]]]:
    """{event position: rows as lists of {column index: printed value}} from mysqlbinlog."""
    text = gzip.decompress(JSON_BINLOG_REF.read_bytes()).decode()
    out: dict[int, list] = {}
    at = None
    for line in text.splitlines():
        m = re.match(r"# at (\d+)$", line)
        if m:
            at = int(m.group(1))
            continue
        if line.startswith(("### INSERT", "### UPDATE")):
            out.setdefault(at, []).append([{}])
        elif line.startswith("### SET") and out[at][-1][-1]:
            out[at][-1].append({})
        else:
            m = re.match(r"###   @(\d+)=(.*) /\* ", line)
            if m:
                out[at][-1][-1][int(m.group(1)) - 1] = m.group(2)
    return out


PARTIAL_RE = re.compile(r"JSON_(REPLACE|INSERT|REMOVE)\(@\d+, '((?:[^'\\]|\\.)*)'(?:, (.*))?\)$")


@pytest.fixture(scope="module")
def corpus() -> tuple[dict, dict]:
    """The JSON binlog's rows and mysqlbinlog's decode (skips, or fails in CI, without them)."""
    require_corpus(JSON_BINLOG_NAME, JSON_BINLOG_REF_NAME)
    return corpus_rows(), reference_rows()


def test_corpus_full_values_match_mysqlbinlog(corpus) -> None:
    rows, ref = corpus
    checked = 0
    for pos, (type_code, event_rows) in rows.items():
        if type_code == 39:
            continue
        assert len(event_rows) == len(ref[pos])
        for images, ref_images in zip(event_rows, ref[pos]):
            for image, ref_image in zip(images, ref_images):
                tag, raw = image[1]
                assert tag == "json"
                printed = ref_image[1]
                assert printed[0] == printed[-1] == "'"
                expected = json.loads(printed[1:-1])
                assert_same(decode_json(raw), expected)
                assert decode_json(raw)["age"] == int(ref_image[3])
                checked += 1
    assert checked == 6 + 12  # 6 inserted rows, 6 updated rows with 2 images each


def test_corpus_values_agree_with_pymysqlreplication(corpus) -> None:
    json_binary_ref = pytest.importorskip("pymysqlreplication.json_binary")
    rows, _ = corpus
    for type_code, event_rows in rows.values():
        if type_code == 39:
            continue
        for images in event_rows:
            for image in images:
                raw = image[1][1]
                theirs = normalise_pymysqlrepl(json_binary_ref.parse_json(raw[0], raw[1:]))
                assert_same(decode_json(raw), theirs)
                assert_same(decode_json(memoryview(raw)), theirs)


def test_corpus_partial_update_diffs(corpus) -> None:
    rows, ref = corpus
    partial = [(pos, r) for pos, (t, r) in rows.items() if t == 39]
    assert len(partial) == 1
    pos, event_rows = partial[0]
    # Before-images of the partial update: the after-images of the preceding full UPDATE.
    (update_rows,) = [r for t, r in rows.values() if t == 31]
    current = {after[0]: decode_json(after[1][1]) for _before, after in update_rows}

    assert len(event_rows) == len(ref[pos]) == 6
    for (before, after), (ref_before, ref_after) in zip(event_rows, ref[pos]):
        assert before == {0: int(ref_before[0])}
        tag, raw = after[1]
        assert tag == "diff"
        m = PARTIAL_RE.match(ref_after[1])
        assert m, ref_after[1]
        expected_value = json.loads(m.group(3)) if m.group(3) is not None else None
        expected = [JsonDiff(m.group(1).lower(), m.group(2), expected_value)]
        diffs = decode_json_diffs(raw)
        assert diffs == expected
        assert_same(diffs[0].value, expected_value)

        row_id = before[0]
        old = current[row_id]
        new = apply_json_diffs(old, diffs)
        assert new["age"] == after[3] == int(ref_after[3])
        assert new == {**old, "age": expected_value}
        assert list(new) == list(old)
        assert old["age"] == new["age"] - 1  # the before-image was not modified
        current[row_id] = new


def test_corpus_partial_diff_with_length_prefix(corpus) -> None:
    rows, _ = corpus
    ((_, event_rows),) = [(t, r) for t, r in rows.values() if t == 39]
    raw = event_rows[0][1][1][1]
    prefixed = struct.pack("<I", len(raw)) + raw
    assert decode_json_diffs(prefixed, length_prefixed=True) == decode_json_diffs(raw)
    assert decode_json_diffs(bytearray(raw)) == decode_json_diffs(memoryview(raw))


# ---------------------------------------------------------------------------------------
# Hand-written bytes
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hexbytes", "expected"),
    [
        ("0400", None),
        ("0401", True),
        ("0402", False),
        ("050080", -32768),
        ("05ff7f", 32767),
        ("06ffff", 65535),
        ("0700000080", -(2**31)),
        ("08ffffffff", 2**32 - 1),
        ("090000000000000080", -(2**63)),
        ("09feffffffffffffff", -2),
        ("0affffffffffffffff", 2**64 - 1),
        ("0b1f85eb51b81e0940", 3.14),
        ("0b0000000000000080", -0.0),
        ("0c00", ""),
        ("0c03616263", "abc"),
        ("0c04f09f9880", "\U0001f600"),
        # {"a": 1} small object: count 1, size 12, key entry (11, 1), value entry int16 1
        ("0001000c000b00010005010061", {"a": 1}),
        # [null, "x"] small array: count 2, size 12, entries literal null + string at 10
        ("0202000c00" + "040000" + "0c0a00" + "0178", [None, "x"]),
    ],
)
def test_known_bytes(hexbytes: str, expected: Any) -> None:
    assert_same(decode_json(bytes.fromhex(hexbytes)), expected)


def test_empty_value_is_none() -> None:
    assert decode_json(b"") is None
    assert decode_json(memoryview(b"")) is None


def test_double_round_trip_exact() -> None:
    for d in (0.1, -1e308, 5e-324, 1.7976931348623157e308, 2.0**53 + 1, float("inf")):
        assert decode_json(b"\x0b" + struct.pack("<d", d)) == d


# ---------------------------------------------------------------------------------------
# Encoder-built documents
# ---------------------------------------------------------------------------------------

NESTED = {
    "id": 42,
    "name": "Zoë",
    "tags": ["a", "b", ["c", {"deep": [1, 2.5, None, True, False]}]],
    "neg64": -(2**63),
    "big": U64(2**64 - 1),
    "i32": -(2**31),
    "u32": U32(2**32 - 1),
    "u16": U16(65535),
    "i16": -1,
    "dbl": -1.5e-7,
    "empty_obj": {},
    "empty_arr": [],
    "long": "x" * 300,
    "ключ": "значение",
    "emoji 😀": "😀",
}


@pytest.mark.parametrize("large", [False, True, None])
def test_nested_document(large: bool | None) -> None:
    assert_same(decode_json(encode(NESTED, large)), plain(NESTED))


def test_large_format_inlines_int32() -> None:
    doc = [-(2**31), U32(2**32 - 1), 7, U16(9), None, True]
    small = encode(doc, False)
    large = encode(doc, True)
    assert small[0] == 0x02 and large[0] == 0x03
    # In the large format int32/uint32 sit in the 5-byte value entries: no value area.
    assert len(large) == 1 + 8 + 5 * len(doc)
    assert decode_json(small) == decode_json(large) == [-(2**31), 2**32 - 1, 7, 9, None, True]


def test_large_object_over_64k() -> None:
    doc = {f"key{i:05d}": "v" * 20 + str(i) for i in range(3000)}
    doc["nested"] = {"inner": list(range(-5, 5)), "s": "y" * 70000}
    data = encode(doc)
    assert data[0] == 0x01  # large object, chosen because the small format overflows
    assert len(data) > 65536
    assert_same(decode_json(data), doc)


@pytest.mark.parametrize("large", [False, True])
def test_many_elements_small_and_large_format(large: bool) -> None:
    array = [i - 700 for i in range(1400)] + ["s", None, 1.5, [True]]
    obj = {f"{i:04d}": i for i in range(900)}
    obj["zzzzz"] = {"a": array[:3]}
    for doc in (array, obj, [obj, array]):
        data = encode(doc, large)
        assert data[0] & 1 == int(large)
        assert_same(decode_json(data), doc)


def test_large_array_and_long_strings() -> None:
    doc = ["é" * 70000, "z" * 16384, "q" * 128, "w" * 127]
    data = encode(doc)
    assert data[0] == 0x03
    assert_same(decode_json(data), doc)


def test_unicode_keys_keep_stored_order() -> None:
    # Stored order (MySQL: by byte length, then bytes), not Python's sort order.
    doc = {"b": 1, "é": 2, "aa": 3, "日": 4, "😀": 5}
    assert_same(decode_json(encode(doc)), doc)


def test_random_documents_agree_with_encoder_and_pymysqlreplication() -> None:
    json_binary_ref = pytest.importorskip("pymysqlreplication.json_binary")
    rng = random.Random(7)

    def gen(depth: int) -> Any:
        r = rng.random()
        if depth < 4 and r < 0.25:
            return {
                "".join(rng.choice("abcdé日") for _ in range(rng.randint(0, 6))): gen(depth + 1)
                for _ in range(rng.randint(0, 6))
            }
        if depth < 4 and r < 0.45:
            return [gen(depth + 1) for _ in range(rng.randint(0, 6))]
        return rng.choice(
            [
                None,
                True,
                False,
                rng.randint(-(2**15), 2**15 - 1),
                rng.randint(-(2**31), 2**31 - 1),
                rng.randint(-(2**63), 2**63 - 1),
                rng.randint(2**63, 2**64 - 1),
                rng.uniform(-1e6, 1e6),
                "".join(rng.choice("xyz ü€😀") for _ in range(rng.randint(0, 200))),
            ]
        )

    for _ in range(300):
        doc = gen(0)
        for large in (False, True):
            data = encode(doc, large)
            ours = decode_json(data)
            assert_same(ours, doc)
            theirs = normalise_pymysqlrepl(json_binary_ref.parse_json(data[0], data[1:]))
            assert_same(ours, theirs)


# ---------------------------------------------------------------------------------------
# Opaque values
# ---------------------------------------------------------------------------------------


# DECIMAL payloads: precision, scale, then binary decimal.  The binary part of the first
# row is the worked example from MySQL's strings/decimal.cc (DECIMAL(14,4)).
@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("0e04810dfb38d204d2", "1234567890.1234"),
        ("0e047ef204c72dfb2d", "-1234567890.1234"),
        ("0a028012d68759", "1234567.89"),
        ("0a027fed2978a6", "-1234567.89"),
        ("04008000", "0"),
        ("03028132", "1.50"),  # DECIMAL(3,2): 01 | 50 -> 81 32
    ],
)
def test_opaque_decimal(payload: str, expected: str) -> None:
    value = decode_json(encode(Opaque(246, bytes.fromhex(payload))))
    assert type(value) is Decimal
    assert format(value, "f") == expected
    # and inside a container
    doc = decode_json(encode({"price": Opaque(246, bytes.fromhex(payload))}, True))
    assert format(doc["price"], "f") == expected


@pytest.mark.parametrize(
    ("field_type", "packed_bytes", "expected"),
    [
        (10, pack_datetime(2024, 1, 2), "2024-01-02"),
        (12, pack_datetime(2024, 1, 2, 3, 4, 5, 6), "2024-01-02 03:04:05.000006"),
        (12, pack_datetime(9999, 12, 31, 23, 59, 59, 999999), "9999-12-31 23:59:59.999999"),
        (12, pack_datetime(0, 0, 0), "0000-00-00 00:00:00.000000"),
        (7, pack_datetime(2021, 3, 15, 8, 42, 4, 673435), "2021-03-15 08:42:04.673435"),
        (11, pack_time(12, 34, 56), "12:34:56.000000"),
        (11, pack_time(0, 0, 1, 500000), "00:00:01.500000"),
        (11, pack_time(838, 59, 59, 0, negative=True), "-838:59:59.000000"),
        (11, pack_time(1, 2, 3, 4, negative=True), "-01:02:03.000004"),
    ],
)
def test_opaque_temporal(field_type: int, packed_bytes: bytes, expected: str) -> None:
    assert decode_json(encode(Opaque(field_type, packed_bytes))) == expected
    assert decode_json(encode([Opaque(field_type, packed_bytes)])) == [expected]


def test_opaque_other_types_as_mysql_prints_them() -> None:
    assert decode_json(encode(Opaque(252, b"\x00\x01\xff"))) == "base64:type252:AAH/"
    assert decode_json(encode(Opaque(15, b""))) == "base64:type15:"
    blob = bytes(range(256)) * 2
    text = decode_json(encode(Opaque(252, blob)))
    prefix, _, encoded = text.partition("base64:type252:")
    assert prefix == ""
    lines = encoded.split("\n")
    # MySQL's base64_encode() puts a newline after every 76 characters.
    assert all(len(line) == 76 for line in lines[:-1]) and 0 < len(lines[-1]) <= 76
    assert base64.b64decode("".join(lines)) == blob
    # VAR_STRING opaque values are printed as plain strings by MySQL.
    assert decode_json(encode(Opaque(253, "héllo".encode()))) == "héllo"


# ---------------------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hexbytes",
    [
        "0d00",  # unknown type
        "0403",  # bad literal
        "05ff",  # truncated int16
        "0b000000",  # truncated double
        "0c05616263",  # string longer than the data
        "0c8080808080",  # variable length longer than 5 bytes
        "000100",  # truncated object header
        "0001000c000b000100050100",  # object key outside the data
        "0201000700" + "0c" + "ff00",  # value offset outside the array
        "0001000c000b0001000d010061",  # unknown value type in an entry
        "0001000c000b000100040300" + "61",  # bad inlined literal
        "0f",  # truncated opaque
        "0ff60303028096",  # DECIMAL(3,2) needs 2 bytes, opaque length allows 1
        "0f0c02" + "0000",  # temporal opaque shorter than 8 bytes
        "0c02c328",  # invalid utf-8
    ],
)
def test_malformed_raises(hexbytes: str) -> None:
    with pytest.raises(JsonBinaryError):
        decode_json(bytes.fromhex(hexbytes))


def test_errors_are_value_errors() -> None:
    assert issubclass(JsonBinaryError, ValueError)
    assert issubclass(JsonDiffError, ValueError)


# ---------------------------------------------------------------------------------------
# JSON diffs
# ---------------------------------------------------------------------------------------


def diff_bytes(op: int, path: str, value: Any = None, *, has_value: bool = True) -> bytes:
    raw_path = path.encode()
    out = bytes([op]) + lenenc(len(raw_path)) + raw_path
    if op != 2 and has_value:
        doc = encode(value)
        out += lenenc(len(doc)) + doc
    return out


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 2**16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 2**24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def test_decode_diff_vector() -> None:
    long_key = "k" * 300  # path longer than 250 bytes: 0xFC length
    data = (
        diff_bytes(0, "$.a[1]", {"x": [1, "two"]})
        + diff_bytes(1, '$."a b"', "new")
        + diff_bytes(2, "$.gone")
        + diff_bytes(1, "$." + long_key, "v" * 70000)  # value longer than 65535: 0xFD length
        + diff_bytes(0, "$[last]", None)
    )
    diffs = decode_json_diffs(data)
    assert diffs == [
        JsonDiff("replace", "$.a[1]", {"x": [1, "two"]}),
        JsonDiff("insert", '$."a b"', "new"),
        JsonDiff("remove", "$.gone", None),
        JsonDiff("insert", "$." + long_key, "v" * 70000),
        JsonDiff("replace", "$[last]", None),
    ]
    assert decode_json_diffs(b"") == []
    with pytest.raises(FrozenInstanceError):
        diffs[0].path = "$"  # type: ignore[misc]


@pytest.mark.parametrize(
    "data",
    [
        b"\x03\x01$",  # unknown operation
        b"\x00\x05$.a",  # path longer than the data
        b"\x00\x03$.a",  # missing value
        b"\x00\x03$.a\x05\x05\x01\x00",  # value longer than the data
        b"\x00\x03$.a\x02\x0d\x00",  # bad value
        b"\x00\xfb",  # NULL length marker
    ],
)
def test_malformed_diffs_raise(data: bytes) -> None:
    with pytest.raises(JsonBinaryError):
        decode_json_diffs(data)


def apply(doc: Any, *diffs: tuple) -> Any:
    return apply_json_diffs(doc, [JsonDiff(*d) for d in diffs])


def test_apply_replace_insert_remove() -> None:
    doc = {"a": [1, 2, 3], "b": {"c": "d"}, "x y": 0}
    snapshot = json.dumps(doc)
    out = apply(
        doc,
        ("replace", "$.a[1]", 20),
        ("insert", "$.a[1]", 15),
        ("insert", "$.a[99]", 99),
        ("remove", "$.a[0]"),
        ("replace", '$."x y"', {"n": None}),
        ("insert", "$.b.e", True),
        ("remove", "$.b.c"),
        ("replace", "$.a[last]", "end"),
        ("insert", "$.zz", []),
        ("insert", "$.aa", 1),
    )
    assert json.dumps(doc) == snapshot  # input untouched
    assert out == {"a": [15, 20, 3, "end"], "b": {"e": True}, "x y": {"n": None}, "zz": [], "aa": 1}
    # Inserted members take MySQL's key order (byte length, then bytes).
    assert list(out) == ["a", "b", "aa", "zz", "x y"]


def test_apply_quoted_and_escaped_paths() -> None:
    doc = {"a b": {'q"k': [0, {"日本": 1}]}}
    out = apply(doc, ("replace", '$."a b"."q\\"k"[1]."日本"', 2))
    assert out == {"a b": {'q"k': [0, {"日本": 2}]}}
    assert doc["a b"]['q"k'][1]["日本"] == 1
    assert apply({"A": 1}, ("replace", "$.\\u0041", 5)) == {"A": 5}
    assert apply([1, 2, 3], ("remove", "$[ last - 1 ]")) == [1, 3]
    assert apply([1, 2, 3], ("insert", "$[last-5]", 0)) == [0, 1, 2, 3]


def test_apply_root_replace() -> None:
    assert apply({"a": 1}, ("replace", "$", [1])) == [1]


@pytest.mark.parametrize(
    ("doc", "diff"),
    [
        ({"a": 1}, ("replace", "$.b", 1)),  # replace needs an existing target
        ({"a": 1}, ("insert", "$.a", 1)),  # insert must not overwrite
        ({"a": 1}, ("remove", "$.b")),
        ([1], ("remove", "$[1]")),
        ([1], ("replace", "$[5]", 0)),
        ({"a": 1}, ("replace", "$[0]", 0)),  # no auto-wrapping
        ([1], ("replace", "$.a", 0)),
        ({"a": 1}, ("insert", "$.b.c", 0)),  # missing parent
        ({"a": 1}, ("insert", "$.a.c", 0)),  # parent is a scalar
        (5, ("replace", "$.a", 0)),
        ({"a": 1}, ("remove", "$")),
        ({"a": 1}, ("replace", "$.*", 0)),  # wildcards are never in diffs
        ({"a": [1]}, ("replace", "$.a[*]", 0)),
        ({"a": [1]}, ("replace", "$**.a", 0)),
        ({"a": [1]}, ("replace", "$.a[0 to 1]", 0)),
        ({"a": 1}, ("replace", "a", 0)),
        ({"a": 1}, ("frobnicate", "$.a", 0)),
    ],
)
def test_apply_rejected(doc: Any, diff: tuple) -> None:
    with pytest.raises(JsonDiffError):
        apply(doc, diff)


# ---------------------------------------------------------------------------------------
# Packed integers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hexbytes", "value", "next_offset"),
    [
        ("00", 0, 1),
        ("fa", 250, 1),
        ("fcfb00", 251, 3),
        ("fcffff", 65535, 3),
        ("fd000001", 65536, 4),
        ("fdffffff", 2**24 - 1, 4),
        ("fe0000000001000000", 2**32, 9),
        ("feffffffffffffffff", 2**64 - 1, 9),
    ],
)
def test_read_packed_int(hexbytes: str, value: int, next_offset: int) -> None:
    data = b"\x99" + bytes.fromhex(hexbytes) + b"\x77"
    assert read_packed_int(data, 1) == (value, next_offset + 1)
    assert read_packed_int(memoryview(data), 1) == (value, next_offset + 1)


@pytest.mark.parametrize("hexbytes", ["", "fb", "ff", "fc00", "fd0000", "fe00000000000000"])
def test_read_packed_int_errors(hexbytes: str) -> None:
    with pytest.raises(ValueError):
        read_packed_int(bytes.fromhex(hexbytes), 0)
