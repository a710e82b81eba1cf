"""The configuration's sections: each key's default, doc and check in one place
(:func:`changestream.model.setting.setting`); ``config/changestream.toml`` is rendered from
them (:mod:`changestream.runtime.config_render`). Checks that need two keys are in
:func:`changestream.runtime.config.load_config`."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from changestream.model.modes import LOG_LEVELS, RecordFormat, Until
from changestream.model.record import record
from changestream.model.setting import (
    positive,
    positive_seconds,
    setting,
    tcp_port,
)
from changestream.sources.tls import TlsConfig


def _server_id(value: int) -> str | None:
    if value <= 0:
        return f"must be positive, got {value}"
    return None if value < 1 << 32 else f"{value} does not fit in 32 bits"


def _log_level(value: str) -> str | None:
    return None if value.lower() in LOG_LEVELS else \
        f"{value!r} is not {', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}"


def _start_at(value: str) -> str | None:
    from changestream.sources.live import StartPosition

    try:
        StartPosition.parse(value or "earliest")
    except ValueError as exc:
        return str(exc)
    return None


SINK_OPTIONS_DOC = (
    "Passed to the sink adapter as keyword arguments, e.g. for spark:iceberg\n"
    'warehouse = "/data/warehouse"\n'
    "and, to have the sink compact and expire the tables it lands itself, between "
    "two batches, every so often (docs/sinks.md, Keeping tables fast; off unless "
    "set):\n"
    'maintain_every = "5m"\n'
    "The Spark JVM's class-data-sharing archives (100-175 MB, written by the first "
    "start; later starts ~1.5 s quicker; docs/sinks.md, Options): a folder, or false "
    "for none. Off by itself for a driver JVM with a Java agent or a flight "
    "recording (HotSpot 17 crashes).\n"
    'jvm_class_cache = "~/.cache/changestream/jvm"')


@record
class SourceConfig:
    """The ``[source]`` section: the server (or binlog files) read, and how."""

    url: str = setting("mysql://root@127.0.0.1:3306", doc=(
        "mysql://user[:password]@host[:port], mariadb://user@host[:port], or "
        "file:///path/to/binlogs (a binlog file or a folder of them). Several "
        "servers, a primary and its replicas: mariadb://user@db1:3306,db2:3306 (see "
        "[failover]). Prefer password_env/password_file to a password here."))
    password_env: str = setting("CHANGESTREAM_PASSWORD", doc=(
        "The environment variable holding the password (used when it is set) ..."))
    password_file: str = setting("", doc=(
        "... or a file holding it (wins over password_env when given)."))
    server_id: int = setting(0x3EADBEEF, check=_server_id, doc=(
        "The replica server id this router connects with: unique among the server's "
        "replicas."))
    heartbeat_seconds: float = setting(5.0, check=positive_seconds, doc=(
        "The server sends a heartbeat this often when it has nothing else; silence "
        "for 3 times as long (at least 10 s) counts as a lost connection."))
    reconnect_seconds: float = setting(300.0, doc=(
        "After losing a server it was connected to, the router reconnects for this "
        "long."))
    verify_checksums: bool = setting(True, doc=(
        "Verify each event's CRC32 (when the server writes them)."))
    schema_from_server: bool = setting(True, doc=(
        'With the schema history off ([schema] history = "off"): when the server '
        "does not log column names (binlog_row_metadata is not FULL), read them from "
        "information_schema as it is now (wrong for rows written before a later "
        "ALTER)."))
    decode_workers: int = setting(-1, doc=(
        "Worker processes that decode, assemble and encode plain DML transactions "
        "(for sinks that take encoded records: jsonl, stdout, spark). -1: one per "
        "CPU the process may use (its affinity: a container's cpuset), less the CPU "
        "the Spark sink keeps for its own writing, at least one (on a single CPU "
        "too), and none when snapshot.mode is initial-only (the run ends with its "
        "snapshot); 0: none, everything is decoded in the router's process. Records are "
        "the same either way, except that `ts` is when a worker encoded them."))
    decode_workers_wait: bool = setting(False, doc=(
        "Hand every plain DML transaction to the decode workers, waiting for them to "
        "start. By default (false) the router decodes the first transactions itself "
        "while its workers start (their imports take about a tenth of a second), up to "
        "a segment's bytes (512 kB), so a first record is not held up by them."))
    tls: TlsConfig = field(default_factory=TlsConfig)


@record
class StartConfig:
    """The ``[start]`` section: where reading begins and ends, and the position kept."""

    at: str = setting("", check=_start_at, doc=(
        "Where to begin when no position is saved: earliest | latest | gtid:SET | "
        'FILE:POS. "": where the snapshot began (snapshot.mode initial), else '
        "earliest."))
    until: Until = setting("", doc=(
        '"" runs until stopped; "caught-up" stops once everything the source had is '
        "delivered."))
    position_file: str = setting("", doc=(
        'Where the resume position is kept ("" keeps none: every start begins at '
        "start.at)."))
    position_override: str = setting("", doc=(
        "FILE:POS or gtid:SET to resume from instead of the saved position (one-off "
        "repairs)."))


@record
class FilterConfig:
    """The ``[filter]`` section: the tables and columns delivered."""

    include: list[str] = setting(factory=list, doc=(
        'Tables to deliver (patterns: "db", "db.*", "db.table", shell wildcards); '
        "empty: all."))
    exclude: list[str] = setting(factory=list, doc=(
        "Tables not to deliver."))
    exclude_columns: list[str] = setting(factory=list, doc=(
        'Columns left out of every change, as "db.table.column" patterns.'))


@record
class TransactionsConfig:
    """The ``[transactions]`` section: how transactions are held."""

    max_buffered_changes: int = setting(20_000, check=positive, doc=(
        "Above this many changes a transaction is spilled to disk until its commit."))
    spill_dir: str = setting("", doc=(
        'Where spilled transactions go ("": the system\'s temp folder).'))
    include_sql: bool = setting(False, doc=(
        "Whether row changes carry the statement that made them (`sql`: MariaDB's "
        "ANNOTATE_ROWS, MySQL's ROWS_QUERY when binlog_rows_query_log_events=ON). "
        "Off by default, as in Debezium and Maxwell: every row of a multi-row INSERT "
        "would repeat the whole statement. DDL changes always carry their statement. "
        "When off, a live MariaDB source is asked not to send ANNOTATE_ROWS events "
        "at all."))


@record
class SinkConfig:
    """The ``[sink]`` section: where changes go (docs/sinks.md)."""

    spec: str = setting("stdout", doc=(
        "stdout | jsonl:PATH | spark:callback | spark:parquet | spark:iceberg | "
        "module:Class | a name from the changestream.sinks entry-point group"))
    format: RecordFormat = setting("changestream", doc=(
        "Change record format of the JSON-lines sinks: changestream | original"))
    options: dict[str, Any] = setting(factory=dict, doc=SINK_OPTIONS_DOC)


@record
class ControlConfig:
    """The ``[control]`` section: the HTTP control endpoint (docs/operations.md)."""

    enabled: bool = setting(False, doc=(
        "An HTTP endpoint: GET /status, GET /metrics, POST /pause, POST /resume, "
        "POST /snapshot."))
    host: str = setting("127.0.0.1", doc=(
        "Where it listens: 127.0.0.1 by default; any other address only with a token."))
    port: int = setting(8750, check=tcp_port)
    token_env: str = setting("CHANGESTREAM_CONTROL_TOKEN", doc=(
        "A bearer token the endpoint requires, from this environment variable or "
        "file (none: open; it is compared in constant time)."))
    token_file: str = setting("")


@record
class FailoverConfig:
    """The ``[failover]`` section: moving to another server of ``source.url``."""

    wait_seconds: float = setting(30.0, doc=(
        "With several servers in source.url (a primary and its replicas, "
        "log_slave_updates / log_replica_updates on): when the server read is lost, "
        "the router goes on from another one that has every transaction it delivered "
        "(compared by GTIDs). A server that lacks some (a lagging replica) is asked "
        "again every half second for up to wait_seconds; then the router exits 3 "
        "with one line naming each server and what it lacks. 0: refuse at once."))
    check_seconds: float = setting(5.0, check=positive_seconds, doc=(
        "While caught up, at most this often, the router asks the server it reads "
        "whether it was demoted (read_only ON) while another server of the set is "
        "writable (the new primary): then it goes on from that one as after a loss."))


@record
class StandbyConfig:
    """The ``[standby]`` section: a standby router (docs/operations.md#standby-router)."""

    enabled: bool = setting(False, doc=(
        "Several routers on one job (the same sink and start.position_file): the one "
        "holding the job's lease (position_file + \".lease\", locked through position_file "
        "+ \".lease.lock\") writes, the others wait and take over a lease not renewed for "
        "lease_seconds (by their own clock), then resume as a restart does. A writer whose "
        "lease was taken over stops without writing, exit 5. Needs start.position_file on "
        "a file system with working flock (docs/operations.md, Standby router)."))
    lease_seconds: float = setting(10.0, check=positive_seconds, doc=(
        "A lease not renewed for this long is taken over (the writer renews it every "
        "third of it); the takeover comes at most this long (and a quarter second) after "
        "the writer stops."))


@record
class LogConfig:
    """The ``[log]`` section."""

    level: str = setting("warning", check=_log_level, doc=(
        "debug | info | warning | error; logs go to stderr (stdout is for change "
        "records)."))
    json: bool = setting(False, doc=(
        "One JSON object per log line."))
