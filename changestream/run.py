"""``changestream run``: the standalone router process."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from changestream.actors.sink import BatchSettings
from changestream.errors import ChangestreamError, ConfigError, SinkError
from changestream.filters import ChangeFilter
from changestream.plugins import make_sink
from changestream.router import Router, RouterSettings

log = logging.getLogger("changestream")

EXIT_OK = 0
EXIT_CONFIG_ERROR = 2
EXIT_SOURCE_ERROR = 3
EXIT_SINK_ERROR = 4


def exit_code(exc: BaseException) -> int:
    """The process exit code for an error: config 2, source 3, sink 4."""
    if isinstance(exc, ConfigError):
        return EXIT_CONFIG_ERROR
    if isinstance(exc, SinkError):
        return EXIT_SINK_ERROR
    return EXIT_SOURCE_ERROR


def settings_from_args(args: argparse.Namespace) -> RouterSettings:
    return RouterSettings(
        source=args.source,
        start=args.start,
        until=args.until,
        position_file=args.position_file,
        position_override=args.position_override,
        password=os.environ.get("CHANGESTREAM_PASSWORD"),
        server_id=args.server_id,
        batch=BatchSettings(max_changes=args.batch_changes, max_seconds=args.batch_seconds),
        filter=ChangeFilter(args.include, args.exclude, args.exclude_column),
        max_buffered_changes=args.max_buffered_changes,
        spill_dir=args.spill_dir,
    )


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


def run_router(args: argparse.Namespace) -> int:
    """Run until caught up, stopped by SIGTERM/SIGINT (exit 0), or failed (exit 2/3/4)."""
    level = logging.INFO if args.verbose == 1 else logging.DEBUG if args.verbose > 1 \
        else logging.WARNING
    logging.getLogger("changestream").setLevel(level)
    try:
        settings = settings_from_args(args)
        options = {"format": args.format} if args.sink.split(":")[0] in ("jsonl", "stdout") \
            else {}
        options.update(sink_options(getattr(args, "sink_option", None) or []))
        router = Router(settings, make_sink(args.sink, **options))
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
    try:
        router.run()
    except ChangestreamError as exc:
        print(f"changestream run: {exc}", file=sys.stderr)
        return exit_code(exc)
    return EXIT_OK
