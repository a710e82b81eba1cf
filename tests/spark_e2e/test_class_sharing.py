"""Class-data sharing for the Spark sink's JVM, with real JVMs: the first start writes an
archive when its JVM exits, the next maps it (sinks/spark/jvm/class_sharing.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from changestream.sinks.spark.jvm.class_sharing import DYNAMIC_ARCHIVE_MAGIC

pytestmark = [pytest.mark.spark]

# A new process (a new JVM): start a session with the archives in argv[1], say whether
# the JVM maps an archive from there, and which JVM it was.
START = """
import logging, os, sys
from pathlib import Path
from changestream.sinks.spark.session import start_session
logging.basicConfig(level=logging.WARNING)
folder = Path(sys.argv[1])
options = os.environ.get("TEST_DRIVER_OPTIONS")
conf = {"spark.driver.extraJavaOptions": options} if options else {}
spark = start_session("local[1]", conf, None, "class-sharing-test", class_cache=folder)
pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
maps = Path(f"/proc/{pid}/maps").read_text()
print("RESULT", pid, "mapped" if str(folder) in maps else "not-mapped", flush=True)
spark.stop()
"""


def _start(folder: Path, env: dict[str, str] | None = None,
           cwd: Path | None = None) -> tuple[int, str, str, str]:
    done = subprocess.run([sys.executable, "-c", START, str(folder)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})}, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    _, pid, mapped = line.split()
    return int(pid), mapped, done.stdout, done.stderr


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose archive the first start wrote (its JVM gone: a next start maps it)."""
    folder = tmp_path_factory.mktemp("written") / "jvm"
    first_jvm, mapped, out, _ = _start(folder)
    assert mapped == "not-mapped"
    assert out.splitlines()[-1].startswith("RESULT "), out  # the JVM says nothing on stdout
    [marker] = folder.glob("*.writing")
    assert marker.read_text() == str(first_jvm)
    deadline = time.monotonic() + 300
    while not _gone(first_jvm):  # it writes the archive as it exits
        assert time.monotonic() < deadline, "the first JVM did not exit"
        time.sleep(0.2)
    return folder


def _copy(written: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "jvm"
    shutil.copytree(written, folder)
    return folder


def test_the_first_start_writes_the_archive_and_the_next_maps_it(
        written: Path, tmp_path: Path) -> None:
    folder = _copy(written, tmp_path)
    _, mapped, out, _ = _start(folder)
    assert mapped == "mapped"
    assert out.splitlines()[-1].startswith("RESULT "), out
    [archive] = folder.glob("*.jsa")
    assert archive.read_bytes()[:4] == DYNAMIC_ARCHIVE_MAGIC
    assert sorted(p.name for p in folder.iterdir()) == [archive.name]


@pytest.mark.parametrize("how", ["setting", "environment"])
def test_a_start_with_a_flight_recording_runs_without_sharing(
        written: Path, tmp_path: Path, how: str) -> None:
    """HotSpot 17 crashes on a shared class while a class file load hook is on (a flight
    recording, an agent): such a start must not map the archive."""
    folder = _copy(written, tmp_path)
    recording = f"-XX:StartFlightRecording=filename={tmp_path / 'r.jfr'}"
    env = {"TEST_DRIVER_OPTIONS": recording} if how == "setting" else \
        {"JAVA_TOOL_OPTIONS": recording}
    _, mapped, _, _ = _start(_adopted(folder), env, cwd=tmp_path)
    assert mapped == "not-mapped"
    assert not list(tmp_path.glob("hs_err*"))  # no JVM crashed
    assert [p.suffix for p in folder.iterdir()] == [".jsa"]  # left as it was


def _adopted(folder: Path) -> Path:
    """``folder`` once a start without options has taken its part up (mapped it)."""
    _, mapped, _, _ = _start(folder)
    assert mapped == "mapped"
    return folder


def test_a_jvm_that_exits_while_sharing_is_started_again_without(
        written: Path, tmp_path: Path) -> None:
    """An agent the options do not show (here a recording in an @-file): the JVM crashes on
    the archive; the start comes up without it, and the key's sharing is turned off."""
    folder = _adopted(_copy(written, tmp_path))
    arguments = tmp_path / "java.args"
    arguments.write_text(f"-XX:StartFlightRecording=filename={tmp_path / 'r.jfr'}\n")
    _, mapped, _, err = _start(folder, {"JDK_JAVA_OPTIONS": f"@{arguments}"}, cwd=tmp_path)
    assert mapped == "not-mapped"
    assert "started without it" in err, err[-3000:]
    [off] = folder.iterdir()
    assert off.suffix == ".off" and "exited" in off.read_text()
    _, mapped, _, _ = _start(folder)  # later starts neither map nor write one
    assert mapped == "not-mapped"
    assert [p.suffix for p in folder.iterdir()] == [".off"]


# A new process: an Iceberg sink opened and closed with nothing landed (its start writes
# the archive when it is the first), or, with a class-load log named in argv[3], one more
# table created and appended to. Prints its JVM's pid.
ICEBERG = """
import json, sys
from pathlib import Path
import pyarrow as pa
from changestream.sinks.spark.sink import SparkSink
from changestream.sinks.spark.iceberg.commits import create_table
from changestream.sinks.spark.iceberg.files import ArrowAppender
folder, warehouse, log = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
conf = {"spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={log}"} if log else {}
sink = SparkSink(mode="iceberg", warehouse=warehouse, jvm_class_cache=folder, conf=conf)
sink.open()
spark = sink.spark
print("RESULT", int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()), flush=True)
if log:
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}}]}
    create_table(spark, sink.catalog, "db", "t", json.dumps(schema), {"format-version": "2"})
    ArrowAppender(spark).append(f"{sink.catalog}.db.t",
                                pa.table({"id": pa.array([1], pa.int64())}), {"p": "1"})
sink.close()
"""


def _iceberg(folder: Path, warehouse: Path, log: Path | None = None) -> int:
    done = subprocess.run([sys.executable, "-c", ICEBERG, str(folder), str(warehouse),
                           str(log or "")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    return int(line.split()[1])


def test_an_archive_written_by_a_run_that_landed_nothing_holds_icebergs_commits(
        tmp_path: Path) -> None:
    """The writing JVM rehearses a batch's commits before it exits, and Iceberg's jars are
    on the driver's class path: a later start's first commit maps Iceberg's commit
    classes from the archive instead of reading them from the jars."""
    folder = tmp_path / "jvm"
    writer = _iceberg(folder, tmp_path / "w1")
    deadline = time.monotonic() + 300
    while not _gone(writer):
        assert time.monotonic() < deadline, "the writing JVM did not exit"
        time.sleep(0.2)
    log = tmp_path / "classes.log"
    _iceberg(folder, tmp_path / "w2", log)
    assert [p.suffix for p in folder.iterdir()] == [".jsa"]
    sources = {}
    for line in log.read_text().splitlines():
        parts = line.split(" source: ", 1)
        if len(parts) == 2:
            sources[parts[0].split()[-1]] = parts[1]
    for name in ("org.apache.iceberg.SnapshotProducer", "org.apache.iceberg.MergeAppend",
                 "org.apache.iceberg.ManifestWriter", "org.apache.iceberg.avro.AvroFileAppender",
                 "org.apache.iceberg.shaded.org.apache.avro.file.DataFileWriter"):
        assert name in sources, f"{name} not loaded"
        assert sources[name].startswith("shared objects file"), (name, sources[name])
    from_jars = [n for n, s in sources.items() if n.startswith("org.apache.iceberg.")
                 and "iceberg-spark-runtime" in s]
    assert len(from_jars) < 50, from_jars[:20]
