"""``changestream schema``: look at the stored schema history and repair it.

- ``show``: the history at the saved position (every table, or the ones named), as text
  or JSON.
- ``skip FILE:POS``: leave the DDL statement logged there out of the history (for a
  statement the shadow server cannot run); the next ``changestream run`` applies it.
- ``reseed``: build the history again from the server's catalog for the saved position
  (tables a DDL changed between that position and the head are left out, so run it while
  the router is stopped at the head to get every table) and make the position refer to it.

All of them work on a position file; the router must not be running for ``skip`` and
``reseed`` to take effect (they are read when it starts).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import orjson
import pymysql

from changestream.changes import Position
from changestream.errors import ChangestreamError, ConfigError
from changestream.position_store import PositionStore
from changestream.schema.definition import TableDefinition
from changestream.schema.history import SchemaState, encode_state
from changestream.schema.startup import (
    HistorySettings,
    open_history_at,
    scan_queries,
    scan_server_id,
)
from changestream.schema.store import SchemaHistoryStore
from changestream.sources.live import LiveSource, StartPosition

EXIT_OK, EXIT_CONFIG, EXIT_SOURCE = 0, 2, 3


def add_parser(sub: Any) -> None:
    """The ``schema`` command and its subcommands on ``sub`` (argparse subparsers)."""
    p = sub.add_parser("schema", help="show or repair the schema history")
    commands = p.add_subparsers(dest="schema_command", required=True)
    show = commands.add_parser("show", help="the history at the saved position")
    show.add_argument("tables", nargs="*", metavar="DB.TABLE")
    show.add_argument("--position-file", required=True)
    show.add_argument("--format", choices=("text", "json"), default="text")
    show.set_defaults(func=cmd_show)
    skip = commands.add_parser("skip", help="leave the DDL at FILE:POS out of the history")
    skip.add_argument("where", metavar="FILE:POS")
    skip.add_argument("--position-file", required=True)
    skip.set_defaults(func=cmd_skip)
    reseed = commands.add_parser("reseed", help="build the history again from the server "
                                 "for the saved position")
    reseed.add_argument("--position-file", required=True)
    reseed.add_argument("--config", metavar="FILE", help="TOML configuration file")
    reseed.add_argument("--source", help="mysql://user[:password]@host:port or mariadb://...")
    reseed.add_argument("--shadow-server", help="command that runs the shadow's server program")
    reseed.set_defaults(func=cmd_reseed, verbose=0, sink_option=[])


def _fail(command: str, exc: BaseException, code: int) -> int:
    print(f"changestream schema {command}: {exc}", file=sys.stderr)
    return code


def _saved(position_file: str) -> tuple[PositionStore, Position]:
    store = PositionStore(position_file)
    position = store.load()
    if position is None:
        raise ConfigError(f"position file {position_file} does not exist")
    return store, position


def cmd_show(args: argparse.Namespace) -> int:
    try:
        _, position = _saved(args.position_file)
        if position.schema_history is None:
            raise ConfigError(f"position {position} in {args.position_file} has no schema "
                              "history (the router keeps one only when the binlog lacks "
                              "column names; see docs/schema-history.md)")
        flavor, state = SchemaHistoryStore(args.position_file).load(position.schema_history)
    except ChangestreamError as exc:
        return _fail("show", exc, EXIT_CONFIG)
    wanted = set(args.tables)
    tables = [d for key, d in sorted(state.tables.items())
              if not wanted or f"{key[0]}.{key[1]}" in wanted]
    missing = wanted - {d.qualified_name for d in tables}
    if args.format == "json":
        shown = SchemaState({}, {d.key: d for d in tables})
        sys.stdout.buffer.write(encode_state(flavor, shown) + b"\n")
    else:
        print(f"# schema history at {position} ({flavor}, {len(state.tables)} tables)")
        for definition in tables:
            print(_text(definition))
    if missing:
        print(f"not in the history: {', '.join(sorted(missing))}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


def _text(definition: TableDefinition) -> str:
    key = f" primary key ({', '.join(definition.primary_key)})" if definition.primary_key \
        else " no primary key"
    lines = [f"{definition.qualified_name}:{key}"]
    for column in definition.columns:
        extra = (f" {column.generated} GENERATED" if column.generated else "") + (
            " INVISIBLE" if column.invisible else "")
        collation = f" collation {column.collation_id}" if column.collation_id else ""
        lines.append(f"  {column.name} {column.column_type}{collation}{extra}")
    return "\n".join(lines)


def cmd_skip(args: argparse.Namespace) -> int:
    file, sep, pos = args.where.rpartition(":")
    if not sep or not file or not pos.isdigit():
        return _fail("skip", ConfigError(f"{args.where!r}: give FILE:POS, as the error that "
                                         "stopped the router printed it"), EXIT_CONFIG)
    store = SchemaHistoryStore(args.position_file)
    store.add_skip(f"{file}:{pos}")
    print(f"the DDL at {file}:{pos} will be left out of the schema history by the next run "
          f"({store.skip_file})")
    return EXIT_OK


def cmd_reseed(args: argparse.Namespace) -> int:
    from changestream.router import Router, RouterSettings
    from changestream.run import config_from_args
    from changestream.sinks.callback import CallbackSink

    try:
        config = config_from_args(args)
        settings = RouterSettings.from_config(config)
        position_store, position = _saved(args.position_file)
        shadow_server = args.shadow_server or settings.schema.shadow_server
        router = Router(settings, CallbackSink(lambda batch: None))
        if router.spec.kind != "server":
            raise ConfigError("reseed needs a server source (--source mysql://... or "
                              "mariadb://...)")

        def scan(begin: StartPosition, head: tuple[str, int]) -> Any:
            return scan_queries(LiveSource(router.spec.connection, begin,
                                           server_id=scan_server_id(settings.server_id),
                                           blocking=False),
                                head)

        def connect() -> Any:
            return pymysql.connect(connect_timeout=10, **router.spec.connection)

        tracker = open_history_at(
            HistorySettings("on", shadow_server), connect, scan,
            StartPosition("file", file=position.file, pos=position.pos), None, None,
            settings.filter.database)
        try:
            history = tracker.history
            digest, data = history.stored_at(position.file, position.pos)
            tables = len(history.current.tables)
        finally:
            tracker.shadow.close()
        position_store.history_store.save(digest, data)
        saved = orjson.loads(position_store.path.read_bytes())
        saved["schema_history"] = digest
        tmp = position_store.path.with_name(position_store.path.name + ".tmp")
        tmp.write_text(json.dumps(saved))
        tmp.replace(position_store.path)
        position_store.history_store.prune(keep=digest)
    except ConfigError as exc:
        return _fail("reseed", exc, EXIT_CONFIG)
    except ChangestreamError as exc:
        return _fail("reseed", exc, EXIT_SOURCE)
    print(f"schema history for {position} seeded from the server: {tables} tables")
    return EXIT_OK
