"""A sink adapter of your own: mirrors of the source's tables in SQLite, exactly once.

Each source table ``db.t`` becomes a SQLite table ``"db.t"`` of JSON rows keyed by the
JSON of their primary key (a table without a key keeps its rows as a multiset). The
router's position is stored in the same SQLite transaction as the rows it covers, and
``open()`` returns it: after a crash the router resumes exactly after the last batch that
was committed, without a position file. A batch that ends inside a big transaction (no
position) stays in the open SQLite transaction until the batch that completes it.

    PYTHONPATH=examples changestream run --source mariadb://repl@127.0.0.1:3306 \\
        --include shop --sink sqlite_sink:SqliteMirrorSink --sink-option path=shop.db

DDL is not applied (a TRUNCATE or DROP leaves the mirror as it was).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import sqlite3
from typing import Any

from changestream import Batch, Change, Position, SinkError


def _json(value: Any) -> str:
    def default(v: Any) -> Any:
        if isinstance(v, bytes):
            return base64.b64encode(v).decode()
        if isinstance(v, dt.date | dt.time | dt.timedelta | decimal.Decimal):
            return str(v)
        if isinstance(v, set | frozenset):
            return sorted(v)
        raise TypeError(f"cannot store {type(v).__name__}")

    return json.dumps(value, default=default, sort_keys=True, separators=(",", ":"))


class SqliteMirrorSink:
    """Mirrors in the SQLite database at ``path`` (see the module docstring)."""

    def __init__(self, path: str):
        self.path = path
        self.db: sqlite3.Connection | None = None

    def open(self) -> Position | None:
        # Transactions by hand: BEGIN when a batch starts one, COMMIT with a position. The
        # router calls open/close and write from different threads, one call at a time.
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS _changestream_position "
                        "(id INTEGER PRIMARY KEY CHECK (id = 1), position TEXT NOT NULL)")
        row = self.db.execute("SELECT position FROM _changestream_position").fetchone()
        return Position.from_dict(json.loads(row[0])) if row else None

    def write(self, batch: Batch) -> None:
        db = self.db
        if db is None:
            raise SinkError("sqlite sink: write before open")
        if not db.in_transaction:
            db.execute("BEGIN")
        db.execute("SAVEPOINT batch")  # a failed batch is taken back whole, then retried
        try:
            for change in batch.iter_changes():
                self._apply(db, change)
        except BaseException:
            db.execute("ROLLBACK TO batch")
            db.execute("RELEASE batch")
            raise
        db.execute("RELEASE batch")
        if batch.position is not None:
            db.execute("INSERT OR REPLACE INTO _changestream_position VALUES (1, ?)",
                       (json.dumps(batch.position.as_dict()),))
            db.execute("COMMIT")

    def _apply(self, db: sqlite3.Connection, change: Change) -> None:
        if change.op == "ddl" or change.table is None:
            return
        table = '"' + f"{change.database}.{change.table}".replace('"', '""') + '"'
        db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT, row TEXT NOT NULL)")
        db.execute(f"CREATE INDEX IF NOT EXISTS {table[:-1]}.key\" ON {table} (key)")
        key = None if change.primary_key is None else _json(change.primary_key)
        if change.before is not None:  # update or delete: the old row goes
            if key is not None:
                db.execute(f"DELETE FROM {table} WHERE key = ?", (key,))
            else:  # one of the equal rows, as the server did
                db.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} "
                           "WHERE row = ? LIMIT 1)", (_json(change.before),))
        if change.after is not None:  # insert, update, snapshot: the new row comes
            if key is not None:
                db.execute(f"DELETE FROM {table} WHERE key = ?", (key,))
            db.execute(f"INSERT INTO {table} VALUES (?, ?)", (key, _json(change.after)))

    def close(self) -> None:
        if self.db is not None:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")  # a big transaction not yet complete
            self.db.close()
            self.db = None
