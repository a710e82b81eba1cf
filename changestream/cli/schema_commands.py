"""``changestream schema``: look at the stored schema history and repair it.

- ``show``: the history at the saved position (all tables or those named), text or JSON.
- ``skip FILE:POS``: leave the DDL logged there out of the history (a statement the shadow
  server cannot run); the next ``changestream run`` applies it.
- ``reseed``: the history built again from the server's catalog for the saved position.

Each works on a position file or (``--sink``) on a sink that keeps the history beside its
own position; ``skip`` and ``reseed`` take effect at the router's next start
(docs/schema-history.md has the details)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

import orjson

from changestream.delivery.adapter import capabilities_of
from changestream.delivery.position_store import PositionStore
from changestream.model.changes import Position
from changestream.model.errors import ChangestreamError, ConfigError
from changestream.schema.definition import TableDefinition
from changestream.schema.history import SchemaState, encode_state
from changestream.schema.startup import (
    HistorySettings,
    open_history_at,
    scan_queries,
    scan_server_id,
)
from changestream.schema.store import HistoryStorage, SchemaHistoryStore
from changestream.sources.live import LiveSource, StartPosition
from changestream.sources.tls import open_connection

EXIT_OK, EXIT_CONFIG, EXIT_SOURCE = 0, 2, 3


def _fail(command: str, exc: BaseException, code: int) -> int:
    print(f"changestream schema {command}: {exc}", file=sys.stderr)
    return code


class _Saved:
    """The saved position and where its history is stored: a position file or a sink."""

    def __init__(self, args: argparse.Namespace):
        self.sink: Any = None
        if args.position_file:
            self.store: PositionStore | None = PositionStore(args.position_file)
            position = self.store.load()
            self.storage: HistoryStorage = self.store.history_store
            self.where = f"position file {args.position_file}"
        else:
            from changestream.cli.run import config_from_args
            from changestream.delivery.plugins import make_sink
            from changestream.runtime.settings import sink_options

            # show's --format is its output's, not the sink's record format
            config = config_from_args(argparse.Namespace(
                **{k: v for k, v in vars(args).items() if k != "format"}))
            if not args.sink and config.sink.spec == "stdout":
                raise ConfigError("say where the history is: --position-file FILE, or --sink "
                                  "with the sink that keeps it")
            self.store = None
            self.sink = make_sink(config.sink.spec, **sink_options(config))
            position = self.sink.open()
            storage = self.sink.history_storage() \
                if capabilities_of(self.sink).history_storage else None
            if storage is None:
                self.close()
                raise ConfigError(f"sink {config.sink.spec} keeps no schema history; give "
                                  "the router's --position-file")
            self.storage = storage
            self.where = f"sink {config.sink.spec}"
        if position is None:
            self.close()
            raise ConfigError(f"{self.where} holds no position yet")
        self.position: Position = position

    def name(self, digest: str) -> None:
        """Make the saved position name the state ``digest`` (stored already)."""
        if self.store is not None:
            saved = orjson.loads(self.store.path.read_bytes())
            saved["schema_history"] = digest
            tmp = self.store.path.with_name(self.store.path.name + ".tmp")
            tmp.write_text(json.dumps(saved))
            tmp.replace(self.store.path)
        elif capabilities_of(self.sink).store_position:
            self.sink.store_position(replace(self.position, schema_history=digest))
        else:
            raise ConfigError(f"{self.where} cannot store a position alone")
        self.storage.prune(keep=digest)

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()
            self.sink = None


def cmd_show(args: argparse.Namespace) -> int:
    saved: _Saved | None = None
    try:
        saved = _Saved(args)
        position = saved.position
        if position.schema_history is None:
            raise ConfigError(f"position {position} in {saved.where} has no schema "
                              "history (the router keeps one only when the binlog lacks "
                              "column names; see docs/schema-history.md)")
        flavor, state = saved.storage.load(position.schema_history)
    except ChangestreamError as exc:
        return _fail("show", exc, EXIT_CONFIG)
    finally:
        if saved is not None:
            saved.close()
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
    if not args.position_file:
        print(f"for a schema history kept by the sink, add the statement to the "
              f"configuration:\n\n[schema]\nskip = [\"{file}:{pos}\"]")
        return EXIT_OK
    store = SchemaHistoryStore(args.position_file)
    store.add_skip(f"{file}:{pos}")
    print(f"the DDL at {file}:{pos} will be left out of the schema history by the next run "
          f"({store.skip_file})")
    return EXIT_OK


def cmd_reseed(args: argparse.Namespace) -> int:
    from changestream.cli.run import config_from_args
    from changestream.runtime.router import Router, RouterSettings
    from changestream.sinks.callback import CallbackSink

    saved: _Saved | None = None
    try:
        config = config_from_args(args)
        settings = RouterSettings.from_config(config)
        saved = _Saved(args)
        position = saved.position
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
            return open_connection(connect_timeout=10, **router.spec.connection)

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
        saved.storage.save(digest, data)
        saved.name(digest)
    except ConfigError as exc:
        return _fail("reseed", exc, EXIT_CONFIG)
    except ChangestreamError as exc:
        return _fail("reseed", exc, EXIT_SOURCE)
    finally:
        if saved is not None:
            saved.close()
    print(f"schema history for {position} seeded from the server: {tables} tables")
    return EXIT_OK
