"""Class-data-sharing archives for the Spark sink's JVM: which options a start gets, which
start writes the archive, and when a written archive is taken up
(sinks/spark/jvm/class_sharing.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from changestream.devserver.process import alive, running
from changestream.sinks.spark.jvm.class_sharing import (
    DYNAMIC_ARCHIVE_MAGIC,
    OPTION_VARIABLES,
    ORPHAN_SECONDS,
    QUIET,
    ClassSharing,
    hooked_options,
)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _written(folder: Path, key: str, writer: int | str, whole: bool = True) -> Path:
    """What a writer leaves: its marker and (when its JVM dumped) the part."""
    (folder / f"{key}.writing").write_text(str(writer))
    part = folder / f"{key}.jsa.part"
    part.write_bytes((DYNAMIC_ARCHIVE_MAGIC if whole else b"\0\0\0\0") + b"classes")
    return part


def test_the_first_start_is_the_writer_and_names_its_jvm(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    part = tmp_path / f"{sharing.key}.jsa.part"
    assert sharing.options() == f"-XX:ArchiveClassesAtExit={part} {QUIET}"
    marker = tmp_path / f"{sharing.key}.writing"
    assert marker.read_text() == str(os.getpid())
    sharing.started(4242)
    assert marker.read_text() == "4242"
    assert sorted(p.name for p in tmp_path.iterdir()) == [marker.name]


def test_a_second_start_while_the_first_writes_runs_without(tmp_path: Path) -> None:
    first, second = ClassSharing(tmp_path, []), ClassSharing(tmp_path, [])
    assert first.options().startswith("-XX:ArchiveClassesAtExit=")
    first.started(os.getpid())  # its JVM: alive
    assert second.options() == ""
    assert second.marker is None


def test_a_finished_archive_is_taken_up_and_used(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    _written(tmp_path, sharing.key, _dead_pid())
    archive = tmp_path / f"{sharing.key}.jsa"
    assert sharing.options() == f"-XX:SharedArchiveFile={archive} {QUIET}"
    assert archive.read_bytes() == DYNAMIC_ARCHIVE_MAGIC + b"classes"
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]
    sharing.started(4242)  # a start that maps an archive writes nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]


def _zombie() -> subprocess.Popen[bytes]:
    """A child that has exited and is not reaped yet (as an orphaned JVM is until the init
    process reaps it: 1.75 s on this project's machine)."""
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return child


def test_an_archive_whose_jvm_exited_unreaped_is_taken_up(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    child = _zombie()
    try:
        _written(tmp_path, sharing.key, child.pid)
        archive = tmp_path / f"{sharing.key}.jsa"
        assert sharing.options() == f"-XX:SharedArchiveFile={archive} {QUIET}"
        assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]
    finally:
        child.wait()


def test_running_counts_a_zombie_as_exited() -> None:
    child = _zombie()
    try:
        assert alive(child.pid) and not running(child.pid)
    finally:
        child.wait()
    assert running(os.getpid())
    assert not running(_dead_pid())


def test_an_archive_cut_short_is_dropped_and_written_again(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    _written(tmp_path, sharing.key, _dead_pid(), whole=False)
    assert sharing.options().startswith("-XX:ArchiveClassesAtExit=")
    assert not (tmp_path / f"{sharing.key}.jsa").exists()
    assert not (tmp_path / f"{sharing.key}.jsa.part").exists()
    assert (tmp_path / f"{sharing.key}.writing").read_text() == str(os.getpid())


def test_a_writer_that_died_before_its_jvm_dumped_is_replaced(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    (tmp_path / f"{sharing.key}.writing").write_text(str(_dead_pid()))
    assert sharing.options().startswith("-XX:ArchiveClassesAtExit=")


def test_a_marker_without_a_pid_waits_then_is_taken_as_left_over(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    marker = tmp_path / f"{sharing.key}.writing"
    marker.write_text("")  # its writer is between making it and writing its pid
    assert sharing.options() == ""
    old = time.time() - ORPHAN_SECONDS - 5
    os.utime(marker, (old, old))
    assert sharing.options().startswith("-XX:ArchiveClassesAtExit=")


def test_the_key_follows_the_jars_and_the_class_path(tmp_path: Path) -> None:
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"one")
    first = ClassSharing(tmp_path, [jar]).key
    assert ClassSharing(tmp_path, [jar]).key == first
    assert ClassSharing(tmp_path, [jar], "/other.jar").key != first
    jar.write_bytes(b"other size")
    assert ClassSharing(tmp_path, [jar]).key != first


def test_a_folder_that_cannot_be_made_means_no_sharing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert ClassSharing(blocker / "jvm", []).options() == ""


def test_the_sink_option_names_a_folder_the_default_or_none() -> None:
    from changestream.sinks.spark.jvm.class_sharing import default_folder
    from changestream.sinks.spark.options import class_cache as _class_cache

    for value in (None, True, "true", " ON "):
        assert _class_cache(value) == default_folder()
    for value in (False, "false", "off", "0", ""):
        assert _class_cache(value) is None
    assert _class_cache("~/jvm-archives") == Path.home() / "jvm-archives"


@pytest.fixture
def no_java_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No JVM options from this machine's environment; Spark's conf folder is tmp_path."""
    for name in OPTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("option", ["-javaagent:/opt/apm/agent.jar", "-agentlib:hprof",
                                    "-agentpath:/opt/x/libagent.so",
                                    "-XX:StartFlightRecording=filename=r.jfr"])
def test_an_agent_or_a_recording_in_any_option_source_is_found(
        no_java_options: Path, monkeypatch: pytest.MonkeyPatch, option: str) -> None:
    assert hooked_options({"spark.driver.extraJavaOptions": "-Xmx2g -Dx=1"}) is None
    assert hooked_options({"spark.driver.extraJavaOptions": f"-Xmx2g {option}"}) == \
        "spark.driver.extraJavaOptions"
    assert hooked_options({"spark.driver.defaultJavaOptions": option}) == \
        "spark.driver.defaultJavaOptions"
    for name in OPTION_VARIABLES:
        monkeypatch.setenv(name, f"-Dy=2 {option}")
        assert hooked_options({}) == name
        monkeypatch.delenv(name)
    defaults = no_java_options / "spark-defaults.conf"
    defaults.write_text(f"spark.master local[2]\nspark.driver.extraJavaOptions {option}\n")
    assert hooked_options({}) == str(defaults)
    defaults.write_text("spark.master local[2]\n")
    assert hooked_options({}) is None


def test_spark_home_conf_is_read_without_spark_conf_dir(
        no_java_options: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONF_DIR")
    monkeypatch.setenv("SPARK_HOME", str(no_java_options))
    (no_java_options / "conf").mkdir()
    (no_java_options / "conf" / "spark-defaults.conf").write_text(
        "spark.driver.extraJavaOptions -javaagent:/a.jar\n")
    assert hooked_options({}) == str(no_java_options / "conf" / "spark-defaults.conf")


def test_a_start_that_failed_with_sharing_turns_the_key_off(tmp_path: Path) -> None:
    writer = ClassSharing(tmp_path, [])
    assert writer.options().startswith("-XX:ArchiveClassesAtExit=")
    writer.failed("the driver JVM exited")
    off = tmp_path / f"{writer.key}.off"
    assert sorted(p.name for p in tmp_path.iterdir()) == [off.name]  # no marker left
    assert "exited" in off.read_text()
    assert ClassSharing(tmp_path, []).options() == ""  # later starts: none
    # A mapped archive that failed is dropped too, and a part left for it.
    other = tmp_path / "other"
    other.mkdir()
    mapped = ClassSharing(other, [])
    _written(other, mapped.key, _dead_pid())
    assert mapped.options().startswith("-XX:SharedArchiveFile=")
    mapped.failed("x")
    assert sorted(p.name for p in other.iterdir()) == [f"{mapped.key}.off"]
    assert ClassSharing(other, []).options() == ""


def _aged(path: Path, seconds: float) -> Path:
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def _archive(folder: Path, key: str, age: float) -> Path:
    archive = folder / f"{key}.jsa"
    archive.write_bytes(DYNAMIC_ARCHIVE_MAGIC + b"classes")
    return _aged(archive, age)


def test_a_start_keeps_the_two_last_used_archives_of_other_keys(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    mine = _archive(tmp_path, sharing.key, 30 * 86400)  # old, but this start's
    kept = [_archive(tmp_path, f"other{n}", (n + 2) * 86400) for n in range(2)]
    dropped = [_archive(tmp_path, f"other{n}", (n + 2) * 86400) for n in range(2, 5)]
    assert sharing.options() == f"-XX:SharedArchiveFile={mine} {QUIET}"
    assert all(p.exists() for p in [mine, *kept])
    assert not any(p.exists() for p in dropped)
    assert time.time() - mine.stat().st_mtime < 60  # used: now the last to go


def test_archives_used_in_the_last_hour_are_kept_whatever_their_number(
        tmp_path: Path) -> None:
    recent = [_archive(tmp_path, f"recent{n}", 60 * (n + 1)) for n in range(4)]
    ClassSharing(tmp_path, []).options()  # a start may be about to map any of them
    assert all(p.exists() for p in recent)


def test_a_start_takes_up_or_drops_the_parts_other_keys_left(tmp_path: Path) -> None:
    sharing = ClassSharing(tmp_path, [])
    _written(tmp_path, "done", _dead_pid())
    _written(tmp_path, "cut", _dead_pid(), whole=False)
    live = _written(tmp_path, "live", os.getpid())
    orphan, young = tmp_path / "orphan.jsa.part", tmp_path / "young.jsa.part"
    for part in (orphan, young):
        part.write_bytes(b"x")
    _aged(orphan, ORPHAN_SECONDS + 5)  # no marker, and older than a marker's making
    sharing.options()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "done.jsa" in names and "done.writing" not in names
    assert not any(n.startswith("cut.") for n in names)
    assert live.exists() and (tmp_path / "live.writing").exists()
    assert not orphan.exists() and young.exists()


def test_pruning_reports_what_it_removed(tmp_path: Path) -> None:
    from changestream.sinks.spark.jvm.class_sharing import KEEP_OTHER_ARCHIVES, prune

    for n in range(KEEP_OTHER_ARCHIVES + 2):
        _archive(tmp_path, f"k{n}", 86400 * (n + 1))
    assert sorted(prune(tmp_path, "mine")) == [(f"k{n}.jsa", 11) for n in
                                               range(KEEP_OTHER_ARCHIVES,
                                                     KEEP_OTHER_ARCHIVES + 2)]
    assert prune(tmp_path, "mine") == []
