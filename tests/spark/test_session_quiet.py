"""A quiet Spark session (``changestream run`` without ``-v``) writes nothing of Spark's
own to stderr: no start-up announcement, no WARN lines, no progress bars."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

_START_AND_QUERY = """
from changestream.sinks.spark.session import start_session
spark = start_session("local[1]", {}, None, "quiet-test", quiet=QUIET)
spark.range(200000).selectExpr("sum(id)").collect()
spark.stop()
print("done")
"""


def _stderr(quiet: bool) -> str:
    done = subprocess.run([sys.executable, "-c", _START_AND_QUERY.replace("QUIET", str(quiet))],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0 and "done" in done.stdout, done.stderr[-2000:]
    return done.stderr


def test_a_quiet_session_leaves_stderr_empty() -> None:
    assert _stderr(True).strip() == ""


def test_a_session_that_is_not_quiet_shows_spark_lines() -> None:
    assert "Setting default log level" in _stderr(False)
