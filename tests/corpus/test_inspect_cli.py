"""``changestream inspect`` on a corpus binlog: one line per transaction as text, the
documented keys as JSON lines, and exit status 1 with a one-line error for a file it cannot
read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from changestream.cli import main
from tests.corpus.reference import CORPUS, require_corpus

APECLOUD = CORPUS / "apecloud/mysql-bin.000057"


@pytest.fixture(autouse=True)
def _apecloud_present() -> None:
    require_corpus(str(APECLOUD.relative_to(CORPUS)))

SID = "76f3e7be-6720-11ed-9cad-0242ac110002"
TEXT = [
    f"mysql-bin.000057:197-378 {SID}:11 ddl committed events=2 len=181 "
    "2022-11-20T13:52:37.630884+00:00",
    f"mysql-bin.000057:378-651 {SID}:12 dml committed events=2 len=273 "
    "2022-11-20T13:52:38.419905+00:00 a.b +1 ~0 -0",
    f"mysql-bin.000057:651-1283 {SID}:13 dml committed events=2 len=632 "
    "2022-11-20T13:53:33.513328+00:00 a.test_table_3 +1 ~1 -0",
]
JSONL_KEYS = ["file", "start", "end", "gtid", "transaction_length", "events", "kind", "status",
              "commit_ts", "tables"]


def _inspect(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "changestream.cli", "inspect", *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def test_text_has_one_line_per_transaction() -> None:
    result = _inspect(APECLOUD)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == TEXT


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """``inspect FILE | head -1``: the closed pipe ends the command quietly."""
    crc32 = CORPUS / "osheroff/mysql-bin.checksum-crc32"
    result = subprocess.run(
        f"{sys.executable} -m changestream.cli inspect {crc32} | head -1", shell=True,
        capture_output=True, text=True, timeout=60)
    assert len(result.stdout.splitlines()) == 1
    assert result.stderr == ""


def test_jsonl_has_the_documented_keys_and_values(capsys: Any) -> None:
    assert main(["inspect", "--format", "jsonl", str(APECLOUD)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [list(line) for line in lines] == [JSONL_KEYS] * 3
    assert lines[1] == {
        "file": str(APECLOUD), "start": 378, "end": 651, "gtid": f"{SID}:12",
        "transaction_length": 273, "events": 2, "kind": "dml", "status": "committed",
        "commit_ts": "2022-11-20T13:52:38.419905+00:00",
        "tables": {"a.b": {"insert": 1, "update": 0, "delete": 0}},
    }
    assert [(d["start"], d["end"], d["transaction_length"]) for d in lines] == [
        (197, 378, 181), (378, 651, 273), (651, 1283, 632)]


def _truncated(tmp_path: Path) -> Path:
    path = tmp_path / "mysql-bin.000057"
    path.write_bytes(APECLOUD.read_bytes()[:1000])  # ends inside the third transaction
    return path


def _not_a_binlog(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not a binlog\n")
    return path


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty.000001"
    path.write_bytes(b"")
    return path


@pytest.mark.parametrize(("make", "words", "offset"), [
    (_truncated, "file ends inside a TRANSACTION_PAYLOAD event", 730),
    (_not_a_binlog, "not a binlog file: starts with 68656c6c", 0),
    (_empty, "not a binlog file: starts with nothing", 0),
])
@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_unreadable_file_exits_1_with_a_one_line_error(
        tmp_path: Path, make: Any, words: str, offset: int, fmt: str) -> None:
    path = make(tmp_path)
    result = _inspect("--format", fmt, path)
    assert result.returncode == 1
    (error,) = result.stderr.splitlines()
    assert error.startswith("changestream inspect: ") and words in error
    assert error.endswith(f"({path} at offset {offset})")


def test_truncated_file_still_lists_the_transactions_before_the_cut(tmp_path: Path) -> None:
    result = _inspect(_truncated(tmp_path))
    assert result.returncode == 1
    assert result.stdout.splitlines() == TEXT[:2]


def test_missing_file_exits_1_with_a_one_line_error(tmp_path: Path) -> None:
    result = _inspect(tmp_path / "nope.000001")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"changestream inspect: binlog file not found: {tmp_path / 'nope.000001'}"]
