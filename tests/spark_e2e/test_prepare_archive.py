"""The install script's step that has the driver JVM's class-data archive written before the
first Spark run (sinks/spark/jvm/prepare.py), with real JVMs and a cache folder of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from changestream.sinks.spark.jvm.class_sharing import DYNAMIC_ARCHIVE_MAGIC

pytestmark = [pytest.mark.spark]


def _prepare(cache: Path, env: dict[str, str] | None = None) -> str:
    # Read to the end, as the install script does: that waits for the JVM writing it.
    done = subprocess.run([sys.executable, "-m", "changestream.sinks.spark.jvm.prepare"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache), **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("changestream:")]
    return line


def test_the_archive_is_written_once_and_then_found(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    folder = cache / "changestream" / "jvm"
    assert "being written" in _prepare(cache)
    [part] = folder.glob("*.jsa.part")  # whole: its JVM has exited
    assert part.read_bytes()[:4] == DYNAMIC_ARCHIVE_MAGIC
    assert "there already" in _prepare(cache)
    [archive] = folder.glob("*.jsa")  # taken up by the second start, which mapped it
    assert archive.stem == part.name.removesuffix(".jsa.part")


def test_a_machine_where_spark_cannot_start_is_told_and_not_failed(tmp_path: Path) -> None:
    line = _prepare(tmp_path / "cache", {"JAVA_HOME": str(tmp_path / "no-java"),
                                         "PATH": str(Path(sys.executable).parent)})
    assert "was not written" in line and "the first Spark run writes it" in line
