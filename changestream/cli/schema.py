"""The ``changestream schema`` command's arguments. Its commands
(:mod:`changestream.cli.schema_commands`, which needs the MySQL client, the shadow server and
the sinks) are imported only when one runs: building the parser is part of every start of
``changestream run``."""

from __future__ import annotations

import argparse
from typing import Any


def _command(name: str) -> Any:
    """The handler ``name`` of :mod:`changestream.cli.schema_commands`, imported when called."""

    def run(args: argparse.Namespace) -> int:
        from changestream.cli import schema_commands as commands

        handler = getattr(commands, name)
        return int(handler(args))

    return run


def add_parser(sub: Any) -> None:
    """The ``schema`` command and its subcommands on ``sub`` (argparse subparsers)."""
    p = sub.add_parser("schema", help="show or repair the schema history")
    commands = p.add_subparsers(dest="schema_command", required=True)
    show = commands.add_parser("show", help="the history at the saved position")
    show.add_argument("tables", nargs="*", metavar="DB.TABLE")
    _where(show)
    show.add_argument("--format", choices=("text", "json"), default="text")
    show.set_defaults(func=_command("cmd_show"), verbose=0, source=None)
    skip = commands.add_parser("skip", help="leave the DDL at FILE:POS out of the history")
    skip.add_argument("where", metavar="FILE:POS")
    skip.add_argument("--position-file", help="the router's position file (without it: "
                      "how to skip the statement for a history a sink keeps)")
    skip.set_defaults(func=_command("cmd_skip"))
    reseed = commands.add_parser("reseed", help="build the history again from the server "
                                 "for the saved position")
    _where(reseed)
    reseed.add_argument("--source", help="mysql://user[:password]@host:port or mariadb://...")
    reseed.add_argument("--shadow-server", help="command that runs the shadow's server program")
    reseed.add_argument("--include", action="append", metavar="PATTERN",
                        help="the router's include patterns (its scope), as for run")
    reseed.add_argument("--exclude", action="append", metavar="PATTERN")
    reseed.set_defaults(func=_command("cmd_reseed"), verbose=0)


def _where(parser: argparse.ArgumentParser) -> None:
    """The options that say where the history is: a position file or a sink."""
    parser.add_argument("--position-file", help="the router's position file (the history "
                        "is stored beside it)")
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--sink", help="a sink that keeps the history beside its own "
                        "position (spark:iceberg), instead of --position-file")
    parser.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE")
