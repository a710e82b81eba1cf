"""Every corpus binlog is read completely, or refused with the documented clear error; what
is read matches the servers' own decodes in row counts per table and operation and GTIDs."""

from __future__ import annotations

import gzip
import shutil
from collections import Counter
from pathlib import Path

import pytest

from changestream.cli.scan import scan_transactions
from changestream.model.errors import (
    BinlogError,
    TruncatedBinlogError,
    UnsupportedBinlogError,
)
from changestream.sources import FileSource
from tests.corpus.reference import CORPUS, corpus_files, read_reference

READ_COMPLETELY = [
    "MySqlCdc/mysql-bin.000001",
    "apecloud/mysql-bin.000057",
    "gh-ost/mysql-bin.000066",
    "mariadb-test-data/master-bin-seq_10.3.36.000001",
    "mysql-testsuite/binlog_56_gtid_reserved_word.000001",
    "mysql-testsuite/orphan_xa_prepare.000001",
    "mysql-testsuite/rpl_binlog_with_gipk_info_full_metadata.000001",
    "osheroff/mysql-bin.aurora-padding",
    "osheroff/mysql-bin.checksum-crc32",
    "osheroff/mysql-bin.checksum-none",
    "osheroff/mysql-bin.sakila.gz",
    "rust_mysql_common/json.binlog.000001",
    "rust_mysql_common/mariadb-bin.000001",
    "rust_mysql_common/minimal_row_metadata.000001",
    "rust_mysql_common/mysql-enum-string-set.000001",
    "rust_mysql_common/mysql_type_bit.000001",
    "rust_mysql_common/transaction_compression.000001",
]

# file -> (error class, words the one-line message must contain, offset it must name)
REFUSED = {
    "mariadb-test-data/binlog_before_20574.bin": (UnsupportedBinlogError, "encrypted", 256),
    "mariadb-test-data/binlog_old_version_4_1.000001": (UnsupportedBinlogError, "v3", 4),
    "mariadb-test-data/bug11747416_32228_binlog.000001": (TruncatedBinlogError,
                                                          "ends inside", 316),
    "tiflow/mysql-bin.000001": (BinlogError, "MariaDB 5.3-10.0", 1819),
}


def _decode(path: Path, counts: Counter[tuple[str, str]], gtids: list[str]) -> None:
    for t in scan_transactions(FileSource([path]), on_warning=lambda m: None):
        if t.gtid:
            gtids.append(t.gtid)
        for table, ops in t.tables.items():
            for op, n in ops.items():
                if n:
                    counts[(table, op)] += n


def test_corpus_lists_every_file() -> None:
    assert set(corpus_files()) == set(READ_COMPLETELY) | set(REFUSED)


@pytest.mark.parametrize("relative", READ_COMPLETELY)
def test_file_reads_completely_and_matches_reference(relative: str) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    gtids: list[str] = []
    _decode(CORPUS / relative, counts, gtids)
    expected_counts, expected_gtids = read_reference(relative)
    assert counts == expected_counts
    assert gtids == expected_gtids


def test_gzipped_and_plain_copies_decode_alike(tmp_path: Path) -> None:
    plain = tmp_path / "mysql-bin.000001"
    with gzip.open(CORPUS / "osheroff/mysql-bin.sakila.gz", "rb") as src, plain.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    a: Counter[tuple[str, str]] = Counter()
    b: Counter[tuple[str, str]] = Counter()
    _decode(plain, a, [])
    _decode(CORPUS / "osheroff/mysql-bin.sakila.gz", b, [])
    assert a == b and sum(a.values()) == 47_273


@pytest.mark.parametrize("relative", sorted(REFUSED))
def test_file_is_refused_with_a_clear_error(relative: str) -> None:
    error_class, words, offset = REFUSED[relative]
    counts: Counter[tuple[str, str]] = Counter()
    with pytest.raises(error_class) as info:
        _decode(CORPUS / relative, counts, [])
    message = str(info.value)
    assert "\n" not in message
    assert words in message
    assert info.value.offset == offset and info.value.file.endswith(Path(relative).name)
    # What was read before the error agrees with the server's decode up to there.
    expected_counts, _ = read_reference(relative)
    assert not (counts - expected_counts)
