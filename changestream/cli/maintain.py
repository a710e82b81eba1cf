"""``changestream maintain``: compaction, snapshot expiry and orphan removal for the
Iceberg tables of a ``spark:iceberg`` sink (see docs/sinks.md, "Keeping tables fast")."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from changestream.model.errors import ChangestreamError, ConfigError

EXIT_OK, EXIT_CONFIG, EXIT_SINK = 0, 2, 4


def add_parser(sub: Any) -> None:
    """The ``maintain`` command on ``sub`` (argparse subparsers)."""
    p = sub.add_parser("maintain", help="compact, expire snapshots and remove orphan files "
                       "of the Iceberg tables a spark:iceberg sink lands into")
    p.add_argument("--config", metavar="FILE", help="TOML configuration file")
    p.add_argument("--sink", help="the router's sink (spark:iceberg)")
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE",
                   help="the sink's options as for run, e.g. warehouse=/data/wh")
    p.add_argument("--expire-after", default="1d", metavar="AGE",
                   help="expire snapshots older than this (default 1d; the newest snapshot "
                   "carrying the router's position is always kept)")
    p.add_argument("--keep-snapshots", type=int, default=10,
                   help="keep at least this many snapshots per table (default 10)")
    p.add_argument("--orphans-after", default="3d", metavar="AGE",
                   help="remove files no snapshot references once older than this "
                   "(default 3d: longer than any write in flight)")
    p.add_argument("--no-compact", action="store_true", help="leave the data files as they are")
    p.add_argument("--no-orphans", action="store_true", help="leave orphan files")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.set_defaults(func=cmd_maintain)


def cmd_maintain(args: argparse.Namespace) -> int:
    from changestream.cli.run import config_from_args, configure_logging
    from changestream.delivery.plugins import make_sink
    from changestream.runtime.settings import sink_options
    from changestream.sinks.spark.iceberg.maintenance import (
        MaintenanceSettings,
        TableUpkeep,
        maintain_catalog,
        parse_age,
    )

    sink: Any = None
    try:
        settings = MaintenanceSettings(
            compact=not args.no_compact,
            expire_after=parse_age(args.expire_after, "--expire-after"),
            keep_snapshots=args.keep_snapshots,
            orphans_after=parse_age(args.orphans_after, "--orphans-after"),
            remove_orphans=not args.no_orphans)
        config = config_from_args(argparse.Namespace(
            **{k: v for k, v in vars(args).items() if k != "format"}))
        configure_logging(config.log.level, json_lines=config.log.json)
        if config.sink.spec != "spark:iceberg":
            raise ConfigError(f"sink {config.sink.spec!r}: maintain looks after the tables "
                              "of a spark:iceberg sink (give --sink spark:iceberg and its "
                              "--sink-option warehouse=...)")
        sink = make_sink(config.sink.spec, **sink_options(config))
        sink.open()

        def report(upkeep: TableUpkeep) -> None:
            if args.format == "json":
                print(json.dumps(upkeep.as_dict()), flush=True)
            else:
                print(f"{upkeep.table}: files {upkeep.files_before} -> {upkeep.files_after}, "
                      f"snapshots {upkeep.snapshots_before} -> {upkeep.snapshots_after}, "
                      f"{upkeep.orphans_removed} orphan files removed ({upkeep.seconds} s)",
                      flush=True)

        done = maintain_catalog(sink.spark, sink.catalog, settings, report,
                                sink.options.control_namespace)
        if args.format == "text":
            print(f"{len(done)} tables maintained in catalog {sink.catalog}")
    except (ValueError, ConfigError) as exc:
        print(f"changestream maintain: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except ChangestreamError as exc:
        print(f"changestream maintain: {exc}", file=sys.stderr)
        return EXIT_SINK
    except Exception as exc:  # Spark's (Py4J): its message in one line, no traceback
        from changestream.sinks.spark.options import java_cause

        print(f"changestream maintain: {java_cause(exc)}", file=sys.stderr)
        return EXIT_SINK
    finally:
        if sink is not None:
            sink.close()
    return EXIT_OK
