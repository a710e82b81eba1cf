"""Class-data sharing for the Spark sink's JVM, with real JVMs: the first start writes an
archive when its JVM exits, the next maps it (sinks/spark/class_sharing.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from changestream.sinks.spark.class_sharing import DYNAMIC_ARCHIVE_MAGIC

pytestmark = [pytest.mark.spark]

# A new process (a new JVM): start a session with the archives in argv[1], say whether
# the JVM maps an archive from there, and which JVM it was.
START = """
import sys
from pathlib import Path
from changestream.sinks.spark.session import start_session
folder = Path(sys.argv[1])
spark = start_session("local[1]", {}, None, "class-sharing-test", class_cache=folder)
pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
maps = Path(f"/proc/{pid}/maps").read_text()
print("RESULT", pid, "mapped" if str(folder) in maps else "not-mapped", flush=True)
spark.stop()
"""


def _start(folder: Path) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-c", START, str(folder)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    _, pid, mapped = line.split()
    return int(pid), mapped, done.stdout


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_first_start_writes_the_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    folder = tmp_path / "jvm"
    first_jvm, mapped, out = _start(folder)
    assert mapped == "not-mapped"
    assert out.splitlines()[-1].startswith("RESULT "), out  # the JVM says nothing on stdout
    [marker] = folder.glob("*.writing")
    assert marker.read_text() == str(first_jvm)
    deadline = time.monotonic() + 300
    while not _gone(first_jvm):  # it writes the archive as it exits
        assert time.monotonic() < deadline, "the first JVM did not exit"
        time.sleep(0.2)
    _, mapped, out = _start(folder)
    assert mapped == "mapped"
    assert out.splitlines()[-1].startswith("RESULT "), out
    [archive] = folder.glob("*.jsa")
    assert archive.read_bytes()[:4] == DYNAMIC_ARCHIVE_MAGIC
    assert sorted(p.name for p in folder.iterdir()) == [archive.name]
