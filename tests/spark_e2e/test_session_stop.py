"""The Spark session a sink started, stopped with its JVM's gateway shut down at the
interpreter's exit, in new processes with real JVMs (sinks/spark/jvm/stop.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.spark]

# A sink's own session opened and closed, then the gateway shut down as at the
# interpreter's exit: the JVM exits, and a later session in the same process starts a new
# JVM and works.
SCRIPT = """
import os, sys, tempfile, time
from pyspark import SparkContext
from changestream.sinks.spark.iceberg.sink import IcebergSparkSink
from changestream.sinks.spark.jvm.stop import shut_gateway_down
from changestream.sinks.spark.session import start_session
from changestream.devserver.process import running
def ended(pid):  # gone, or a zombie (this process is its parent and reaps it later)
    return not running(pid)
with tempfile.TemporaryDirectory() as tmp:
    sink = IcebergSparkSink(warehouse=tmp, master="local[1]", jvm_class_cache=False)
    sink.open()
    first = int(sink.spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    sink.close()
    assert SparkContext._gateway is not None  # stopped, its JVM kept for a later session
    shut_gateway_down()
    deadline = time.monotonic() + 20
    while not ended(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("FIRST", first, "gone" if ended(first) else "alive")
    spark = start_session("local[1]", {}, None, "after-a-shut-gateway")
    second = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    print("SECOND", second, spark.range(3).count(), flush=True)
    spark.stop()
"""


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_the_jvm_exits_with_its_gateway_shut_and_a_new_session_starts_another() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()
             if line.split() and line.split()[0] in ("FIRST", "SECOND")}
    first, state = lines["FIRST"]
    assert state == "gone"
    second, count = lines["SECOND"]
    assert second != first and count == "3"
    assert _gone_within(int(second), 20)  # a plain session's JVM too ends with the process
