"""``changestream backfill``: archived binlog files into the changelog and mirror tables of
a ``spark:iceberg`` sink, decoded in parallel (see docs/sinks.md, "Backfilling
archived binlogs")."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from changestream.model.errors import ChangestreamError, ConfigError

EXIT_OK, EXIT_CONFIG = 0, 2
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def add_parser(sub: Any) -> None:
    """The ``backfill`` command on ``sub`` (argparse subparsers)."""
    p = sub.add_parser("backfill", help="land archived binlog files into a spark:iceberg "
                       "sink's tables, decoded in parallel; run then goes on live")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="binlog files, folders or globs (gzip'd files too)")
    p.add_argument("--config", metavar="FILE", help="TOML configuration file")
    p.add_argument("--sink", help="the sink (spark:iceberg)")
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE",
                   help="the sink's options as for run, e.g. warehouse=/data/wh, "
                   "master=spark://host:7077")
    p.add_argument("--include", action="append", metavar="DB[.TABLE]",
                   help="only these tables (shell patterns; repeatable)")
    p.add_argument("--exclude", action="append", metavar="DB[.TABLE]",
                   help="not these tables (shell patterns; repeatable)")
    p.add_argument("--exclude-column", action="append", metavar="DB.TABLE.COLUMN",
                   help="leave these columns out (shell patterns; repeatable)")
    p.add_argument("--split-size", default="256M", metavar="SIZE",
                   help="cut MySQL files bigger than this into ranges decoded apart "
                   "(default 256M; 0: whole files)")
    p.add_argument("--staging", metavar="FOLDER",
                   help="where decoded rows wait to be landed (default: in the warehouse); "
                   "the driver and every executor must reach it")
    p.add_argument("--commit-rows", type=int, default=1_000_000, metavar="N",
                   help="land a table's changelog and mirror in commits of about N rows "
                   "(default 1,000,000; the rows of a commit are held in memory)")
    p.add_argument("--decode-on", choices=("auto", "local", "spark"), default="auto",
                   help="where units are decoded: auto (processes of this machine on a "
                   "local master, else Spark's executors; the default), local or spark")
    p.add_argument("--keep-staging", action="store_true",
                   help="leave the staged files when done")
    p.add_argument("--schema-history", choices=("auto", "on", "off"),
                   help="name the columns of files that do not log them "
                   "(binlog_row_metadata=MINIMAL) from the DDL the files hold, replayed on a "
                   "shadow server (default: the config's schema.history, else auto: when the "
                   "files' first table maps lack names)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.set_defaults(func=cmd_backfill)


def parse_size(text: str) -> int:
    """``0``, ``512k``, ``256M``, ``2G`` as bytes."""
    number = text.strip().lower().removesuffix("b")
    unit = number[-1:] if number[-1:] in _SIZE_UNITS else ""
    try:
        value = float(number[:-1] if unit else number)
    except ValueError:
        raise ConfigError(f"--split-size: {text!r} is not a size (e.g. 0, 64M, 1G)") from None
    return int(value * _SIZE_UNITS[unit])


def cmd_backfill(args: argparse.Namespace) -> int:
    from changestream.cli.run import config_from_args, configure_logging
    from changestream.delivery.plugins import make_sink
    from changestream.runtime.settings import sink_options
    from changestream.sinks.backfill import BackfillSettings, run_backfill
    from changestream.transactions.filters import ChangeFilter

    sink: Any = None
    try:
        split = parse_size(args.split_size)
        config = config_from_args(argparse.Namespace(
            **{k: v for k, v in vars(args).items()
               if k not in ("format", "paths", "commit_rows", "schema_history",
                           "decode_on")}))
        configure_logging(config.log.level, json_lines=config.log.json)
        if config.sink.spec != "spark:iceberg":
            raise ConfigError(f"sink {config.sink.spec!r}: backfill lands into a spark:iceberg "
                              "sink (give --sink spark:iceberg and its --sink-option "
                              "warehouse=...)")
        only = ChangeFilter(config.filter.include, config.filter.exclude,
                            config.filter.exclude_columns)
        if args.commit_rows < 1:
            raise ConfigError(f"--commit-rows: {args.commit_rows} is not a positive number")
        settings = BackfillSettings(split_bytes=split, staging=args.staging,
                                    commit_rows=args.commit_rows,
                                    keep_staging=args.keep_staging,
                                    decode_on=args.decode_on,
                                    change_filter=None if only.everything else only,
                                    schema_history=args.schema_history
                                    or config.schema.history,
                                    shadow_server=config.schema.shadow_server or None)
        sink = make_sink(config.sink.spec, **sink_options(config))
        sink.open()

        def progress(manifest: Any, unit: Any) -> None:
            if args.format == "json":
                print(json.dumps({"unit": unit.describe(), "rows": manifest.rows,
                                  "transactions": manifest.transactions}), flush=True)
            else:
                print(f"{unit.describe()}: {manifest.transactions} transactions, "
                      f"{manifest.rows} rows", flush=True)

        report = run_backfill(sink.spark, sink.catalog, str(sink.warehouse), args.paths,
                              settings, progress)
        if args.format == "json":
            print(json.dumps(report.as_dict()), flush=True)
        else:
            rate = report.rows / report.seconds if report.seconds else 0.0
            print(f"backfilled {report.rows} rows of {report.transactions} transactions from "
                  f"{report.files} files ({report.units} units) in {report.seconds:.1f} s "
                  f"({rate:,.0f} rows/s); position {report.position}", flush=True)
    except (ValueError, ConfigError) as exc:
        print(f"changestream backfill: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except ChangestreamError as exc:
        from changestream.cli.run import exit_code

        print(f"changestream backfill: {exc}", file=sys.stderr)
        code: int = exit_code(exc)
        return code
    finally:
        if sink is not None:
            sink.close()
    return EXIT_OK
