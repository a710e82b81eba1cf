"""Configuration: the documented default file, environment overrides, errors naming the key,
and `config check` with secrets masked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from changestream.model.errors import ConfigError
from changestream.runtime.config import Config, load_config
from changestream.runtime.router import RouterSettings

DEFAULT_FILE = Path(__file__).parents[2] / "config" / "changestream.toml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "changestream.toml"
    path.write_text(text)
    return path


def test_the_documented_default_file_is_the_defaults() -> None:
    assert load_config(DEFAULT_FILE, env={}) == load_config(None, env={}) == Config()


def test_an_unknown_key_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^source\.urll: unknown key \(known here: .*url"):
        load_config(_write(tmp_path, '[source]\nurll = "x"\n'), env={})
    with pytest.raises(ConfigError, match=r"^sourse: unknown key"):
        load_config(_write(tmp_path, '[sourse]\nurl = "x"\n'), env={})
    with pytest.raises(ConfigError, match=r"^source\.tls\.verify: unknown key"):
        load_config(_write(tmp_path, '[source.tls]\nverify = true\n'), env={})


@pytest.mark.parametrize(("text", "message"), [
    ("[batch]\nmax_changes = \"many\"\n", r"^batch\.max_changes: expected an integer"),
    ("[batch]\nmax_seconds = true\n", r"^batch\.max_seconds: expected a number"),
    ("[filter]\ninclude = \"shop\"\n", r"^filter\.include: expected a list of strings"),
    ("[control]\nenabled = 1\n", r"^control\.enabled: expected true or false"),
    ("[source]\ntls = \"on\"\n", r"^source\.tls: expected a table"),
    ("[start]\nat = \"yesterday\"\n", r"^start\.at: "),
    ("[start]\nuntil = \"forever\"\n", r"^start\.until: "),
    ("[source.tls]\nmode = \"verify-ca\"\n", r"^source\.tls\.ca: needed"),
    ("[batch]\nmax_changes = -1\n", r"^batch\.max_changes: must be positive"),
    ("[batch]\nmax_bytes = -1\n", r"^batch\.max_bytes: must be positive"),
    ("[sink]\nformat = \"avro\"\n", r"^sink\.format: "),
    ("[schema]\nskip = [\"binlog.000001\"]\n", r"^schema\.skip: 'binlog\.000001' is not"),
    ("this is = not toml [", r"configuration file .*changestream\.toml: "),
])
def test_a_wrong_value_is_an_error_naming_the_key(tmp_path: Path, text: str,
                                                  message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, text), env={})


def test_environment_overrides_the_file_and_the_command_line_overrides_both(
        tmp_path: Path) -> None:
    path = _write(tmp_path, '[source]\nurl = "mysql://a@file:1"\n[batch]\nmax_changes = 5\n'
                            '[filter]\ninclude = ["x"]\n')
    env = {"CHANGESTREAM_SOURCE_URL": "mysql://a@env:2", "CHANGESTREAM_BATCH_MAX_CHANGES": "7",
           "CHANGESTREAM_FILTER_INCLUDE": "shop, crm.*", "CHANGESTREAM_SOURCE_TLS_MODE":
           "required", "CHANGESTREAM_CONTROL_ENABLED": "yes"}
    config = load_config(path, env=env)
    assert config.source.url == "mysql://a@env:2"
    assert config.batch.max_changes == 7
    assert config.filter.include == ["shop", "crm.*"]
    assert config.source.tls.mode == "required"
    assert config.control.enabled is True
    config = load_config(path, env=env, overrides={"source.url": "mysql://a@cli:3",
                                                   "batch.max_changes": 9})
    assert (config.source.url, config.batch.max_changes) == ("mysql://a@cli:3", 9)
    with pytest.raises(ConfigError, match=r"batch\.max_changes \(from "
                                          r"CHANGESTREAM_BATCH_MAX_CHANGES\)"):
        load_config(None, env={"CHANGESTREAM_BATCH_MAX_CHANGES": "lots"})


def test_passwords_come_from_the_environment_or_a_file_never_from_the_printout(
        tmp_path: Path) -> None:
    secret_file = tmp_path / "password"
    secret_file.write_text("from-file\n")
    config = load_config(None, env={}, overrides={"source.url": "mysql://u:inline@h:1"})
    assert config.password() is None  # nothing set: the URL's own password is used
    config.source.password_env = "TEST_PASSWORD_VARIABLE"
    import os
    os.environ["TEST_PASSWORD_VARIABLE"] = "from-env"
    try:
        assert config.password() == "from-env"
        assert RouterSettings.from_config(config).password == "from-env"
    finally:
        del os.environ["TEST_PASSWORD_VARIABLE"]
    config.source.password_file = str(secret_file)
    assert config.password() == "from-file"
    printed = orjson.dumps(config.as_dict()).decode()
    assert "inline" not in printed and "from-file" not in printed
    assert "mysql://u:***@h:1" in printed


def test_config_check_prints_the_resolved_configuration_masked(tmp_path: Path) -> None:
    path = _write(tmp_path, '[source]\nurl = "mariadb://repl:hunter2@db:3306"\n')
    result = subprocess.run([sys.executable, "-m", "changestream.cli", "config", "check",
                             str(path)], capture_output=True, text=True,
                            env={"CHANGESTREAM_BATCH_MAX_SECONDS": "2.5", "PATH": ""})
    assert result.returncode == 0, result.stderr
    resolved = orjson.loads(result.stdout)
    assert resolved["source"]["url"] == "mariadb://repl:***@db:3306"
    assert resolved["batch"]["max_seconds"] == 2.5
    assert "hunter2" not in result.stdout + result.stderr
    bad = _write(tmp_path, "[batch]\nretries = -\n")
    result = subprocess.run([sys.executable, "-m", "changestream.cli", "config", "check",
                             str(bad)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("changestream config check: configuration file")
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_shipped_file_is_the_keys_definitions_rendered() -> None:
    """config/changestream.toml is what the section definitions render (every key at its
    default, after its doc); `changestream config defaults` prints the same."""
    from changestream.runtime.config import Config
    from changestream.runtime.config_render import render_defaults

    shipped = Path(__file__).parents[2] / "config" / "changestream.toml"
    assert shipped.read_text() == render_defaults(Config()), \
        "run: changestream config defaults > config/changestream.toml"
    assert load_config(shipped, env={}) == Config()


@pytest.mark.parametrize(("text", "message"), [
    ('[snapshot]\nmode = "sometimes"\n',
     r"^snapshot\.mode: 'sometimes' is not one of initial, when-needed, initial-only, "
     r'never \(or ""\)$'),
    ('[source.tls]\nmode = "on"\n', r"^source\.tls\.mode: 'on' is not one of preferred, "),
    ('[schema]\nhistory = 1\n', r"^schema\.history: 1 is not one of auto, on, off$"),
    ('[log]\nlevel = "loud"\n', r"^log\.level: 'loud' is not debug, info, warning or error$"),
    ('[control]\nport = 70000\n', r"^control\.port: 70000 is not a TCP port$"),
    ('[snapshot]\nchunk_rows = 0\n', r"^snapshot\.chunk_rows: must be positive, got 0$"),
])
def test_a_mode_or_number_out_of_its_range_names_the_key_and_the_values_it_takes(
        tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, text), env={})
