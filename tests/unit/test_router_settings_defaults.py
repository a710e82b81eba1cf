"""A program's own RouterSettings default as the configuration file does: each key's
default is defined once, in its section."""

import pytest

from changestream.model.errors import ConfigError
from changestream.runtime.config import load_config
from changestream.runtime.settings import RouterSettings

SHARED = ("server_id", "heartbeat_seconds", "reconnect_seconds", "max_buffered_changes",
          "include_sql", "decode_workers", "decode_workers_wait", "schema_from_server",
          "verify_checksums", "standby", "lease_seconds", "batch", "schema", "snapshot",
          "heartbeat", "failover")


@pytest.mark.parametrize("name", SHARED)
def test_a_program_s_settings_default_as_the_configuration_does(name: str) -> None:
    config = load_config(None, env={})
    own = RouterSettings(source=config.source.url)
    assert getattr(own, name) == getattr(RouterSettings.from_config(config), name)


@pytest.mark.parametrize(("setting", "key"), [
    ({"server_id": 0}, "source.server_id"), ({"heartbeat_seconds": 0}, "source.heartbeat_seconds"),
    ({"max_buffered_changes": 0}, "transactions.max_buffered_changes"),
    ({"lease_seconds": -1.0}, "standby.lease_seconds")])
def test_a_program_s_settings_are_checked_as_the_configuration_is(
        setting: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{key}: "):
        RouterSettings(source="file:///x", **setting)  # type: ignore[arg-type]
