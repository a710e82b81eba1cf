"""Damaged copies of real binlogs are refused with one-line errors naming file and offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from changestream.model.errors import BinlogError, ChecksumMismatchError, TruncatedBinlogError
from changestream.sources import FileSource
from tests.corpus.reference import CORPUS, require_corpus

SOURCE = CORPUS / "osheroff/mysql-bin.checksum-crc32"


@pytest.fixture(autouse=True)
def _source_present() -> None:
    require_corpus(str(SOURCE.relative_to(CORPUS)))


def _offsets() -> list[tuple[int, int]]:
    return [(e.header.offset, e.header.size) for e in FileSource([SOURCE])]


def test_flipped_byte_is_a_checksum_mismatch_at_that_event(tmp_path: Path) -> None:
    offset, size = _offsets()[10]
    data = bytearray(SOURCE.read_bytes())
    data[offset + size // 2] ^= 0xFF
    damaged = tmp_path / "mysql-bin.000001"
    damaged.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatchError) as info:
        list(FileSource([damaged]))
    assert info.value.offset == offset and info.value.file == str(damaged)
    assert "checksum mismatch" in str(info.value) and "\n" not in str(info.value)


def test_cut_file_is_truncated_at_the_cut_event(tmp_path: Path) -> None:
    offset, size = _offsets()[20]
    cut = tmp_path / "mysql-bin.000001"
    cut.write_bytes(SOURCE.read_bytes()[:offset + size - 3])
    with pytest.raises(TruncatedBinlogError) as info:
        list(FileSource([cut]))
    assert info.value.offset == offset


def test_not_a_binlog_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.000001"
    other.write_bytes(b"hello world, not a binlog")
    with pytest.raises(BinlogError, match="not a binlog file"):
        list(FileSource([other]))


def test_unknown_event_type_not_ignorable_is_an_error(tmp_path: Path) -> None:
    offset, _size = _offsets()[3]
    data = bytearray(SOURCE.read_bytes())
    data[offset + 4] = 99  # an unknown type code, flags without LOG_EVENT_IGNORABLE_F
    bad = tmp_path / "mysql-bin.000001"
    bad.write_bytes(bytes(data))
    with pytest.raises(BinlogError, match="unknown event type 99") as info:
        list(FileSource([bad], verify_checksums=False))
    assert info.value.offset == offset
