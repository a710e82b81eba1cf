"""The driver JVM changestream starts runs with its compiler thresholds."""

from __future__ import annotations

from typing import Any

import pytest

from changestream.sinks.spark.jvm.compiler import COMPILER_OPTIONS

pytestmark = pytest.mark.spark


def test_the_started_jvm_has_the_compiler_thresholds(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                     .getInputArguments())
    for option in COMPILER_OPTIONS:
        assert option in arguments, arguments
    flag = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert flag.getVMOption("Tier4InvocationThreshold").getValue() == "50000"
