"""The driver's commit class (sinks/spark/iceberg/commits.py) compiled once: the first
Iceberg sink that starts its JVM keeps it as a jar, a later start loads it from there,
with the same jars on the class path as the first (so the class-data archive the first
start writes serves the later ones)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]

# A new process: an Iceberg sink opened on a new warehouse (argv[1]); one row appended
# through the driver's commit class; prints where that class came from, and the jars the
# JVM was started with.
START = """
import json, sys
import pyarrow as pa
from changestream.sinks.spark.sink import SparkSink
from changestream.sinks.spark.iceberg.commits import create_table, driver_commits
from changestream.sinks.spark.iceberg.files import ArrowAppender
sink = SparkSink(mode="iceberg", warehouse=sys.argv[1], jvm_class_cache=False)
sink.open()
spark = sink.spark
schema = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": False, "metadata": {}}]}
create_table(spark, sink.catalog, "db", "t", json.dumps(schema), {"format-version": "2"})
ArrowAppender(spark).append(f"{sink.catalog}.db.t", pa.table({"id": pa.array([7], pa.int64())}),
                            {"p": "1"})
assert [r["id"] for r in spark.table(f"{sink.catalog}.db.t").collect()] == [7]
source = driver_commits(spark, None).getClass().getProtectionDomain().getCodeSource()
print("RESULT", source.getLocation().toString() if source is not None else "compiled",
      flush=True)
print("JARS", spark.sparkContext.getConf().get("spark.jars", ""), flush=True)
sink.close()
"""


def _start(warehouse: Path, cache: Path) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", START, str(warehouse)], capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    [jars] = [x for x in done.stdout.splitlines() if x.startswith("JARS ")]
    return line.split(" ", 1)[1], jars


def test_the_class_is_compiled_once_and_then_loaded_from_its_jar(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, first_jars = _start(tmp_path / "w1", cache)
    [jar] = (cache / "changestream" / "jars").glob("changestream-driver-commits-*.jar")
    assert not first.endswith(jar.name)  # compiled in that JVM
    second, second_jars = _start(tmp_path / "w2", cache)
    assert second.endswith(jar.name)
    # Kept off the class path: with it there, the second start's class path (and so its
    # class-data archive's key) differed from the first's, and it wrote an archive again.
    assert second_jars == first_jars and "iceberg" in first_jars
    assert jar.name not in second_jars
