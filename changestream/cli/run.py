"""``changestream run`` and ``changestream config check``: the standalone router process."""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import threading
from types import FrameType
from typing import Any

import orjson

from changestream.delivery.lease import LeaseLostError
from changestream.model.errors import ChangestreamError, ConfigError, SinkError
from changestream.runtime.config import Config, load_config
from changestream.runtime.logs import configure_logging
from changestream.runtime.router import Router
from changestream.runtime.standby import close_role

log = logging.getLogger("changestream")

EXIT_OK = 0
EXIT_CONFIG_ERROR = 2
EXIT_SOURCE_ERROR = 3
EXIT_SINK_ERROR = 4
EXIT_LEASE_LOST = 5

# command-line option -> configuration key
_OPTION_KEYS = {
    "source": "source.url", "sink": "sink.spec", "start": "start.at", "until": "start.until",
    "position_file": "start.position_file", "position_override": "start.position_override",
    "format": "sink.format", "include": "filter.include", "exclude": "filter.exclude",
    "exclude_column": "filter.exclude_columns", "batch_changes": "batch.max_changes",
    "batch_seconds": "batch.max_seconds",
    "max_buffered_changes": "transactions.max_buffered_changes",
    "spill_dir": "transactions.spill_dir", "server_id": "source.server_id",
    "control_port": "control.port", "snapshot": "snapshot.mode",
    "heartbeat_statement": "heartbeat.statement",
    "heartbeat_interval": "heartbeat.interval_seconds",
    "lease_seconds": "standby.lease_seconds",
}


def exit_code(exc: BaseException) -> int:
    """The process exit code for an error: config 2, source 3, sink 4, lease lost 5."""
    if isinstance(exc, LeaseLostError):
        return EXIT_LEASE_LOST
    if isinstance(exc, ConfigError):
        return EXIT_CONFIG_ERROR
    if isinstance(exc, SinkError):
        return EXIT_SINK_ERROR
    return EXIT_SOURCE_ERROR


def sink_options(pairs: list[str]) -> dict[str, Any]:
    """``--sink-option`` values as keyword arguments: ``KEY=VALUE`` (a string), and
    ``KEY.SUB=VALUE`` collected into a mapping under ``KEY`` (e.g. the Spark sink's conf)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"sink option {pair!r}: give KEY=VALUE")
        name, dot, sub = key.partition(".")
        if dot:
            mapping = options.setdefault(name, {})
            if not isinstance(mapping, dict):
                raise ConfigError(f"sink option {pair!r}: {name} is already a value")
            mapping[sub] = value
        elif isinstance(options.get(name), dict):
            raise ConfigError(f"sink option {pair!r}: {name} is already a mapping")
        else:
            options[name] = value
    return options


def config_from_args(args: argparse.Namespace) -> Config:
    """The configuration file, the environment, then the command line's options."""
    overrides: dict[str, Any] = {}
    for option, key in _OPTION_KEYS.items():
        value = getattr(args, option, None)
        if value is not None:
            overrides[key] = value
    if getattr(args, "control_port", None) is not None:
        overrides["control.enabled"] = True
    if getattr(args, "standby", False):
        overrides["standby.enabled"] = True
    if getattr(args, "include_sql", False):
        overrides["transactions.include_sql"] = True
    if getattr(args, "log_json", False):
        overrides["log.json"] = True
    if args.verbose:
        overrides["log.level"] = "info" if args.verbose == 1 else "debug"
    config = load_config(args.config, overrides=overrides)
    config.sink.options.update(sink_options(args.sink_option or []))
    return config


def run_router(args: argparse.Namespace) -> int:
    """Run until caught up, stopped by SIGTERM/SIGINT (exit 0), or failed (exit 2/3/4)."""
    # The router allocates many short-lived objects per change and keeps few cycles: the
    # default collection thresholds spend about 6% of its time in the cyclic collector.
    gc.set_threshold(100_000, 50, 100)
    try:
        config = config_from_args(args)
        configure_logging(config.log.level, json_lines=config.log.json)
        router = Router(config)
        if not args.no_preflight and router.standby is None:
            router.preflight()
    except ChangestreamError as exc:
        print(f"changestream run: {exc}", file=sys.stderr)
        return exit_code(exc)

    def graceful(signum: int, frame: FrameType | None) -> None:
        log.warning("%s: stopping at the next transaction boundary",
                    signal.Signals(signum).name)
        router.stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, graceful)
        signal.signal(signal.SIGINT, graceful)
    control = None
    bar = None
    if sys.stderr.isatty():
        from changestream.runtime.progress_bar import ProgressBar

        bar = ProgressBar(router.status)
        bar.start()
    try:
        if config.control.enabled:
            from changestream.runtime.control import ControlServer

            control = ControlServer(router, config.control.port, config.control_token(),
                                    config.control.host)
            control.start()
        if router.standby is not None:
            # A standby waits for the lease before anything else, the server's checks too.
            if not router.standby.take():
                return EXIT_OK  # stopped while waiting
            if not args.no_preflight:
                router.preflight()
        router.run()
    except ChangestreamError as exc:
        # A standby whose lease was taken over says so, whatever stopped it first.
        reported = close_role(router.standby, exc) or exc
        print(f"changestream run: {reported}", file=sys.stderr)
        return exit_code(reported)
    finally:
        close_role(router.standby, router.error)  # after a failed pre-flight, say
        if control is not None:
            control.stop()
        if bar is not None:
            bar.stop()
    return EXIT_OK


def config_check(args: argparse.Namespace) -> int:
    """Validate a configuration file; print it resolved, secrets masked (exit 0 or 2)."""
    try:
        config = load_config(args.file)
    except ConfigError as exc:
        print(f"changestream config check: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    sys.stdout.buffer.write(orjson.dumps(config.as_dict(masked=True),
                                         option=orjson.OPT_INDENT_2) + b"\n")
    return EXIT_OK
