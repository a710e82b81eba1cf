"""Events damaged as the fuzz harness damaged them (tests/fuzzing.py), each in its smallest
form: refused with a one-line error that says where, instead of a hang, an IndexError or a
ValueError from past the decoder."""

from __future__ import annotations

import array
import os
import signal
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from changestream.decoding import event_types as et
from changestream.decoding import field_types as ft
from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.gtid_tagged import decode_gtid_set
from changestream.decoding.query_kind import query_kind
from changestream.decoding.rows import RowImageDecoder, RowsFormatError
from changestream.decoding.statements import OTHER
from changestream.decoding.table_map import TableMapFormatError, parse_table_map
from changestream.decoding.table_schema import Column, TableSchema
from changestream.model.errors import BinlogError, ConfigError, SourceError
from changestream.model.gtid import MariadbGtidState
from changestream.native import compiled
from changestream.parallel.decode_workers import Segment
from changestream.sinks.spark.worker_encoding import ARROW_FRAMES
from changestream.transactions.groups import Finished
from changestream.transactions.plain import opens_plain_group
from changestream.transactions.resume_point import ResumePoint
from tests.binlog_bytes import binlog, event, format_description
from tests.fuzz_binlogs import event_frames

ROOT = Path(__file__).resolve().parents[2]
SIMPLE_PRIMARY_KEY = 8


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Fail a loop that does not end (the bug this guards against) instead of hanging."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _table_map(types: bytes, meta: bytes, optional: bytes = b"") -> bytes:
    """A TABLE_MAP body (post-header of 8) of ``db.t`` with columns of ``types``."""
    nulls = bytes((len(types) + 7) // 8)
    return (b"\x01\x00\x00\x00\x00\x00\x00\x00" + b"\x02db\x00" + b"\x01t\x00"
            + bytes([len(types)]) + types + bytes([len(meta)]) + meta + nulls + optional)


def test_rows_whose_images_log_no_column_are_refused_not_read_forever() -> None:
    decoder = RowImageDecoder(TableSchema("db", "t", (Column(0, ft.LONG),)))
    body = b"\x01" + b"\x00" + b"\x01\x00\x00\x00\x00"  # 1 column, none of it logged
    with _deadline(5), pytest.raises(RowsFormatError, match="logs no column"):
        decoder.decode_body(body, 0, "insert", False)
    update = b"\x01" + b"\x00\x00" + b"\x01\x00\x00\x00\x00"
    with _deadline(5), pytest.raises(RowsFormatError, match="logs no column"):
        decoder.decode_body(update, 0, "update", False)


def test_a_primary_key_past_the_last_column_is_a_table_map_error() -> None:
    body = _table_map(bytes([ft.LONG]), b"", bytes([SIMPLE_PRIMARY_KEY, 1, 5]))
    with pytest.raises(TableMapFormatError, match=r"primary key of db\.t names column 5 of 1"):
        parse_table_map(body, 8)


def test_a_bit_column_wider_than_64_bits_is_a_table_map_error() -> None:
    assert parse_table_map(_table_map(bytes([ft.BIT]), b"\x00\x08"), 8)[2].columns[0].bits == 64
    with pytest.raises(TableMapFormatError, match="BIT holds at most 64"):
        parse_table_map(_table_map(bytes([ft.BIT]), b"\x00\xfe"), 8)


def _gtid_set(start: int, end: int) -> bytes:
    return (struct.pack("<Q", 1) + uuid.UUID(int=1).bytes + struct.pack("<Q", 1)
            + struct.pack("<QQ", start, end))


def test_an_empty_gtid_interval_is_refused_by_the_decoder_with_its_offset() -> None:
    assert decode_gtid_set(_gtid_set(1, 6))[0] == {(uuid.UUID(int=1), ""): [(1, 6)]}
    for start, end in ((5, 5), (0, 3), (7, 2)):
        with pytest.raises(ValueError, match="empty interval"):
            decode_gtid_set(_gtid_set(start, end))
    data = event(et.PREVIOUS_GTIDS, _gtid_set(9, 1))
    with pytest.raises(BinlogError, match="empty interval") as info:
        EventDecoder().decode(data, "mysql-bin.000001", 120)
    assert info.value.offset == 120


def test_events_too_short_to_peek_at_are_left_to_the_decoder() -> None:
    short_gtid = event(et.MARIADB_GTID, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    assert not opens_plain_group(short_gtid)
    short_query = event(et.QUERY, b"\x00" * 6)
    assert query_kind(short_query, 13, len(short_query)) == OTHER


def test_error_messages_are_one_line_whatever_they_quote() -> None:
    error = BinlogError("column metadata of db\n.t\x00 is 4 bytes", "f\r", 7)
    assert str(error) == "column metadata of db\\n.t\\x00 is 4 bytes (f\\r at offset 7)"
    assert error.reason == "column metadata of db\\n.t\\x00 is 4 bytes"
    assert str(ConfigError('"a\u2028b": unknown key')) == '"a\\u2028b": unknown key'
    assert str(SourceError("error 1236: bad\u2028thing")) == "error 1236: bad\\u2028thing"
    assert len(str(ConfigError("x\u0085y")).splitlines()) == 1


def test_a_payload_field_longer_than_2_to_the_63_is_no_plain_payload() -> None:
    frames = compiled("changestream.native.zstd_frames")
    if frames is None:
        pytest.skip("the compiled zstd_frames module is not built")
    # A field of kind 183 whose packed length, 0x9f..., is negative as a signed size.
    body = bytes([183, 0xFE]) + bytes.fromhex("9f3c7a1e5bffff9f") + b"\x0b" + b"\x00" * 40
    code = ("import sys; from changestream.native import zstd_frames as z; "
            f"print(z.plain_payload_size({body!r}, None, bytes(256), 13, 1 << 22))")
    # In a process of its own: the bug this guards against read far outside the body.
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout.strip()) == (0, "None"), result.stderr


def test_a_gtid_of_the_other_flavour_is_a_binlog_error_naming_where() -> None:
    point = ResumePoint(MariadbGtidState("0-1-5"))
    mysql_gtid = "76f3e7be-6720-11ed-9cad-0242ac110002:11"
    with pytest.raises(BinlogError, match="does not fit the binlog's GTIDs") as info:
        point.advance(Finished(None, None, mysql_gtid, "mysql-bin.000057", 900))
    assert (info.value.file, info.value.offset) == ("mysql-bin.000057", 900)
    with pytest.raises(BinlogError, match="is not a MariaDB GTID"):
        point.delivered_elsewhere([mysql_gtid], "mysql-bin.000057", 1200)


def zero_column_segment() -> Segment:
    """A decode worker's segment of one MySQL transaction whose table has no column (its
    TABLE_MAP logs names: a worker's), with three bytes of rows."""
    gtid = event(et.GTID, b"\x00" + uuid.UUID(int=7).bytes + struct.pack("<Q", 1) + b"\x02"
                 + struct.pack("<QQ", 0, 1))
    begin = event(et.QUERY, struct.pack("<IIBHH", 1, 0, 0, 0, 0) + b"\x00" + b"BEGIN")
    table = event(et.TABLE_MAP, b"\x05\x00\x00\x00\x00\x00\x00\x00" + b"\x02db\x00"
                  + b"\x01t\x00" + b"\x00" + b"\x00" + b"\x04\x00")
    rows = event(et.WRITE_ROWS, b"\x05\x00\x00\x00\x00\x00\x00\x00" + b"\x02\x00" + b"\x00"
                 + b"\x01\x02\x03")
    data = binlog(format_description("8.0.40"), gtid, begin, table, rows,
                  event(et.XID, struct.pack("<Q", 9)))
    (fde_at, fde_size), *frames = event_frames(data)
    return Segment(("binlog.000001", fde_at, data[fde_at:fde_at + fde_size]), "binlog.000001",
                   b"".join(data[o:o + s] for o, s in frames),
                   array.array("q", [o for o, _ in frames]))


@pytest.mark.parametrize("encoding", ["changestream", ARROW_FRAMES])
def test_a_table_without_columns_is_refused_by_every_worker_path(encoding: str) -> None:
    if encoding == ARROW_FRAMES:
        pytest.importorskip("pyarrow")
    code = ("from changestream.parallel.decode_workers import WorkerSettings, _Worker; "
            "from tests.unit.test_damaged_events import zero_column_segment; "
            f"w = _Worker(WorkerSettings(None, False, {encoding!r}, False, 50, None)); "
            "w.assemble(zero_column_segment(), 'T')")
    # In a process of its own: the compiled walks read such rows in a loop that never
    # ended, out of reach of a signal.
    for pure in ("0", "1"):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=60, cwd=ROOT,
                                env={**os.environ, "CHANGESTREAM_PURE_PYTHON": pure})
        assert "BinlogError: rows event of db.t logs no column but has 3 bytes of rows " \
            "(binlog.000001 at offset 258)" in result.stderr, result.stderr[-2000:]
