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
import math
import os
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from changestream.model.errors import ConfigError
from changestream.sources.tls import TlsConfig

ENV_PREFIX = "CHANGESTREAM"
TLS_MODES = ("preferred", "disabled", "required", "verify-ca", "verify-identity")


@dataclass(slots=True)
class SourceConfig:
    url: str = "mysql://root@127.0.0.1:3306"
    password_env: str = "CHANGESTREAM_PASSWORD"
    password_file: str = ""
    server_id: int = 0x3EADBEEF
    heartbeat_seconds: float = 5.0
    reconnect_seconds: float = 300.0
    verify_checksums: bool = True
    schema_from_server: bool = True
    decode_workers: int = -1
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass(slots=True)
class SchemaConfig:
    """The schema history (see docs/schema-history.md): ``history`` auto, on or off;
    ``shadow_server`` the command that runs the shadow server's program ("": the host's
    mariadbd or mysqld); ``skip`` the ``FILE:POS`` of DDL statements to leave out of it."""

    history: str = "auto"
    shadow_server: str = ""
    skip: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SnapshotConfig:
    """Snapshots (docs/snapshots.md): ``mode`` initial, when-needed, initial-only, never
    ("": initial without start.at, else never), ``chunk_rows``, ``tables`` (patterns),
    ``refill`` (read a table again after a DDL gave its rows values no row event carries)."""

    mode: str = ""
    chunk_rows: int = 10_000
    tables: list[str] = field(default_factory=list)
    refill: bool = True


@dataclass(slots=True)
class StartConfig:
    at: str = ""
    until: str = ""
    position_file: str = ""
    position_override: str = ""


@dataclass(slots=True)
class FilterConfig:
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    exclude_columns: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TransactionsConfig:
    max_buffered_changes: int = 20_000
    spill_dir: str = ""
    include_sql: bool = False


@dataclass(slots=True)
class BatchConfig:
    max_changes: int = 0  # 0: the sink's own default
    max_bytes: int = 16 << 20
    max_seconds: float = 1.0
    retries: int = 5
    retry_backoff_seconds: float = 0.5


@dataclass(slots=True)
class SinkConfig:
    spec: str = "stdout"
    format: str = "changestream"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ControlConfig:
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8750
    token_env: str = "CHANGESTREAM_CONTROL_TOKEN"
    token_file: str = ""


@dataclass(slots=True)
class HeartbeatConfig:
    """The heartbeat statement (changestream.runtime.heartbeat): ``statement`` ("": off),
    run every ``interval_seconds`` while reading a live server."""

    statement: str = ""
    interval_seconds: float = 60.0


@dataclass(slots=True)
class FailoverConfig:
    """Failover between the servers of source.url (changestream.sources.failover): how long
    to wait for a lagging replica to have everything delivered."""

    wait_seconds: float = 30.0


@dataclass(slots=True)
class LogConfig:
    level: str = "warning"
    json: bool = False


@dataclass(slots=True)
class Config:
    """The whole configuration; see ``config/changestream.toml`` for every key."""

    source: SourceConfig = field(default_factory=SourceConfig)
    schema: SchemaConfig = field(default_factory=SchemaConfig)
    start: StartConfig = field(default_factory=StartConfig)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    transactions: TransactionsConfig = field(default_factory=TransactionsConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    sink: SinkConfig = field(default_factory=SinkConfig)
    control: ControlConfig = field(default_factory=ControlConfig)
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    failover: FailoverConfig = field(default_factory=FailoverConfig)
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
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
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
    from changestream.encoding.records import FORMATS
    from changestream.sources.live import StartPosition

    if config.source.tls.mode not in TLS_MODES:
        raise ConfigError(f"source.tls.mode: {config.source.tls.mode!r} is not one of "
                          f"{', '.join(TLS_MODES)}")
    if config.source.tls.mode in ("verify-ca", "verify-identity") and not config.source.tls.ca:
        raise ConfigError(f"source.tls.ca: needed for tls mode {config.source.tls.mode}")
    try:
        StartPosition.parse(config.start.at or "earliest")
    except ValueError as exc:
        raise ConfigError(f"start.at: {exc}") from None
    from changestream.snapshot.planning import SNAPSHOT_MODES

    if config.snapshot.mode not in ("", *SNAPSHOT_MODES):
        raise ConfigError(f"snapshot.mode: {config.snapshot.mode!r} is not one of "
                          f"{', '.join(SNAPSHOT_MODES)}")
    if config.snapshot.chunk_rows < 1:
        raise ConfigError("snapshot.chunk_rows: must be positive")
    if config.schema.history not in ("auto", "on", "off"):
        raise ConfigError(f"schema.history: {config.schema.history!r} is not auto, on or off")
    for where in config.schema.skip:
        file, sep, pos = where.rpartition(":")
        if not sep or not file or not pos.isdigit():
            raise ConfigError(f"schema.skip: {where!r} is not FILE:POS (as the error that "
                              "stopped the router printed it)")
    if config.start.until not in ("", "caught-up"):
        raise ConfigError(f"start.until: {config.start.until!r} is not '' or 'caught-up'")
    if config.sink.format not in FORMATS:
        raise ConfigError(f"sink.format: {config.sink.format!r} is not one of "
                          f"{', '.join(FORMATS)}")
    if config.log.level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"log.level: {config.log.level!r} is not debug, info, warning or "
                          "error")
    if config.batch.max_changes < 0:
        raise ConfigError(f"batch.max_changes: must be positive (or 0: the sink's default), "
                          f"got {config.batch.max_changes}")
    for key, value in (("batch.max_bytes", config.batch.max_bytes),
                       ("transactions.max_buffered_changes",
                        config.transactions.max_buffered_changes),
                       ("source.server_id", config.source.server_id)):
        if value <= 0:
            raise ConfigError(f"{key}: must be positive, got {value}")
    if not 0 < config.source.server_id < 1 << 32:
        raise ConfigError(f"source.server_id: {config.source.server_id} does not fit in 32 bits")
    _check_durations(config)
    from changestream.runtime.heartbeat import HeartbeatSettings

    HeartbeatSettings.from_config(config)  # its checks name the key
    if not 0 < config.control.port < 65536:
        raise ConfigError(f"control.port: {config.control.port} is not a TCP port")
    if config.control.enabled and not is_loopback(config.control.host) and \
            not config.control_token():
        raise ConfigError(f"control.host: {config.control.host} is reachable from other "
                          "machines; the endpoint listens beyond the loopback only with a "
                          "token (control.token_file, or the variable control.token_env "
                          "names)")


def _check_durations(config: Config) -> None:
    """Every setting in seconds (the float ones) is finite and not negative; the heartbeat's
    and a batch's are positive."""
    for key, value in _floats(config, ""):
        positive = key in ("source.heartbeat_seconds", "batch.max_seconds")
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise ConfigError(f"{key}: must be a {'positive' if positive else 'non-negative'} "
                              f"number of seconds, got {value}")
    if config.batch.retries < 0:
        raise ConfigError(f"batch.retries: must not be negative, got {config.batch.retries}")


def _floats(section: Any, prefix: str) -> list[tuple[str, float]]:
    """``(key, value)`` of each float setting of ``section`` and the sections in it."""
    found = []
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            found.extend(_floats(value, f"{prefix}{f.name}."))
        elif isinstance(value, float):
            found.append((f"{prefix}{f.name}", value))
    return found


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

