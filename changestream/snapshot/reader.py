"""Reading a table's chunks from the source server, each with the binlog position after it.

One connection: autocommit off, time zone UTC, no value conversions
(:mod:`changestream.snapshot.values` makes the decoder's values of the server's bytes).
Each chunk is one ``SELECT`` in a transaction started ``WITH CONSISTENT SNAPSHOT``; the
binlog head read after it ends the chunk's window. MariaDB gives its snapshot's binlog
position (``binlog_snapshot_file``/``_position``): the reader waits until it is not before
the window's start. MySQL offers no such status without BACKUP_ADMIN: there a table's first
chunk waits for the stream to pass the window's start (:mod:`changestream.snapshot.runner`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pymysql
import pymysql.converters

from changestream.decoding.table_schema import TableSchema
from changestream.model.changes import binlog_order
from changestream.model.errors import SourceError
from changestream.model.record import record
from changestream.schema.catalog import collation_ids, quote, read_definition, unique_key
from changestream.schema.definition import definition_schema
from changestream.snapshot import result_set
from changestream.snapshot.chunks import ChunkQuery
from changestream.snapshot.encodings import ChunkEncoding, RowReader
from changestream.snapshot.result_set import ChunkRows
from changestream.snapshot.row_readers import ValuesReader, values_reader
from changestream.snapshot.values import converter, row_converter
from changestream.sources.binlog_head import binlog_head

# Encoders only: the values read stay the server's text and bytes.
_NO_SUCH_TABLE = 1146
_DEFINITION_CHANGED = 1412  # "Table definition has changed, please retry transaction"
_ENCODERS = {k: v for k, v in pymysql.converters.conversions.items() if isinstance(k, type)}


@record
class TablePlan:
    """How one table is read: its shape, its chunk query (``None`` without a key), the
    server's estimate of its rows, the columns the filter leaves out, and how a row of
    the result becomes ``(key, row)``: the row as the decoder's values (a dict), or, with
    an ``encoding`` (the sink's, when it takes the table), as that encoding's row reader
    reads it."""

    database: str
    table: str
    schema: TableSchema
    query: ChunkQuery | None
    estimated_rows: int
    excluded: frozenset[str]
    encoding: ChunkEncoding | None
    read_row: RowReader
    read_values: ValuesReader
    # The binlog position (its order) the plan was made at: a DDL of the table at or after
    # it may not be in the plan (a chunk delivered after one is read again).
    planned_at: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def key(self) -> tuple[str, ...]:
        return self.query.key if self.query is not None else ()

    def key_param(self, raw: Any) -> tuple[Any, ...]:
        """A row's key as it is given back to the server: text for character and number
        columns (so the comparison is in the column's collation), bytes for binary ones."""
        assert self.query is not None
        return self.key_values(tuple(raw[self.query.columns.index(name)]
                                     for name in self.query.key))

    def of_its_own(self) -> TablePlan:
        """This plan with a row function of its own: the compiled one keeps its buffers in
        itself between calls, so each reader thread reads with its own."""
        _, read_row = _row_reader(self.schema, self.key, self.excluded, self.encoding,
                                  self.read_values)
        return replace(self, read_row=read_row)

    def key_values(self, raw: tuple[Any, ...]) -> tuple[Any, ...]:
        """Key values as the server sent them (bytes, in key order) as :meth:`key_param`
        gives them back."""
        assert self.query is not None
        by_name = {c.name: c for c in self.schema.columns}
        return tuple(value if by_name[name].collation == 63 or not isinstance(value, bytes)
                     else value.decode() for name, value in zip(self.query.key, raw))


def _row_reader(schema: TableSchema, key: tuple[str, ...], excluded: frozenset[str],
                encoding: ChunkEncoding | None, read_values: ValuesReader,
                ) -> tuple[ChunkEncoding | None, RowReader]:
    """How a result row of ``schema`` becomes ``(key, row)`` (see :class:`TablePlan`),
    and the encoding that reads it (``None``: the decoder's values); ``read_values``
    reads its values as the server sent them."""
    if encoding is not None:
        read_encoded = encoding.row_reader(schema, key, excluded)
        if read_encoded is not None:
            return encoding, read_encoded
    convert = row_converter(schema, excluded)
    positions = [schema.column_names.index(k) for k in key]
    converters = [converter(schema.columns[i]) for i in positions]

    def read(buf: bytes, i: int) -> tuple[tuple[Any, ...], Any]:
        raw = read_values(buf, i)
        key = tuple(None if raw[p] is None else c(raw[p])
                    for p, c in zip(positions, converters))
        return key, convert(raw)

    return None, read


@record
class ReadChunk:
    """Rows read (``(key in the decoder's values, row)``, the row as the plan's
    ``read_row`` gives it), the key of the last one as the server gave it (where the next
    chunk starts), whether the table is done, and the binlog position after the read (the
    end of its window)."""

    rows: ChunkRows
    last_key: tuple[Any, ...] | None
    done: bool
    high: tuple[str, int]
    read_at: dt.datetime


#: The server's net_write_timeout (seconds) while a table is read whole: a day.
_WHOLE_READ_WRITE_TIMEOUT = 86_400


@record
class WholeRead:
    """A table without a key being read: its rows as counted in the read's snapshot (or
    under its lock), the binlog position that snapshot is at (``None``: where the stream
    is paused), when the read began, and its rows in pieces (as :class:`ReadChunk`'s)."""

    rows: int
    at: tuple[str, int] | None
    read_at: dt.datetime
    pieces: Iterator[ChunkRows]


class ChunkReader:
    """Reads chunks of tables through its own connection (``connect`` opens one); rows as
    the sink's ``encoding`` reads them, where it takes the table (see :class:`TablePlan`);
    ``excluded`` says which columns of a table the filter leaves out."""

    def __init__(self, connect: Callable[..., pymysql.Connection[Any]], chunk_rows: int,
                 encoding: ChunkEncoding | None = None,
                 excluded: Callable[[str, str, tuple[str, ...]], frozenset[str]] | None = None):
        self.chunk_rows = chunk_rows
        self.encoding = encoding
        self._own_plan: tuple[TablePlan, TablePlan] | None = None  # a plan, this reader's
        self.excluded = excluded
        self.conn = connect(conv=_ENCODERS, charset="utf8mb4", autocommit=False,
                            use_unicode=False)
        if not result_set.supported(self.conn):
            self.close()
            raise SourceError(f"snapshot: PyMySQL {pymysql.__version__} is not one the "
                              "snapshot reader knows (it reads results off the connection "
                              "itself); install a PyMySQL between 1.1 and 2.x")
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("SELECT VERSION()")
            self.mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
        self.conn.commit()
        self._collations = {name: number for name, (number, _) in
                            collation_ids(self._query).items()}

    def close(self) -> None:
        with contextlib.suppress(pymysql.MySQLError):
            self.conn.close()

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        rows = self._query_in_transaction(sql, args)
        self.conn.commit()
        return rows

    def head(self) -> tuple[str, int]:
        """The binlog's end now."""
        with self.conn.cursor() as cur:
            # No commit: the statement reads no table; the next transaction's start ends it.
            return binlog_head(cur)

    def plan(self, database: str, table: str, where: str | None = None) -> TablePlan | None:
        """How to read ``database.table`` (``None``: it does not exist), only its rows
        ``where`` holds for (``None``: all), and the binlog position it was planned at:
        every DDL of the table before it is in the plan. Its metadata lock is held from
        before that position is read until the definition is, so no DDL of the table can
        complete in between (one under way is waited for)."""
        try:
            with self.conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {quote(database)}.{quote(table)} LIMIT 0")
            planned_at = self.head()
            definition = read_definition(self._query_in_transaction, self._collations,
                                         database, table)
        except pymysql.err.ProgrammingError as exc:
            if exc.args[0] != _NO_SUCH_TABLE:
                raise
            definition = None
        finally:
            self.conn.commit()
        if definition is None:
            return None
        schema = definition_schema(definition)
        names = tuple(c.name for c in definition.columns)
        key = definition.primary_key or unique_key(self._query, database, table)
        query = ChunkQuery(database, table, names, key, self.chunk_rows, where) \
            if key else None
        estimate = self._query("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE "
                               "TABLE_SCHEMA = %s AND TABLE_NAME = %s", (database, table))
        rows = int(estimate[0][0] or 0) if estimate else 0
        excluded = self.excluded(database, table, schema.column_names) \
            if self.excluded is not None else frozenset()
        read_values = values_reader(len(schema.columns))
        encoding, read_row = _row_reader(schema, key or (), excluded, self.encoding,
                                         read_values)
        return TablePlan(database, table, schema, query, rows, excluded, encoding, read_row,
                         read_values, binlog_order(*planned_at))

    def _query_in_transaction(self, sql: str, args: tuple[Any, ...] = ()
                              ) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return [tuple(_text(v) for v in row) for row in cur.fetchall()]

    def read(self, plan: TablePlan, after: tuple[Any, ...] | None,
             window_start: tuple[str, int], upto: tuple[Any, ...] | None = None
             ) -> ReadChunk:
        """The chunk of ``plan``'s table after the key ``after`` (up to and including
        ``upto`` when given: never the table's last chunk), read in a snapshot that holds
        everything the binlog has before ``window_start``."""
        plan = self._own(plan)
        assert plan.query is not None
        sql, args = plan.query.select(after, upto)
        for _ in range(1000):
            with self.conn.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                if not self.mariadb or self._snapshot_covers(cur, window_start):
                    read_at = dt.datetime.now(dt.UTC)
                    try:
                        result = result_set.select_rows(self.conn, cur.mogrify(sql, args),
                                                        plan.read_row)
                    except pymysql.err.OperationalError as exc:
                        if exc.args[0] != _DEFINITION_CHANGED:
                            raise
                        # A DDL rebuilt the table after the snapshot began: a new one (the
                        # stream turns the chunk back if the plan no longer fits).
                        self.conn.rollback()
                        continue
                    self.conn.commit()
                    break
            self.conn.commit()
            time.sleep(0.005)  # a commit the binlog holds is not yet visible: a moment
        else:
            raise SourceError(f"snapshot of {plan.name}: the server's consistent snapshot "
                              f"stays before binlog position {window_start[0]}:"
                              f"{window_start[1]}")
        high = self.head()
        if upto is not None:
            return ReadChunk(result.rows, upto, False, high, read_at)
        last = result.last
        last_key = plan.key_param(plan.read_values(*last)) if last is not None else after
        return ReadChunk(result.rows, last_key, len(result.rows) < plan.query.limit, high,
                         read_at)

    def _own(self, plan: TablePlan) -> TablePlan:
        """``plan`` as this reader reads it: with row functions of its own (several
        readers read one plan's chunks at once), made once per plan."""
        if self._own_plan is None or self._own_plan[0] is not plan:
            self._own_plan = (plan, plan.of_its_own())
        return self._own_plan[1]

    def boundary(self, plan: TablePlan, after: tuple[Any, ...] | None
                 ) -> tuple[Any, ...] | None:
        """The key that ends the chunk after ``after`` (its ``chunk_rows``-th row's), as
        :meth:`read` takes it back; ``None``: fewer rows are left (the last chunk)."""
        assert plan.query is not None
        sql, args = plan.query.boundary(after)
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, args)
                row = cur.fetchone()
        finally:
            self.conn.commit()
        return None if row is None else plan.key_values(tuple(row))

    def read_whole(self, plan: TablePlan, piece_rows: int) -> WholeRead:
        """Every row of ``plan``'s table (a table without a key), counted and then read in
        pieces of about ``piece_rows`` rows. MariaDB: in a consistent snapshot, with the
        binlog position it is at; MySQL: under the table lock :meth:`lock` took (the
        position ``None``: it is where the stream is paused)."""
        table = f"{quote(plan.database)}.{quote(plan.table)}"
        columns = ", ".join(quote(name) for name in plan.schema.column_names)
        at: tuple[str, int] | None = None
        with self.conn.cursor() as cur:
            # The result is read as the pieces are delivered: a slow sink stalls it, and the
            # server drops a connection it cannot write to for net_write_timeout (60 s).
            cur.execute(f"SET SESSION net_write_timeout = {_WHOLE_READ_WRITE_TIMEOUT}")
            if self.mariadb:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                at = _snapshot_position(cur)
            # The count first: every record of the table's one transaction says how many
            # changes it has, and the first are written before the last is read.
            cur.execute(f"SELECT COUNT(*) FROM {table}")
            count = int(cur.fetchone()[0])
        read_at = dt.datetime.now(dt.UTC)
        pieces = result_set.select_row_pieces(self.conn, f"SELECT {columns} FROM {table}",
                                              plan.read_row, piece_rows)
        return WholeRead(count, at, read_at, self._ended(pieces))

    def _ended(self, pieces: Iterator[result_set.ResultRows[Any]]
               ) -> Iterator[ChunkRows]:
        for piece in pieces:
            yield piece.rows
        if self.mariadb:
            self.conn.commit()
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION net_write_timeout = DEFAULT")

    def lock(self, plan: TablePlan) -> None:
        """``LOCK TABLES ... READ`` on the table (MySQL, a table without a key): its writers
        wait until :meth:`unlock`."""
        with self.conn.cursor() as cur:
            cur.execute(f"LOCK TABLES {quote(plan.database)}.{quote(plan.table)} READ")

    def unlock(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        self.conn.commit()

    @staticmethod
    def _snapshot_covers(cur: Any, window_start: tuple[str, int]) -> bool:
        at = _snapshot_position(cur)
        return at is None or binlog_order(*at) >= binlog_order(*window_start)


def _snapshot_position(cur: Any) -> tuple[str, int] | None:
    """The binlog position MariaDB's consistent snapshot (just started on ``cur``) is at
    (``None``: binary logging off for the session)."""
    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
    status = {_text(k).lower(): _text(v) for k, v in cur.fetchall()}
    file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    return (str(file), int(pos)) if file and pos is not None else None


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes | bytearray) else value
