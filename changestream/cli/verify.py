"""``changestream verify DB.TABLE...``: compare mirrors with their source tables while both
run, without locks (docs/verify.md). Exit 0: no difference; 1: differences (one line per
key); 2: configuration; 3: the source; 4: the sink."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from changestream.model.errors import ChangestreamError, ConfigError

EXIT_SAME, EXIT_DIFFERENT = 0, 1


def add_parser(sub: Any) -> None:
    """The ``verify`` command on ``sub`` (argparse subparsers)."""
    p = sub.add_parser("verify", help="compare mirrors with their source tables while the "
                       "router runs (no locks); exit 1 when a row differs")
    p.add_argument("tables", nargs="+", metavar="DB.TABLE")
    p.add_argument("--config", metavar="FILE", help="TOML configuration file")
    p.add_argument("--source", help="the server (mariadb://... or mysql://...)")
    p.add_argument("--sink", help="the router's sink (spark:iceberg)")
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE",
                   help="the sink's options as for run, e.g. warehouse=/data/wh")
    p.add_argument("--server-id", type=int, help="replica id base (the verifier's binlog "
                   "follower uses this plus 7919)")
    p.add_argument("--chunk-rows", type=int, default=10_000,
                   help="rows compared at a time (default 10000)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="how long to wait for the sink to land a chunk's window "
                   "(default 300)")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.set_defaults(func=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    from changestream.cli.run import config_from_args, configure_logging, exit_code
    from changestream.delivery.plugins import make_sink
    from changestream.runtime.settings import RouterSettings, sink_options

    sink: Any = None
    try:
        if args.chunk_rows < 1 or args.timeout <= 0:
            raise ConfigError("verify: --chunk-rows and --timeout must be positive")
        config = config_from_args(args)
        configure_logging(config.log.level, json_lines=config.log.json)
        if config.sink.spec != "spark:iceberg":
            raise ConfigError(f"sink {config.sink.spec!r}: verify compares the mirrors of a "
                              "spark:iceberg sink (give --sink spark:iceberg and its "
                              "--sink-option warehouse=...)")
        from changestream.sinks.spark.iceberg.verify_target import IcebergMirrors
        from changestream.verify.verifier import Verifier

        settings = RouterSettings.from_config(config)
        sink = make_sink(config.sink.spec, **sink_options(config))
        sink.open()
        verifier = Verifier(settings, IcebergMirrors(sink), args.chunk_rows, args.timeout)
        differ = False
        for name in args.tables:
            report = verifier.verify(name)
            differ = differ or bool(report.differences)
            if args.output == "json":
                print(json.dumps(report.as_dict()), flush=True)
                continue
            for d in report.differences:
                what = f" ({', '.join(d.columns)})" if d.columns else ""
                print(f"{name} {list(d.as_dict()['key'])}: {d.kind}{what}", flush=True)
            print(f"{name}: {report.rows} rows compared in {report.chunks} chunks, "
                  f"{len(report.differences)} differ, {report.left_out} left out (changed "
                  f"while compared) ({report.seconds} s)", flush=True)
    except (ValueError, ChangestreamError) as exc:
        print(f"changestream verify: {exc}", file=sys.stderr)
        return exit_code(exc) if isinstance(exc, ChangestreamError) else 2
    except Exception as exc:  # Spark's (Py4J): its message in one line, no traceback
        from changestream.sinks.spark.options import java_cause

        print(f"changestream verify: {java_cause(exc)}", file=sys.stderr)
        return 4
    finally:
        if sink is not None:
            sink.close()
    return EXIT_DIFFERENT if differ else EXIT_SAME
