"""The compiler thresholds the driver JVM changestream starts is given, unless the user's
own options choose how it compiles."""

from __future__ import annotations

import pytest

from changestream.sinks.spark.jvm.compiler import COMPILER_OPTIONS, compiler_options

OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS",
                    "SPARK_SUBMIT_OPTS", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME")


@pytest.fixture(autouse=True)
def _no_java_options_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OPTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_a_start_with_no_compiler_options_of_its_own_gets_the_thresholds() -> None:
    assert compiler_options({}) == " ".join(COMPILER_OPTIONS)
    assert compiler_options({"spark.driver.extraJavaOptions": "-Xmx2g -Xss4m"}) == \
        " ".join(COMPILER_OPTIONS)
    assert "-XX:Tier4InvocationThreshold=50000" in COMPILER_OPTIONS


@pytest.mark.parametrize("option", ["-XX:TieredStopAtLevel=1", "-XX:-TieredCompilation",
                                    "-XX:Tier4InvocationThreshold=5000", "-Xint",
                                    "-XX:CompileThreshold=100"])
def test_the_users_own_compiler_options_win(option: str) -> None:
    assert compiler_options({"spark.driver.extraJavaOptions": f"-Xmx2g {option}"}) == ""
    assert compiler_options({"spark.driver.defaultJavaOptions": option}) == ""


def test_compiler_options_in_the_environment_or_spark_defaults_win(
        monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")
    assert compiler_options({}) == ""
    monkeypatch.delenv("JAVA_TOOL_OPTIONS")
    from pathlib import Path

    conf = Path(str(tmp_path))
    (conf / "spark-defaults.conf").write_text(
        "spark.driver.extraJavaOptions -XX:Tier4CompileThreshold=15000\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert compiler_options({}) == ""
