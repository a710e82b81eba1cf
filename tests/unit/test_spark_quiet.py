"""The settings that keep Spark's chatter off the router's console."""

from __future__ import annotations

from changestream.sinks.spark.session import QUIET_LOG4J2, quiet_conf, quiet_log4j2


def test_quiet_settings_hide_progress_bars_and_point_log4j2_at_an_error_only_file() -> None:
    settings = quiet_conf({})
    assert settings["spark.ui.showConsoleProgress"] == "false"
    options = settings["spark.driver.extraJavaOptions"]
    assert options == f"-Dlog4j2.configurationFile=file:{quiet_log4j2()}"
    assert quiet_log4j2().read_text() == QUIET_LOG4J2
    assert "appender.console.filter.threshold.level = error" in QUIET_LOG4J2


def test_what_the_user_set_wins_and_their_java_options_are_kept() -> None:
    settings = quiet_conf({"spark.ui.showConsoleProgress": "true",
                           "spark.driver.extraJavaOptions": "-Xss4m"})
    assert settings["spark.ui.showConsoleProgress"] == "true"
    assert settings["spark.driver.extraJavaOptions"].startswith("-Xss4m -Dlog4j2.")
    own = "-Dlog4j2.configurationFile=file:/etc/spark/log4j2.properties"
    assert quiet_conf({"spark.driver.extraJavaOptions": own})[
        "spark.driver.extraJavaOptions"] == own
