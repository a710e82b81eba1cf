"""The heartbeat statement's settings: off by default, checked with errors that name the key,
from the configuration file, the environment and the command line; and a failing statement
is one warning line, not an error."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from changestream.cli.commands import build_parser
from changestream.cli.run import config_from_args
from changestream.model.errors import ConfigError
from changestream.runtime.config import load_config
from changestream.runtime.heartbeat import HeartbeatSettings, HeartbeatStatement

INSERT = ("INSERT INTO ops.changestream_heartbeat (id, ts) VALUES (1, NOW(6)) "
          "ON DUPLICATE KEY UPDATE ts = NOW(6)")


def test_it_is_off_by_default() -> None:
    settings = load_config(None, env={}).heartbeat
    assert settings == HeartbeatSettings("", 60.0)
    assert not settings.enabled


def test_the_file_and_the_environment_set_it(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f'[heartbeat]\nstatement = "{INSERT}"\ninterval_seconds = 2.5\n')
    assert load_config(path, env={}).heartbeat == \
        HeartbeatSettings(INSERT, 2.5)
    env = {"CHANGESTREAM_HEARTBEAT_STATEMENT": "DO 1",
           "CHANGESTREAM_HEARTBEAT_INTERVAL_SECONDS": "10"}
    assert load_config(None, env=env).heartbeat == \
        HeartbeatSettings("DO 1", 10.0)


def test_the_command_line_sets_it() -> None:
    args = build_parser().parse_args(["run", "--heartbeat-statement", INSERT,
                                      "--heartbeat-interval", "30"])
    assert config_from_args(args).heartbeat == \
        HeartbeatSettings(INSERT, 30.0)


@pytest.mark.parametrize("interval", [0, -1, float("nan")])
def test_an_interval_that_is_not_positive_is_an_error_naming_the_key(
        tmp_path: Path, interval: float) -> None:
    with pytest.raises(ConfigError, match=r"^heartbeat\.interval_seconds: must be a positive"):
        HeartbeatSettings(INSERT, interval)
    path = tmp_path / "c.toml"
    path.write_text(f"[heartbeat]\ninterval_seconds = {interval}\n")
    with pytest.raises(ConfigError, match=r"^heartbeat\.interval_seconds: "):
        load_config(path, env={})


def test_a_blank_statement_and_a_wrong_type_are_errors_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^heartbeat\.statement: is blank"):
        HeartbeatSettings("  ", 60.0)
    path = tmp_path / "c.toml"
    path.write_text("[heartbeat]\nstatement = 1\n")
    with pytest.raises(ConfigError, match=r"^heartbeat\.statement: "):
        load_config(path, env={})
    path.write_text('[heartbeat]\ninterval = 1\n')
    with pytest.raises(ConfigError, match=r"^heartbeat\.interval: unknown key"):
        load_config(path, env={})


class _Refusing:
    """A connection whose statements fail as a server's would (no server needed here)."""

    def cursor(self) -> Any:
        return self

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def execute(self, sql: str) -> None:
        raise RuntimeError("(1146, \"Table 'ops.changestream_heartbeat' doesn't exist\")")

    def close(self) -> None:
        return None


def test_a_failing_statement_is_one_warning_line_naming_it_and_the_error(
        caplog: pytest.LogCaptureFixture) -> None:
    statement = HeartbeatStatement(HeartbeatSettings(INSERT, 1.0), _Refusing)
    with caplog.at_level(logging.WARNING, logger="changestream"):
        assert not statement.run_once()
        assert not statement.run_once()  # the same error again: not logged again
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert INSERT in lines[0] and "doesn't exist" in lines[0]
