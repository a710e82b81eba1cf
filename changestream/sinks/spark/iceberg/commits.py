"""The driver's Iceberg commits (and table creations) as one call into the JVM each.

A commit from Python through Py4J was some 35 round trips, each also waiting for the
interpreter lock while the router's threads run. :class:`DriverCommits` is a small Java
class compiled from the source below with Janino (Spark's own code generator) that does a
whole commit on its side; a sink that starts its JVM keeps it as a jar in changestream's jar
cache (:func:`driver_commits_jar`), so later starts need no compile. Its steps are those of
Iceberg's own writers, but the commit's tasks run in the calling thread and a format-2
append's manifest is written here (docs/internals.md, "Spark sink: where an Iceberg batch's
time goes")."""

from __future__ import annotations

import hashlib
import weakref
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changestream.model.errors import SinkError

from ..jvm.jars import jar_cache, made_once

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CLASS_NAME = "changestream.iceberg.DriverCommits"

# The driver's commit class, as Java source that Janino compiles (DriverCommits.java: no
# lambdas, no diamond, generics as raw types: Janino's limits).
SOURCE = (files(__package__) / "DriverCommits.java").read_text(encoding="utf-8")

_COMPILED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_BYTECODE: weakref.WeakKeyDictionary[Any, dict[str, bytes]] = weakref.WeakKeyDictionary()
_JARS: weakref.WeakKeyDictionary[Any, Path] = weakref.WeakKeyDictionary()


def use_driver_commits_jar(spark: SparkSession, jar: Path) -> None:
    """Have :func:`driver_commits` in ``spark``'s JVM load the class from ``jar`` (see
    :func:`driver_commits_jar`) when that file is there, rather than compile it."""
    _JARS[spark._jvm] = jar


def driver_commits(spark: SparkSession, anchor: Any) -> Any:
    """The :class:`DriverCommits` object of ``spark``'s JVM: the class from the jar
    :func:`use_driver_commits_jar` named if it is there, else from the class path (a
    session passed in may have it), else compiled at the first call; its parent class
    loader is the one that loaded ``anchor`` (a Java object of Iceberg's: a table, a
    catalog)."""
    jvm = spark._jvm
    commits = _COMPILED.get(jvm)
    if commits is None:
        loader = anchor.getClass().getClassLoader()
        klass = _from_jar(spark, loader, _JARS.get(jvm)) or _from_class_path(loader) \
            or _compile(jvm, loader)
        commits = klass.newInstance()
        commits.init(spark._jsc.hadoopConfiguration())
        _COMPILED[jvm] = commits
    return commits


def _from_jar(spark: SparkSession, loader: Any, jar: Path | None) -> Any:
    """The class loaded from ``jar`` by a class loader of its own under ``loader``
    (``None``: no such jar, or one that does not hold it). The jar is kept off the
    driver's class path: a class path that gained it after the first start would give
    later starts another class-data archive (:mod:`..jvm.class_sharing`) to write."""
    if jar is None or not jar.is_file():
        return None
    jvm: Any = spark._jvm
    gateway: Any = spark.sparkContext._gateway
    urls = gateway.new_array(jvm.java.net.URL, 1)
    urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
    try:
        return jvm.java.net.URLClassLoader(urls, loader).loadClass(CLASS_NAME)
    except Exception:  # Py4JJavaError: a jar cut short, or of another class
        return None


def _from_class_path(loader: Any) -> Any:
    """The class as ``loader`` finds it (``None``: not on the class path)."""
    try:
        return loader.loadClass(CLASS_NAME)
    except Exception:  # Py4JJavaError (ClassNotFoundException)
        return None


def _compile(jvm: Any, loader: Any) -> Any:
    """:data:`SOURCE` compiled with Janino (a cost of every new JVM); its bytecode is kept for
    :func:`keep_driver_commits`."""
    compiler = jvm.org.codehaus.janino.SimpleCompiler()
    compiler.setParentClassLoader(loader)
    compiler.setTargetVersion(8)  # static interface methods (Stream.empty)
    try:
        compiler.cook(SOURCE)
    except Exception as exc:  # Py4JJavaError: an Iceberg without an API it calls
        message = str(getattr(exc, "java_exception", exc)).splitlines()[0]
        raise SinkError(
            "spark sink (iceberg): the driver's commit class does not compile against "
            f"the Iceberg runtime on Spark's class path ({message}); changestream's "
            "Iceberg landing is built for Iceberg 1.10 (see the sink's jar option)"
        ) from None
    _BYTECODE[jvm] = {str(name): bytes(code)
                      for name, code in compiler.getBytecodes().items()}
    return compiler.getClassLoader().loadClass(CLASS_NAME)


def driver_commits_jar(runtime: Path, cache: Path | None = None) -> Path:
    """Where the jar of the compiled :class:`DriverCommits` goes (in changestream's jar
    cache), for this source and Iceberg runtime jar ``runtime``: a sink that starts its
    JVM puts it on the class path when it is there, and no JVM compiles the class again."""
    try:
        size = runtime.stat().st_size
    except OSError:
        size = -1
    digest = hashlib.sha256(f"{SOURCE}\n{runtime.name}\t{size}".encode()).hexdigest()[:12]
    return jar_cache(cache) / f"changestream-driver-commits-{digest}.jar"


def keep_driver_commits(spark: SparkSession, target: Path) -> None:
    """Write the class this JVM compiled (if it did) as jar ``target``, for later starts."""
    compiled = _BYTECODE.get(spark._jvm)
    if compiled:
        made_once(target, lambda: iter(
            [(f"{name.replace('.', '/')}.class", code) for name, code in compiled.items()]))


def create_table(spark: SparkSession, catalog: str, namespace: str, name: str, schema_json: str,
                 properties: dict[str, str], day_column: str | None = None) -> None:
    """Create Iceberg table ``namespace.name`` in ``catalog`` of the Spark schema
    ``schema_json`` (partitioned by day of ``day_column`` when given), as ``CREATE TABLE
    ... USING iceberg TBLPROPERTIES (...)`` would, through the catalog's own call. Spark
    SQL's parse, analysis and plan of a statement cost more than the creation; the first
    in a JVM much more (loading them), which a router that issues no other statement never
    pays."""
    table_catalog = spark._jsparkSession.sessionState().catalogManager().catalog(catalog)
    driver_commits(spark, table_catalog).createTable(
        table_catalog, namespace, name, schema_json, day_column, encode_properties(properties))


def check_location(location: str) -> str:
    """``location``, which :class:`DriverCommits` takes one a line, tab-separated."""
    if "\n" in location or "\t" in location:
        raise SinkError(f"spark sink (iceberg): a tab or line break in file location "
                        f"{location!r}: the driver's commits cannot name it")
    return location


def encode_properties(properties: dict[str, str]) -> str:
    """``properties`` as :class:`DriverCommits` takes them: key and value, one a line."""
    for key, value in properties.items():
        if "\n" in key or "\n" in value:
            raise SinkError(f"spark sink (iceberg): snapshot property {key!r}: a line break "
                            "in it")
    return "".join(f"{key}\n{value}\n" for key, value in properties.items())
