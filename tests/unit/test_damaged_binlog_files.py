"""Binlog files damaged as the fuzz harness damaged them (tests/fuzzing.py): an event size
field far past the file's end, a gzip'd binlog cut or corrupted. Each is a one-line error
naming the file and the offset, without allocating what the size field claims."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
from pathlib import Path

import pytest

from changestream.decoding import event_types as et
from changestream.model.errors import BinlogError, TruncatedBinlogError
from changestream.sources.files import FileSource
from tests.binlog_bytes import binlog, event, format_description
from tests.fuzz_binlogs import event_frames

QUERY_BODY = (b"\x01\x00\x00\x00" + b"\x00\x00\x00\x00" + b"\x02" + b"\x00\x00" + b"\x00\x00"
              + b"db\x00" + b"CREATE TABLE t (a INT)")


def _binlog() -> bytes:
    return binlog(format_description("5.5.62"), event(et.QUERY, QUERY_BODY),
                  event(et.QUERY, QUERY_BODY))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_the_undamaged_binlog_reads(tmp_path: Path) -> None:
    events = list(FileSource([_write(tmp_path / "mysql-bin.000001", _binlog())]))
    assert [e.header.type_code for e in events] == [15, et.QUERY, et.QUERY]


def test_a_size_field_past_the_end_is_truncated_without_allocating_it(tmp_path: Path) -> None:
    data = bytearray(_binlog())
    second = event_frames(bytes(data))[2][0]
    struct.pack_into("<I", data, second + 9, 0xFFFF_FFF0)
    path = _write(tmp_path / "mysql-bin.000001", bytes(data))
    tracemalloc.start()
    try:
        with pytest.raises(TruncatedBinlogError) as info:
            list(FileSource([path], verify_checksums=False))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.offset == second and info.value.file == str(path)
    assert peak < 64 << 20


def test_a_cut_gzip_file_is_truncated(tmp_path: Path) -> None:
    packed = gzip.compress(_binlog(), mtime=0)
    path = _write(tmp_path / "mysql-bin.000001.gz", packed[:len(packed) // 2])
    with pytest.raises(TruncatedBinlogError, match="gzip'd file ends early") as info:
        list(FileSource([path]))
    assert info.value.offset is not None and "\n" not in str(info.value)


@pytest.mark.parametrize("damage", ["header", "body", "crc"])
def test_a_corrupt_gzip_file_is_a_binlog_error(tmp_path: Path, damage: str) -> None:
    packed = bytearray(gzip.compress(_binlog(), mtime=0))
    at = {"header": 3, "body": len(packed) // 2, "crc": len(packed) - 6}[damage]
    packed[at] ^= 0xFF  # the flags byte, the deflate stream, the CRC32 of what it holds
    path = _write(tmp_path / "mysql-bin.000001.gz", bytes(packed))
    with pytest.raises(BinlogError, match="gzip'd file") as info:
        list(FileSource([path]))
    assert info.value.offset is not None and info.value.file == str(path)
