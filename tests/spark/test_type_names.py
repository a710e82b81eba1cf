"""A column's Spark type is kept as its name (the decode workers map columns without
PySpark); the name must build the type it names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from changestream.sinks.spark.types import METADATA, spark_type, table_mappings

from .conftest import all_types_schema


def test_every_mapped_type_name_builds_the_spark_type_of_that_name() -> None:
    fields = METADATA + table_mappings(all_types_schema())
    names = {f.spark_type for f in fields}
    assert {"tinyint", "smallint", "int", "bigint", "decimal(20,0)", "decimal(10,2)",
            "float", "double", "date", "timestamp_ntz", "timestamp", "string", "binary",
            "array<string>", "array<float>"} <= names
    for field in fields:
        assert field.spark.simpleString() == field.spark_type, field
    with pytest.raises(ValueError, match="interval"):
        spark_type("interval")


def test_the_decode_workers_modules_import_without_pyspark() -> None:
    code = ("import sys; import changestream.parallel.decode_workers, "
            "changestream.sinks.spark.frames; from changestream.native import compiled; "
            "compiled('changestream.sinks.spark._arrow_walk'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
