"""Configurations damaged as the fuzz harness damaged them (tests/fuzz_config.py), each a
one-line ConfigError naming the key or file, where they were a UnicodeDecodeError, a
RecursionError, a ValueError from deep in the standard library, or accepted and then
unusable (a duration that is not finite, a server id wider than 32 bits)."""

from __future__ import annotations

from pathlib import Path

import pytest

from changestream.model.errors import ConfigError
from changestream.runtime.config import Config, load_config, mask_url
from changestream.runtime.settings import RouterSettings
from changestream.sources.source_url import parse_source_url


def _load(tmp_path: Path, text: bytes, env: dict[str, str] | None = None) -> Config:
    path = tmp_path / "changestream.toml"
    path.write_bytes(text)
    return load_config(path, env=env or {})


def _one_line(info: pytest.ExceptionInfo[ConfigError]) -> str:
    message = str(info.value)
    assert len(message.splitlines()) == 1
    return message


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"changestream\.toml: 'utf-8' codec") as info:
        _load(tmp_path, b'[source]\nurl = "caf\xe9"\n')
    _one_line(info)


def test_values_nested_too_deeply_are_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nested too deeply"):
        _load(tmp_path, b"[sink.options]\na = " + b"[" * 3000 + b"]" * 3000 + b"\n")


def test_a_key_with_a_line_break_is_named_on_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r'^source\.a\\nb: unknown key') as info:
        _load(tmp_path, b'[source]\n"a\\nb" = 1\n')
    _one_line(info)


@pytest.mark.parametrize(("env", "message"), [
    ({"CHANGESTREAM_SOURCE_HEARTBEAT_SECONDS": "nan"}, r"^source\.heartbeat_seconds: must be"),
    ({"CHANGESTREAM_SOURCE_RECONNECT_SECONDS": "inf"}, r"^source\.reconnect_seconds: must be"),
    ({"CHANGESTREAM_BATCH_MAX_SECONDS": "0"}, r"^batch\.max_seconds: must be a positive"),
    ({"CHANGESTREAM_BATCH_RETRY_BACKOFF_SECONDS": "-1"}, r"^batch\.retry_backoff_seconds: "),
    ({"CHANGESTREAM_BATCH_RETRIES": "-1"}, r"^batch\.retries: must not be negative"),
    ({"CHANGESTREAM_SOURCE_SERVER_ID": "4294967296"}, r"^source\.server_id: .* 32 bits"),
])
def test_numbers_the_router_cannot_take_are_config_errors(env: dict[str, str],
                                                          message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, env=env)
    assert load_config(None, env={"CHANGESTREAM_SOURCE_SERVER_ID": "4294967295"})


def test_a_nul_in_a_secret_or_certificate_path_is_a_config_error(tmp_path: Path) -> None:
    config = _load(tmp_path, b'[source]\npassword_file = "/etc/\\u0000x"\n')
    with pytest.raises(ConfigError, match=r"^source\.password_file: cannot read"):
        RouterSettings.from_config(config)
    config = _load(tmp_path, b'[source.tls]\nmode = "verify-ca"\nca = "/x\\u0000"\n')
    with pytest.raises(ConfigError, match=r"^source\.tls: embedded null"):
        RouterSettings.from_config(config)


@pytest.mark.parametrize("url", ["mysql://[::1", "mysql://[:21]:1", "mariadb://[x]"])
def test_a_source_url_the_url_parser_refuses_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match=r"^source: not a URL: "):
        parse_source_url(url)
    assert mask_url(url) == "***"
