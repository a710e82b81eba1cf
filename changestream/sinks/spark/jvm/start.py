"""Starting the sink's Spark session: embedded local Spark by default, quiet on the
console, with the driver JVM's class-data sharing."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changestream.model.errors import SinkError

from .class_sharing import ClassSharing, hooked_options
from .compiler import compiler_options
from .local_files import CLASS_PATH, local_files_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("changestream.sinks.spark")

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


QUIET_LOG4J2 = """\
# Written by changestream: Spark's own log lines below ERROR stay out of the router's
# stderr (run with -v to see them). The root level stays WARN, the level PySpark's shell
# start wants, or Spark announces "Setting default log level" on stderr; the appender
# lets only errors through.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = error
# A compaction refused because the router's commits deleted from its files meanwhile:
# maintain tries it again and says so in a line of its own (a stack trace each time here).
logger.rewrite.name = org.apache.iceberg.actions.RewriteDataFilesCommitManager
logger.rewrite.level = off
"""


def quiet_log4j2() -> Path:
    """A log4j2 configuration that lets only Spark's errors through (written once)."""
    path = Path(tempfile.gettempdir()) / f"changestream-log4j2-quiet-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != QUIET_LOG4J2:
        staged = path.with_name(f"{path.name}.{os.getpid()}")
        staged.write_text(QUIET_LOG4J2)
        staged.replace(path)
    return path


def quiet_conf(conf: Mapping[str, Any]) -> dict[str, str]:
    """Settings that keep Spark's progress bars and INFO/WARN lines off the console;
    what ``conf`` sets itself wins (its driver Java options are kept, ours appended)."""
    options = str(conf.get("spark.driver.extraJavaOptions", ""))
    if "log4j2.configurationFile" not in options and "log4j.configuration" not in options:
        options = f"{options} -Dlog4j2.configurationFile=file:{quiet_log4j2()}".strip()
    return {"spark.ui.showConsoleProgress": str(conf.get("spark.ui.showConsoleProgress",
                                                         "false")),
            "spark.driver.extraJavaOptions": options}


def start_session(master: str | None = None, conf: Mapping[str, Any] | None = None,
                  jars: list[Path] | None = None, app_name: str = "changestream",
                  quiet: bool | None = None, class_cache: Path | None = None) -> Any:
    """A new Spark session: ``master`` (default ``local[N]``, N = CPUs), ``conf`` passed
    through, ``jars`` on its class path (and Iceberg's SQL extensions when given). On a
    local master, ``file:`` paths go through :mod:`.local_files`' file system unless
    ``conf`` names one (``spark.hadoop.fs.file.impl``).
    ``quiet`` (default: unless this module's logger shows INFO, as ``-v`` makes it)
    keeps Spark's progress bars and its INFO/WARN lines out of stderr. ``class_cache``: a
    folder of class-data-sharing archives for the driver's JVM (:mod:`.class_sharing`),
    used when this call starts the process's JVM."""
    if quiet is None:
        quiet = not logger.isEnabledFor(logging.INFO)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python tasks (a backfill's decoding) need changestream and its dependencies: by
    # default the executors run this Python (right on one machine; on a cluster set
    # PYSPARK_PYTHON or spark.pyspark.python to the executors' own).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        raise SinkError("spark sink: a Spark session is already active in this process; "
                        "pass it as spark=SESSION (with the Iceberg jar and extensions "
                        "loaded for the iceberg mode) instead of starting another")
    master = master or f"local[{os.cpu_count() or 1}]"
    builder = SparkSession.builder.master(master) \
        .appName(app_name) \
        .config("spark.sql.session.timeZone", "UTC") \
        .config("spark.ui.enabled", "false") \
        .config("spark.sql.shuffle.partitions", str(max(2, os.cpu_count() or 1)))
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars)) \
            .config("spark.sql.extensions", ICEBERG_EXTENSIONS)
    settings = dict(conf or {})
    if master.startswith("local"):
        settings.update(local_files_conf(settings))
    if quiet:
        settings.update(quiet_conf(settings))
    if SparkContext._gateway is None:  # the options of a JVM this call starts
        compiling = compiler_options(settings)
        if compiling:
            settings["spark.driver.extraJavaOptions"] = " ".join(filter(None, (
                str(settings.get("spark.driver.extraJavaOptions", "")), compiling)))
    options = settings.get("spark.driver.extraJavaOptions")
    sharing = _class_sharing(class_cache, jars or [], settings)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    try:
        session = builder.getOrCreate()
    except Exception as exc:
        if sharing is None or SparkContext._gateway is not None:
            raise
        # Its JVM exited at start: with an agent the options did not show, HotSpot can
        # crash on a shared class (class_sharing's docstring). Once more without sharing.
        builder = builder.config("spark.driver.extraJavaOptions", str(options or ""))
        session = builder.getOrCreate()
        sharing.failed(f"the driver JVM exited at its start with class-data sharing and "
                       f"started without it: {str(exc).splitlines()[0] if str(exc) else exc!r}")
        logger.warning("spark sink: the driver JVM exited at its start with class-data "
                       "sharing (%s) and started without it; sharing is off for this "
                       "JVM and class path from now on (%s.off says why)",
                       sharing.folder, sharing.folder / sharing.key)
        sharing = None
    if sharing is not None:
        jvm = session.sparkContext._jvm
        assert jvm is not None
        sharing.started(int(jvm.java.lang.ProcessHandle.current().pid()))
        if sharing.marker is not None:
            _ARCHIVE_WRITERS.add(session)
    if quiet:
        session.sparkContext.setLogLevel("ERROR")
    logger.info("spark sink: started Spark %s on %s", session.version,
                session.sparkContext.master)
    return session


_ARCHIVE_WRITERS: weakref.WeakSet[Any] = weakref.WeakSet()


def writes_class_archive(spark: SparkSession) -> bool:
    """Whether ``spark``'s JVM writes a class-data-sharing archive as it exits."""
    return spark in _ARCHIVE_WRITERS


def _class_sharing(folder: Path | None, jars: list[Path],
                   settings: dict[str, Any]) -> ClassSharing | None:
    """Class-data sharing for a JVM this start launches (not one the process has
    already, nor options the caller set itself): its options go into ``settings``."""
    from pyspark import SparkContext

    options = str(settings.get("spark.driver.extraJavaOptions", ""))
    if folder is None or SparkContext._gateway is not None or "SharedArchiveFile" in options \
            or "ArchiveClassesAtExit" in options:
        return None
    hooked = hooked_options(settings)
    if hooked is not None:
        logger.info("spark sink: no class-data sharing for the driver JVM: %s starts a Java "
                    "agent or a flight recording with it", hooked)
        return None
    # The archive holds the classes the JVM's own loaders link (HotSpot 17 archives a
    # custom loader's classes only as far as they were linked: of the classes Iceberg's
    # first commits load through spark.jars' loader, some 500 were left out and read
    # from the jar again). With the jars on the driver's class path too, its class loader
    # loads them (Spark's delegates to it first) and a later JVM maps them all, and its
    # first commit reads no classes from the jars (docs/performance.md).
    class_path = str(settings.get(CLASS_PATH, ""))
    if jars:
        class_path = os.pathsep.join([*(p for p in class_path.split(os.pathsep) if p),
                                      *(str(j) for j in jars)])
    sharing = ClassSharing(folder, jars, class_path)
    extra = sharing.options()
    if not extra:
        return None
    settings["spark.driver.extraJavaOptions"] = f"{options} {extra}".strip()
    if jars:
        settings[CLASS_PATH] = class_path
    return sharing
