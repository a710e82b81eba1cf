"""The ``changestream`` command line: ``inspect`` and ``extract`` (and ``run``)."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from changestream.model.errors import ChangestreamError
from changestream.runtime.memory import fewer_malloc_arenas

if TYPE_CHECKING:
    from changestream.cli.scan import TransactionSummary
    from changestream.decoding.events import Event

# Each command imports what it needs when it runs: a process imports only its own
# command's modules (``run`` starts sooner; docs/performance.md, "Start").

EXIT_OK = 0
EXIT_BINLOG_ERROR = 1
EXIT_USAGE = 2
EXIT_CONFIG_ERROR = 2
EXIT_SOURCE_ERROR = 3
EXIT_SINK_ERROR = 4


def _progress(events: Iterator[Event], path: Path) -> Iterator[Event]:
    """Pass events through, drawing a progress bar on stderr (only on a terminal)."""
    total = path.stat().st_size or 1
    last = -1
    for event in events:
        pct = min(100, event.header.offset * 100 // total)
        if pct != last:
            last = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r{path.name} [{bar:<25}] {pct:3d}%")
            sys.stderr.flush()
        yield event
    sys.stderr.write("\r" + " " * (len(path.name) + 35) + "\r")


def _text_line(t: TransactionSummary) -> str:
    tables = ", ".join(
        f"{name} +{c['insert']} ~{c['update']} -{c['delete']}" for name, c in t.tables.items())
    ts = t.commit_ts.isoformat(timespec="microseconds") if t.commit_ts else "-"
    length = f" len={t.transaction_length}" if t.transaction_length is not None else ""
    return (f"{Path(t.file or '-').name}:{t.start}-{t.end} {t.gtid or '-'} {t.kind} {t.status}"
            f" events={t.events}{length} {ts} {tables}").rstrip()


def cmd_inspect(args: argparse.Namespace) -> int:
    import orjson

    from changestream.cli.scan import scan_transactions
    from changestream.sources.files import FileSource, binlog_files

    status = EXIT_OK
    warn = lambda message: print(f"warning: {message}", file=sys.stderr)  # noqa: E731
    try:
        files = binlog_files(args.paths)
    except ChangestreamError as exc:
        print(f"changestream inspect: {exc}", file=sys.stderr)
        return EXIT_BINLOG_ERROR
    for path in files:
        events: Iterator[Event] = iter(FileSource([path], verify_checksums=not args.no_verify))
        if sys.stderr.isatty() and not args.no_progress:
            events = _progress(events, path)
        try:
            for t in scan_transactions(events, on_warning=warn):
                if args.format == "jsonl":
                    sys.stdout.buffer.write(orjson.dumps(t.as_dict()) + b"\n")
                else:
                    print(_text_line(t))
        except ChangestreamError as exc:
            sys.stdout.flush()
            print(f"changestream inspect: {exc}", file=sys.stderr)
            status = EXIT_BINLOG_ERROR
    return status


def cmd_extract(args: argparse.Namespace) -> int:
    from changestream.cli.extract import extract_transaction

    try:
        result = extract_transaction(args.paths, args.gtid, args.output)
    except ChangestreamError as exc:
        print(f"changestream extract: {exc}", file=sys.stderr)
        return EXIT_BINLOG_ERROR
    print(f"extracted {args.gtid} ({result.events} events, {result.file} "
          f"{result.start}-{result.end}) to {args.output}", file=sys.stderr)
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from changestream.cli.run import run_router

    return run_router(args)


def cmd_quickstart(args: argparse.Namespace) -> int:
    from changestream.cli.quickstart import main as quickstart

    return quickstart(args)


def cmd_config_check(args: argparse.Namespace) -> int:
    from changestream.cli.run import config_check

    return config_check(args)


def cmd_config_defaults(args: argparse.Namespace) -> int:
    from changestream.runtime.config import Config
    from changestream.runtime.config_render import render_defaults

    sys.stdout.write(render_defaults(Config()))
    return EXIT_OK


class _PrintVersion(argparse.Action):
    """``--version``: print ``changestream VERSION`` and exit 0 (the version is looked up
    only then: the installed package's metadata, from pyproject.toml)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object):
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        import changestream

        print(f"changestream {changestream.__version__}")
        parser.exit()


def _parser_in(module: str) -> Callable[[argparse._SubParsersAction], None]:
    """What adds the parser(s) ``module``'s ``add_parser`` makes, imported only then."""

    def add(sub: argparse._SubParsersAction) -> None:
        importlib.import_module(module).add_parser(sub)

    return add


def _add_inspect(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="list the transactions in binlog files")
    p.add_argument("paths", nargs="+", metavar="FILE|DIR")
    p.add_argument("--format", choices=("text", "jsonl"), default="text")
    p.add_argument("--no-verify", action="store_true", help="do not verify CRC32 checksums")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal")
    p.set_defaults(func=cmd_inspect)


def _add_extract(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("extract", help="cut one transaction out as a standalone binlog")
    p.add_argument("--gtid", required=True)
    p.add_argument("paths", nargs="+", metavar="FILE|DIR")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=cmd_extract)


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the router: binlog changes into a sink",
                       description="Options given here override the configuration file, "
                       "which overrides the defaults (see config/changestream.toml).")
    p.add_argument("--config", metavar="FILE", help="TOML configuration file")
    p.add_argument("--source",
                   help="mysql://user[:password]@host:port, mariadb://..., file:///path")
    p.add_argument("--sink", help="stdout (default), jsonl:PATH, spark:MODE, module:Class")
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a keyword argument for the sink adapter, e.g. warehouse=/data/wh "
                        "(KEY.SUB=VALUE collects a mapping, e.g. conf.spark.driver.memory=2g; "
                        "repeatable)")
    p.add_argument("--start",
                   help="earliest|latest|gtid:SET|FILE:POS, used when no position is saved "
                   "(unset: after a snapshot, from where it began; else earliest)")
    p.add_argument("--snapshot", choices=("initial", "when-needed", "initial-only", "never"),
                   help="read the tables' existing rows first (default: initial when no "
                   "position is saved and no --start is given, else never)")
    p.add_argument("--until", choices=("caught-up",),
                   help="stop once everything the source had at the start is delivered")
    p.add_argument("--position-file", help="where the resume position is kept")
    p.add_argument("--position-override",
                   help="FILE:POS or gtid:SET to resume from instead of the saved position")
    p.add_argument("--format", choices=("changestream", "original"),
                   help="change record format of the JSON-lines sinks")
    p.add_argument("--include", action="append", metavar="DB[.TABLE]",
                   help="only these tables (shell patterns; repeatable)")
    p.add_argument("--exclude", action="append", metavar="DB[.TABLE]",
                   help="not these tables (shell patterns; repeatable)")
    p.add_argument("--exclude-column", action="append", metavar="DB.TABLE.COLUMN",
                   help="leave these columns out (shell patterns; repeatable)")
    p.add_argument("--batch-changes", type=int, help="cut a micro-batch at this many changes")
    p.add_argument("--batch-seconds", type=float,
                   help="cut a micro-batch after this many seconds")
    p.add_argument("--heartbeat-statement", metavar="SQL",
                   help="run this on the live source every --heartbeat-interval seconds, so "
                        "that quiet tables' position moves on (off by default)")
    p.add_argument("--heartbeat-interval", type=float, metavar="SECONDS",
                   help="how often the heartbeat statement runs (default 60)")
    p.add_argument("--max-buffered-changes", type=int,
                   help="spill a transaction to disk above this many changes")
    p.add_argument("--spill-dir", help="folder for spilled transactions (default: temp)")
    p.add_argument("--include-sql", action="store_true",
                   help="row changes carry the statement that made them (off by default)")
    p.add_argument("--server-id", type=int,
                   help="replica server id to connect with (unique among replicas)")
    p.add_argument("--control-port", type=int,
                   help="serve /status, /metrics, /pause, /resume on 127.0.0.1:PORT")
    p.add_argument("--standby", action="store_true",
                   help="write only while holding the job's lease (beside the position "
                        "file); else wait to take it over")
    p.add_argument("--lease-seconds", type=float, metavar="SECONDS",
                   help="a standby takes over a lease not renewed this long (default 10)")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the checks of the server's settings at start")
    p.add_argument("--log-json", action="store_true", help="log one JSON object per line")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.set_defaults(func=cmd_run)


def _add_config(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="configuration tools")
    config_sub = p.add_subparsers(dest="config_command", required=True)
    c = config_sub.add_parser("check", help="validate a configuration file and print it "
                              "resolved (environment applied, secrets masked)")
    c.add_argument("file", nargs="?", help="TOML configuration file (default: none)")
    c.set_defaults(func=cmd_config_check)
    c = config_sub.add_parser("defaults", help="print a configuration file with every key "
                              "at its default, each explained (config/changestream.toml)")
    c.set_defaults(func=cmd_config_defaults)


def _add_quickstart(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quickstart", help="a private MariaDB, a sample workload, the router "
                       "landing it into local Spark (Iceberg) tables, and the result shown")
    p.add_argument("--dir", default="changestream-quickstart",
                   help="folder for the server, the warehouse and the position (emptied first)")
    p.add_argument("--rows", type=int, default=200, help="orders in the sample workload")
    p.set_defaults(func=cmd_quickstart)


#: Each command and what adds its parser (``snapshot`` and ``tables`` come together).
_control_requests = _parser_in("changestream.cli.control_requests")
COMMANDS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "inspect": _add_inspect, "extract": _add_extract, "run": _add_run, "config": _add_config,
    "schema": _parser_in("changestream.cli.schema"),
    "maintain": _parser_in("changestream.cli.maintain"),
    "verify": _parser_in("changestream.cli.verify"),
    "backfill": _parser_in("changestream.cli.backfill"),
    "snapshot": _control_requests, "tables": _control_requests, "quickstart": _add_quickstart,
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Given the arguments, only the command they name gets its
    parser (building all eleven took a few milliseconds of every start); without one, or
    with an unknown one, all do, for the help and the error."""
    parser = argparse.ArgumentParser(prog="changestream",
                                     description="MySQL/MariaDB change-data-capture router")
    parser.add_argument("--version", action=_PrintVersion)
    sub = parser.add_subparsers(dest="command", required=True)
    named = next((a for a in argv or () if not a.startswith("-")), None)
    adders = [COMMANDS[named]] if named in COMMANDS else COMMANDS.values()
    for add in dict.fromkeys(adders):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    fewer_malloc_arenas()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    args = build_parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader of stdout went away (``| head``): stop quietly, as Python's docs
        # advise, with stdout pointed at /dev/null so that exiting flushes nothing there.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
