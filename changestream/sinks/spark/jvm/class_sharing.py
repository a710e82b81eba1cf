"""Class-data sharing for the driver JVM the Spark sink starts.

Most of a cold ``changestream run``'s start is the new JVM loading Spark's classes (and
Iceberg's at its first commits); a dynamic CDS archive (JDK 13+) maps them instead. There is
one archive per key (the ``java`` program and the jars) in the ``jvm_class_cache`` folder,
written by one start, the one that creates ``<key>.writing``: its JVM writes
``<key>.jsa.part`` as it exits, and a later start takes that up as ``<key>.jsa`` once the JVM
is gone and the header is there. A class file load hook (a Java agent, a flight recording)
crashes HotSpot 17 mapping an archive: such starts run without sharing (:func:`hooked_options`,
:meth:`ClassSharing.failed`). docs/internals.md and docs/performance.md have the details."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import time
from pathlib import Path

from changestream.cache import cache_folder
from changestream.devserver.process import running

logger = logging.getLogger("changestream.sinks.spark")
#: A part without its JVM's pid this old is left over from a start that failed.
ORPHAN_SECONDS = 600
#: Archives of other keys kept beside the one a start uses: the most recently used ones
#: (another Java's, another install's). Each install, upgrade and Java has a key of its
#: own and an archive of 100-180 MB, so older ones are removed at a start.
KEEP_OTHER_ARCHIVES = 2
#: An archive used or written this recently is kept whatever the count (a start may be
#: about to map it).
RECENT_SECONDS = 3600
#: The JVM says on stdout which classes it leaves out of an archive (Hadoop's old ones):
#: not for changestream's users.
QUIET = "-Xlog:cds*=off"
#: The first bytes of a dynamic CDS archive (HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC).
DYNAMIC_ARCHIVE_MAGIC = (0xF00BABA8).to_bytes(4, "little")
#: JVM options that turn a class file load hook on (see the module docstring).
HOOKS = ("-javaagent", "-agentlib", "-agentpath", "StartFlightRecording")
#: Where a driver JVM's options can come from besides the session's settings.
OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS",
                    "SPARK_SUBMIT_OPTS", "PYSPARK_SUBMIT_ARGS")
DRIVER_OPTIONS = ("spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions")


# HotSpot 17 (17.0.15 when found) crashes (SIGSEGV in check_shared_class_file_load_hook,
# JDK-8325536's kind) when a dynamic archive is mapped while a class file load hook is on:
# a Java agent (-javaagent, -agentlib, -agentpath: most APM agents) or a flight recording
# started with the JVM (-XX:StartFlightRecording). A start whose driver options name one
# runs without sharing; a start whose JVM exits while it shares is retried without, and
# the key turned off (ClassSharing.failed). Starts while the writer lives run without an
# archive.
def hooked_options(settings: dict[str, object]) -> str | None:
    """Where the driver JVM's options turn a class file load hook on (a setting, an
    environment variable, Spark's defaults file), or ``None`` (see
    :func:`where_options_name`)."""
    return where_options_name(settings, HOOKS)


def where_options_name(settings: dict[str, object], markers: tuple[str, ...]) -> str | None:
    """Where the driver JVM's options name one of ``markers`` (a setting, an environment
    variable, Spark's defaults file), or ``None``: the session's driver options, the
    variables the ``java`` launcher and Spark's scripts read, and ``spark-defaults.conf``
    (read whole: a line there may name one)."""
    sources = [(key, str(settings.get(key, ""))) for key in DRIVER_OPTIONS]
    sources += [(name, os.environ.get(name, "")) for name in OPTION_VARIABLES]
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        str(Path(os.environ["SPARK_HOME"], "conf")) if os.environ.get("SPARK_HOME") else None)
    if conf_dir:
        with contextlib.suppress(OSError):
            defaults = Path(conf_dir, "spark-defaults.conf")
            sources.append((str(defaults), defaults.read_text(errors="replace")))
    for where, text in sources:
        if any(marker in text for marker in markers):
            return where
    return None


def default_folder() -> Path:
    """Where the archives go unless the sink's ``jvm_class_cache`` option says."""
    return cache_folder("jvm")


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
    """Take up the archive of ``key`` its writer left, when that writer is gone (a part
    cut short is dropped); whether one is being written now."""
    marker = folder / f"{key}.writing"
    try:
        text = marker.read_text()
        age = time.time() - marker.stat().st_mtime
    except OSError:
        return False  # no writer
    try:
        pid: int | None = int(text)
    except ValueError:  # its writer is between creating it and saying who it is
        pid = None
    if (pid is not None and running(pid)) or (pid is None and age < ORPHAN_SECONDS):
        return True
    part = folder / f"{key}.jsa.part"
    if _whole(part):
        with contextlib.suppress(OSError):  # another start took it up first
            os.replace(part, folder / f"{key}.jsa")
    else:
        part.unlink(missing_ok=True)
    marker.unlink(missing_ok=True)
    return False


def prune(folder: Path, keep: str) -> list[tuple[str, int]]:
    """Tidy the archives' folder at a start whose key is ``keep``: the parts of other keys
    whose writers are gone are taken up or dropped (a part without its marker once it is
    :data:`ORPHAN_SECONDS` old), and of the other keys' archives only the
    :data:`KEEP_OTHER_ARCHIVES` most recently used stay, besides any used in the last
    :data:`RECENT_SECONDS`. Returns the files removed: each name and size."""
    removed: list[tuple[str, int]] = []
    now = time.time()

    def remove(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            size = path.stat().st_size
            path.unlink()
            removed.append((path.name, size))

    for marker in folder.glob("*.writing"):
        key = marker.name.removesuffix(".writing")
        if key != keep:
            part = folder / f"{key}.jsa.part"
            size = part.stat().st_size if part.exists() else None
            _adopt(folder, key)
            if size is not None and not part.exists() and not (folder / f"{key}.jsa").exists():
                removed.append((part.name, size))  # cut short: dropped
    for part in folder.glob("*.jsa.part"):
        key = part.name.removesuffix(".jsa.part")
        if key != keep and not (folder / f"{key}.writing").exists() \
                and now - part.stat().st_mtime > ORPHAN_SECONDS:
            remove(part)
    others = sorted((p for p in folder.glob("*.jsa") if p.stem != keep),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for archive in others[KEEP_OTHER_ARCHIVES:]:
        if now - archive.stat().st_mtime > RECENT_SECONDS:
            remove(archive)
    return removed


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
        self.marker: Path | None = None  # this start writes the archive

    def options(self) -> str:
        """``-XX:SharedArchiveFile=...`` when the archive exists, ``-XX:ArchiveClassesAtExit
        =...`` when this start is the one to write it, else nothing."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._prune()
            if (self.folder / f"{self.key}.off").exists():
                return ""
            writing = _adopt(self.folder, self.key)
            archive = self.folder / f"{self.key}.jsa"
            if archive.exists():
                with contextlib.suppress(OSError):  # used now: the last to be pruned
                    os.utime(archive)
                return f"-XX:SharedArchiveFile={archive} {QUIET}"
            if writing:
                return ""
            marker = self.folder / f"{self.key}.writing"
            # One writer: the start that makes the marker (no other start writes the
            # archive while its pid is alive).
            descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return ""
        except OSError as exc:
            logger.debug("spark sink: no class-data sharing (%s): %s", self.folder, exc)
            return ""
        with os.fdopen(descriptor, "w") as f:
            f.write(str(os.getpid()))
        self.marker = marker
        part = self.folder / f"{self.key}.jsa.part"
        part.unlink(missing_ok=True)
        return f"-XX:ArchiveClassesAtExit={part} {QUIET}"

    def _prune(self) -> None:
        try:
            removed = prune(self.folder, self.key)
        except OSError as exc:  # a tidy-up: the start goes on
            logger.debug("spark sink: tidying the class archives in %s: %s", self.folder, exc)
            return
        if removed:
            logger.info("spark sink: removed %d old class-data archive file(s), %.1f MB, "
                        "from %s", len(removed), sum(size for _, size in removed) / 1e6,
                        self.folder)
            logger.debug("spark sink: the class-data archive files removed: %s",
                          ", ".join(sorted(name for name, _ in removed)))

    def failed(self, reason: str) -> None:
        """This start's JVM exited while it shared (mapped or wrote the archive) and the
        same start without sharing came up: the key's archive is dropped and its sharing
        turned off (``<key>.off`` says why; delete it to try again)."""
        with contextlib.suppress(OSError):
            (self.folder / f"{self.key}.off").write_text(reason + "\n")
        for name in (f"{self.key}.jsa", f"{self.key}.jsa.part"):
            with contextlib.suppress(OSError):
                (self.folder / name).unlink()
        if self.marker is not None:
            self.marker.unlink(missing_ok=True)
            self.marker = None

    def started(self, jvm_pid: int) -> None:
        """Name the JVM that writes the archive as it exits (a later start takes it up once
        that JVM is gone)."""
        if self.marker is not None:
            with contextlib.suppress(OSError):
                staged = self.marker.with_name(f"{self.marker.name}.{os.getpid()}")
                staged.write_text(str(jvm_pid))
                os.replace(staged, self.marker)
