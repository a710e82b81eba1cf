"""Class-data-sharing archives for the Spark sink's JVM: which options a start gets, and
when a written archive is taken up (sinks/spark/class_sharing.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from changestream.sinks.spark.class_sharing import (
    DYNAMIC_ARCHIVE_MAGIC,
    ORPHAN_SECONDS,
    QUIET,
    ClassSharing,
)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _part(folder: Path, key: str, writer: int, jvm: int | None, whole: bool = True) -> Path:
    part = folder / f"{key}.{writer}.jsa.part"
    part.write_bytes((DYNAMIC_ARCHIVE_MAGIC if whole else b"\0\0\0\0") + b"classes")
    if jvm is not None:
        part.with_suffix(".pid").write_text(str(jvm))
    return part


def test_a_first_start_writes_a_part_of_its_own_and_notes_its_jvm(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    options = sharing.options()
    part = tmp_path / f"{sharing.key}.{os.getpid()}.jsa.part"
    assert options == f"-XX:ArchiveClassesAtExit={part} {QUIET}"
    sharing.started(4242)
    assert part.with_suffix(".pid").read_text() == "4242"


def test_a_finished_part_becomes_the_archive_and_is_used(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    older = _part(tmp_path, sharing.key, 11, _dead_pid())
    os.utime(older, (time.time() - 60, time.time() - 60))
    newer = _part(tmp_path, sharing.key, 12, _dead_pid())
    archive = tmp_path / f"{sharing.key}.jsa"
    assert sharing.options() == f"-XX:SharedArchiveFile={archive} {QUIET}"
    assert archive.read_bytes() == DYNAMIC_ARCHIVE_MAGIC + b"classes"
    assert not older.exists() and not newer.exists()
    assert not list(tmp_path.glob("*.pid"))
    sharing.started(4242)  # a start that uses an archive writes nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]


def test_a_part_whose_jvm_still_runs_is_left_and_no_second_one_is_started(
        tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    writing = _part(tmp_path, sharing.key, 11, os.getpid())  # alive: this process
    assert sharing.options() == ""
    assert writing.exists() and not (tmp_path / f"{sharing.key}.jsa").exists()


def test_a_part_cut_short_is_removed_not_used(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    cut = _part(tmp_path, sharing.key, 11, _dead_pid(), whole=False)
    assert sharing.options().startswith("-XX:ArchiveClassesAtExit=")  # made again
    assert not cut.exists() and not (tmp_path / f"{sharing.key}.jsa").exists()


def test_a_part_without_its_jvm_waits_then_is_removed_as_left_over(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    orphan = _part(tmp_path, sharing.key, 11, None)
    assert sharing.options() == ""  # its JVM may not have said who it is yet
    old = time.time() - ORPHAN_SECONDS - 5
    os.utime(orphan, (old, old))
    assert sharing.options().startswith("-XX:ArchiveClassesAtExit=")
    assert not orphan.exists()


def test_the_key_follows_the_jars(tmp_path: Path) -> None:
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"one")
    first = ClassSharing(tmp_path, [jar]).key
    assert ClassSharing(tmp_path, [jar]).key == first
    jar.write_bytes(b"other size")
    assert ClassSharing(tmp_path, [jar]).key != first


def test_a_folder_that_cannot_be_made_means_no_sharing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert ClassSharing(blocker / "jvm", []).options() == ""
