"""The shared Spark session (with the Iceberg runtime) for the end-to-end Spark tests.

One session per test run, started on first use. The kill -9 test asks for it only after its
router processes (each with a Spark of its own) are done, so two Sparks never run at once.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

# Spark hands TIMESTAMP values to Python as naive local times: make local time UTC.
os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.skip("no java: the Spark sink tests need a JRE")
    from changestream.sinks.spark.jars import iceberg_jars
    from changestream.sinks.spark.session import start_session

    session = start_session("local[2]", {"spark.sql.shuffle.partitions": "2",
                                         "spark.default.parallelism": "2"},
                            iceberg_jars(), "changestream-e2e-tests")
    yield session
    session.stop()
    os.environ.pop("SPARK_LOCAL_IP", None)
