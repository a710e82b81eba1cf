"""Configuration: a TOML file (see ``config/changestream.toml``), environment overrides,
and checks that name the key that is wrong.

Every key can be overridden by an environment variable named
``CHANGESTREAM_<SECTION>_<KEY>`` in capitals (``CHANGESTREAM_SOURCE_URL``,
``CHANGESTREAM_BATCH_MAX_CHANGES``, ``CHANGESTREAM_SOURCE_TLS_MODE``); lists are given
comma-separated. Secrets (the source password, the control token) are read from the
environment or a file named in the configuration, never written in logs or by
``config check``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import typing
from dataclasses import field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from changestream.actors.batch_settings import BatchSettings
from changestream.model.errors import ConfigError
from changestream.model.record import record
from changestream.model.setting import check_of, parse_flag, seconds
from changestream.runtime.config_sections import (
    ControlConfig,
    FailoverConfig,
    FilterConfig,
    LogConfig,
    SinkConfig,
    SourceConfig,
    StandbyConfig,
    StartConfig,
    TransactionsConfig,
)
from changestream.runtime.heartbeat import HeartbeatSettings
from changestream.schema.history_settings import HistorySettings
from changestream.snapshot.settings import SnapshotSettings

ENV_PREFIX = "CHANGESTREAM"


@record
class Config:
    """The whole configuration; see ``config/changestream.toml`` for every key."""

    source: SourceConfig = field(default_factory=SourceConfig)
    schema: HistorySettings = field(default_factory=HistorySettings)
    start: StartConfig = field(default_factory=StartConfig)
    snapshot: SnapshotSettings = field(default_factory=SnapshotSettings)
    filter: FilterConfig = field(default_factory=FilterConfig)
    transactions: TransactionsConfig = field(default_factory=TransactionsConfig)
    batch: BatchSettings = field(default_factory=BatchSettings)
    sink: SinkConfig = field(default_factory=SinkConfig)
    control: ControlConfig = field(default_factory=ControlConfig)
    heartbeat: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    failover: FailoverConfig = field(default_factory=FailoverConfig)
    standby: StandbyConfig = field(default_factory=StandbyConfig)
    log: LogConfig = field(default_factory=LogConfig)

    def password(self) -> str | None:
        """The source password from its file or environment variable (``None``: use the
        one in the URL, if any)."""
        s = self.source
        if s.password_file:
            return _read_secret(s.password_file, "source.password_file")
        if s.password_env and s.password_env in os.environ:
            return os.environ[s.password_env]
        return None

    def control_token(self) -> str | None:
        c = self.control
        if c.token_file:
            return _read_secret(c.token_file, "control.token_file")
        if c.token_env and os.environ.get(c.token_env):
            return os.environ[c.token_env]
        return None

    def as_dict(self, *, masked: bool = True) -> dict[str, Any]:
        """The configuration as nested dicts; with ``masked``, no secret shows."""
        data = _to_dict(self)
        if masked:
            data["source"]["url"] = mask_url(self.source.url)
        return data


def _read_secret(path: str, key: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # a NUL in the path, text that is not UTF-8
        raise ConfigError(f"{key}: cannot read {path!r}: {exc}") from None


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (all of it, when it is no URL)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return list(obj)
    if isinstance(obj, dict):
        return dict(obj)
    return obj


def _coerce(value: Any, tp: Any, key: str, from_text: bool = False) -> Any:
    """``value`` checked (or converted, from environment text) to the field type ``tp``."""
    origin = typing.get_origin(tp)
    allowed = _literal_values(tp)
    if allowed:
        if isinstance(value, str) and value in allowed:
            return value
        shown = [v for v in allowed if v]
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(shown)}"
                          + (' (or "")' if "" in allowed else ""))
    if origin is list:
        if from_text and isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
        return list(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a table, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, str) and (flag := parse_flag(value)) is not None:
            return flag
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, str):
            try:
                return int(value.strip().replace("_", ""))
            except ValueError:
                pass
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    raise ConfigError(f"{key}: unsupported setting type {tp}")


def _literal_values(tp: Any) -> tuple[Any, ...]:
    """The values a ``Literal`` type (or a union of them) allows; () for other types."""
    if typing.get_origin(tp) is typing.Literal:
        return typing.get_args(tp)
    args = typing.get_args(tp)
    if args and all(typing.get_origin(a) is typing.Literal for a in args):
        return tuple(v for a in args for v in typing.get_args(a))
    return ()


def _apply(target: Any, data: dict[str, Any], prefix: str) -> None:
    hints = typing.get_type_hints(type(target))
    names = {f.name for f in dataclasses.fields(target)}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if name not in names:
            known = ", ".join(sorted(names))
            raise ConfigError(f"{key}: unknown key (known here: {known})")
        tp = hints[name]
        current = getattr(target, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{key}: expected a table [{key}], got {value!r}")
            _apply(current, value, f"{key}.")
        else:
            setattr(target, name, _coerce(value, tp, key))


def _apply_environment(target: Any, env: typing.Mapping[str, str], prefix: str,
                       key_prefix: str) -> None:
    hints = typing.get_type_hints(type(target))
    for f in dataclasses.fields(target):
        current = getattr(target, f.name)
        var = f"{prefix}_{f.name.upper()}"
        key = f"{key_prefix}{f.name}"
        if dataclasses.is_dataclass(current):
            _apply_environment(current, env, var, f"{key}.")
        elif var in env and typing.get_origin(hints[f.name]) is not dict:
            setattr(target, f.name, _coerce(env[var], hints[f.name], f"{key} (from {var})",
                                            from_text=True))


def _validate(config: Config) -> None:
    """Each key's own check (:func:`_check_keys`), then the checks of keys together."""
    _check_keys(config, "")
    tls = config.source.tls
    if tls.mode in ("verify-ca", "verify-identity") and not tls.ca:
        raise ConfigError(f"source.tls.ca: needed for tls mode {tls.mode}")
    if config.standby.enabled and not config.start.position_file:
        raise ConfigError("standby.enabled: needs start.position_file (--position-file); "
                          "the lease is kept beside it")
    if config.control.enabled and not is_loopback(config.control.host) and \
            not config.control_token():
        raise ConfigError(f"control.host: {config.control.host} is reachable from other "
                          "machines; the endpoint listens beyond the loopback only with a "
                          "token (control.token_file, or the variable control.token_env "
                          "names)")


def _check_keys(section: Any, prefix: str) -> None:
    """Run each key's check (a setting in seconds without one: finite, not negative);
    the first problem is a :class:`ConfigError` naming the key."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            _check_keys(value, f"{prefix}{f.name}.")
            continue
        check = check_of(f) or (seconds if isinstance(value, float) else None)
        problem = check(value) if check is not None else None
        if problem is not None:
            raise ConfigError(f"{prefix}{f.name}: {problem}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_config(path: str | os.PathLike[str] | None = None, *,
                env: typing.Mapping[str, str] | None = None,
                overrides: dict[str, Any] | None = None) -> Config:
    """The configuration from ``path`` (TOML; ``None``: defaults only), then the environment
    (``CHANGESTREAM_*``), then ``overrides`` (``{"section.key": value}``, e.g. from the
    command line). Raises :class:`ConfigError` naming the key that is wrong."""
    config = Config()
    if path is not None:
        import tomllib  # only with a file: a run from the command line alone does not pay

        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(f"configuration file {path} does not exist") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"configuration file {path}: {exc}") from None
        except RecursionError:
            raise ConfigError(f"configuration file {path}: values nested too deeply") \
                from None
        _apply(config, data, "")
    _apply_environment(config, os.environ if env is None else env, ENV_PREFIX, "")
    for key, value in (overrides or {}).items():
        *sections, name = key.split(".")
        target: Any = config
        for section in sections:
            target = getattr(target, section)
        _apply(target, {name: value}, ".".join(sections) + "." if sections else "")
    _validate(config)
    return config

