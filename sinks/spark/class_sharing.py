"""Class-data sharing for the driver JVM the Spark sink starts.

A new JVM loads and verifies some ten thousand classes of Spark's before a session is up,
and more at its first Iceberg commits: most of a cold ``changestream run``'s start. The
JVM can map them from an archive instead (JDK 13+: a dynamic CDS archive, written when a
JVM that ran with ``-XX:ArchiveClassesAtExit`` exits, used with
``-XX:SharedArchiveFile``). Measured here (2 CPUs, a cold ``changestream run --sink
spark:iceberg`` of 300,000 inserts): 6.6-7.1 s in all without an archive, 4.4-5.2 s with
one; the sink's open 4.4 s -> 2.5-2.9 s. The run that writes the archive (~100 MB) takes
some seconds longer when its JVM exits.

The archives live in a folder (the sink's ``jvm_class_cache`` option; default
``$XDG_CACHE_HOME/changestream/jvm``, else ``~/.cache/changestream/jvm``), one per key: the
``java`` program and Spark's and the sink's jars (an archive only maps into a JVM of the
same build and class path; a JVM that cannot use one ignores it silently). A JVM writes
its archive under a name of its own (``<key>.<pid>.jsa.part``, its pid beside it in
``.pid``); a later start adopts it as ``<key>.jsa`` once that JVM has exited, so no
archive is read while it is written and two starts never write one file. A part whose JVM
is still running means another archive is being made: that start runs without one.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import time
from pathlib import Path

from changestream.devserver.process import alive

logger = logging.getLogger("changestream.sinks.spark")
#: A part without its JVM's pid this old is left over from a start that failed.
ORPHAN_SECONDS = 600
#: The JVM says on stdout which classes it leaves out of an archive (Hadoop's old ones):
#: not for changestream's users.
QUIET = "-Xlog:cds*=off"
#: The first bytes of a dynamic CDS archive (HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC).
DYNAMIC_ARCHIVE_MAGIC = (0xF00BABA8).to_bytes(4, "little")


def default_folder() -> Path:
    """Where the archives go unless the sink's ``jvm_class_cache`` option says."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "changestream" / "jvm"


def archive_key(jars: list[Path], class_path: str = "") -> str:
    """What an archive depends on: the ``java`` program Spark starts, the jars on the
    driver's class path (Spark's own and ``jars``, by name, size and time) and the class
    path the driver is given (an archive maps only into a JVM with the same one)."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else shutil.which("java")
    parts: list[str] = []
    spark_jars = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "jars"
    paths = [Path(java).resolve()] if java else []
    paths += sorted(spark_jars.glob("*.jar")) + [Path(j) for j in jars]
    for path in paths:
        with contextlib.suppress(OSError):
            info = path.stat()
            parts.append(f"{path.name}\t{info.st_size}\t{int(info.st_mtime)}")
    parts.append(class_path)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _adopt(folder: Path, key: str) -> bool:
    """Take the newest finished part of ``key`` as its archive (removing the others that
    are finished); whether a part is still being written."""
    writing = False
    finished: list[Path] = []
    for part in folder.glob(f"{key}.*.jsa.part"):
        pid_file = part.with_suffix(".pid")
        try:
            pid: int | None = int(pid_file.read_text())
        except (OSError, ValueError):  # its JVM has not said who it is yet, or never will
            pid = None
        if pid is not None and alive(pid):
            writing = True
        elif pid is not None:
            finished.append(part)
        elif time.time() - part.stat().st_mtime > ORPHAN_SECONDS:
            part.unlink(missing_ok=True)  # its start failed before its JVM was known
        else:
            writing = True
    finished.sort(key=lambda p: p.stat().st_mtime)
    for part in finished:
        if part is finished[-1] and _whole(part):
            os.replace(part, folder / f"{key}.jsa")
        else:
            part.unlink(missing_ok=True)
        part.with_suffix(".pid").unlink(missing_ok=True)
    return writing


def _whole(archive: Path) -> bool:
    """Whether ``archive`` was written to its end: the JVM writes a dynamic archive's
    header (its magic first) last, so one cut short (its JVM killed) starts with zeros."""
    try:
        with archive.open("rb") as f:
            return f.read(4) == DYNAMIC_ARCHIVE_MAGIC
    except OSError:
        return False


class ClassSharing:
    """The JVM options for one start (:meth:`options`), and what the start must do once
    its JVM is up (:meth:`started`)."""

    def __init__(self, folder: Path, jars: list[Path], class_path: str = ""):
        self.folder = folder
        self.key = archive_key(jars, class_path)
        self.part: Path | None = None

    def options(self) -> str:
        """``-XX:SharedArchiveFile=...`` when the archive exists, ``-XX:ArchiveClassesAtExit
        =...`` when none is being made, else nothing."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            writing = _adopt(self.folder, self.key)
        except OSError as exc:
            logger.debug("spark sink: no class-data sharing (%s): %s", self.folder, exc)
            return ""
        archive = self.folder / f"{self.key}.jsa"
        if archive.exists():
            return f"-XX:SharedArchiveFile={archive} {QUIET}"
        if writing:
            return ""
        self.part = self.folder / f"{self.key}.{os.getpid()}.jsa.part"
        return f"-XX:ArchiveClassesAtExit={self.part} {QUIET}"

    def started(self, jvm_pid: int) -> None:
        """Note which JVM writes the part (a later start adopts it once that JVM is gone)."""
        if self.part is not None:
            with contextlib.suppress(OSError):
                self.part.with_suffix(".pid").write_text(str(jvm_pid))
