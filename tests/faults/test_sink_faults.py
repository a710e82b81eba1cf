"""The sink's side fails: its disk fills up, its target is read-only, the position file is
garbage. Each ends with a clear error and its exit code, no half record in the file and the
position not moved past what was written; once the fault is gone a restart delivers the
rest exactly once."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.faults.conftest import Writer, router
from tests.faults.ledger import committed, count
from tests.servers import skip_or_fail

pytestmark = [pytest.mark.faults, pytest.mark.integration]

ONE_RETRY = {"CHANGESTREAM_BATCH_RETRIES": "1", "CHANGESTREAM_BATCH_RETRY_BACKOFF_SECONDS": "0.1"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 128 KB tmpfs (needs root, as the README's test command runs)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        skip_or_fail(f"cannot mount a small tmpfs for the disk-full test: {mounted.stderr}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True)


def _whole_records(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "a half record was left in the file"
    return [orjson.loads(line) for line in data.splitlines()]


def test_a_full_disk_stops_with_exit_4_and_a_restart_goes_on(
        private_mariadb: Any, small_disk: Path, tmp_path: Path) -> None:
    server = private_mariadb
    start = server.binlog_position()
    Writer(server, 800, 1).run()  # far more than 128 KB of records
    out, position = small_disk / "out.jsonl", tmp_path / "position.json"
    # Without decode workers, whose runs of up to 5,000 records would not fit at all.
    process = router(server.url, out, position, "--until", "caught-up",
                     env={**ONE_RETRY, "CHANGESTREAM_SOURCE_DECODE_WORKERS": "0"})
    _, err = process.communicate(timeout=120)
    stderr = err.decode()
    assert process.returncode == 4, stderr
    assert "No space left on device" in stderr and "Traceback" not in stderr, stderr
    written = _whole_records(out)
    saved = orjson.loads(position.read_bytes())
    assert saved["sink"]["length"] <= out.stat().st_size  # never past what is written
    assert written, "some batches fit"
    _remount(small_disk, "size=64m")
    again = router(server.url, out, position, "--until", "caught-up")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err.decode()
    ledger = count(committed(server.binlog_files(), "faults", start), out, "faults")
    assert ledger.exactly_once, ledger


def test_a_read_only_target_is_a_clear_error_and_moves_nothing(
        private_mariadb: Any, small_disk: Path, tmp_path: Path) -> None:
    server = private_mariadb
    Writer(server, 20, 0.2).run()
    out, position = small_disk / "out.jsonl", tmp_path / "position.json"
    first = router(server.url, out, position, "--until", "caught-up")
    assert first.wait(120) == 0
    saved, before = position.read_bytes(), out.read_bytes()
    Writer(server, 20, 0.2, seed=2, first_id=10_000).run()
    _remount(small_disk, "ro")
    process = router(server.url, out, position, "--until", "caught-up", env=ONE_RETRY)
    _, err = process.communicate(timeout=120)
    stderr = err.decode()
    assert process.returncode == 4, stderr
    assert "Read-only file system" in stderr and "Traceback" not in stderr, stderr
    assert position.read_bytes() == saved and out.read_bytes() == before


@pytest.mark.parametrize("garbage", [b"", b"not json", b"[1, 2]", b'{"file": 3}'])
def test_a_garbage_position_file_is_refused_naming_it(private_mariadb: Any, tmp_path: Path,
                                                      garbage: bytes) -> None:
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    position.write_bytes(garbage)
    process = router(private_mariadb.url, out, position, "--until", "caught-up")
    _, err = process.communicate(timeout=60)
    stderr = err.decode()
    assert process.returncode == 2, stderr
    assert str(position) in stderr and "Traceback" not in stderr, stderr
    assert position.read_bytes() == garbage
