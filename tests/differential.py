"""The randomized differential test's workload, rebuild and comparison.

A seed chooses tables (random column types from :mod:`tests.random_columns`, keyed by one
or two columns or keyless, with generated and invisible columns) and a workload of
transactions (inserts, updates of random subsets of columns, key moves, deletes, some
rolled back), each transaction under a random row image (FULL, MINIMAL, NOBLOB) and the
server's row metadata switched between FULL and MINIMAL as it goes. The change records
changestream delivers are applied to empty tables (:func:`rebuild`) and compared with the
server's own ``SELECT``, value by value in each type's documented JSON form
(:func:`differences`). The same seed on the same server gives the same statements.
"""

from __future__ import annotations

import base64
import random
import struct
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.random_columns import Column, random_column
from tests.servers import server_version, shadow_command

ABSENT = "<absent from the records>"
_KEYLESS_FAMILIES = {"int", "decimal", "double", "temporal", "year", "enum", "set", "bit",
                     "address"}


@dataclass
class Table:
    """A random table: its columns (key columns first) and the keys it holds now."""

    name: str
    columns: list[Column]
    key: list[str]
    keys: list[tuple[str, ...]] = field(default_factory=list)
    next_key: int = 1
    # Columns whose values the server's binlog did not carry: not compared.
    unlogged: set[str] = field(default_factory=set)

    @property
    def written(self) -> list[Column]:
        return [c for c in self.columns if not c.generated]


@dataclass
class Workload:
    """What one seed did: its tables, statements and the counts of its changes."""

    seed: int
    database: str
    tables: list[Table]
    statements: list[list[str]] = field(default_factory=list)
    rows: int = 0


def _key_columns(rng: random.Random) -> list[Column]:
    shape = rng.choice(["int", "bigint", "varchar", "composite"])
    if shape == "int":
        return [Column("id", "INT NOT NULL", lambda r: "0", nullable=False, family="int")]
    if shape == "bigint":
        return [Column("id", "BIGINT UNSIGNED NOT NULL", lambda r: "0", nullable=False,
                       family="int")]
    if shape == "varchar":
        return [Column("id", "VARCHAR(40) CHARACTER SET utf8mb4 NOT NULL", lambda r: "''",
                       nullable=False, family="text")]
    return [Column("id", "INT NOT NULL", lambda r: "0", nullable=False, family="int"),
            Column("k2", "CHAR(4) CHARACTER SET latin1 NOT NULL", lambda r: "''",
                   nullable=False, family="text")]


def random_tables(rng: random.Random, flavor: str, version: tuple[int, int],
                  count: int) -> list[Table]:
    """``count`` random tables (about one in five keyless)."""
    tables = []
    for n in range(count):
        keyless = rng.random() < 0.2
        key = [] if keyless else _key_columns(rng)
        columns = list(key)
        while len(columns) < len(key) + rng.randint(2, 9):
            column = random_column(f"c{len(columns)}", rng, flavor, version)
            if keyless and column.family not in _KEYLESS_FAMILIES:
                continue  # NOBLOB before images must still tell duplicates apart
            columns.append(column)
        if key and key[0].definition.startswith("INT") and rng.random() < 0.4:
            kind = rng.choice(["VIRTUAL", "STORED"])
            columns.append(Column("g", f"BIGINT AS (id * 2) {kind}", lambda r: "0",
                                  generated=True, family="int"))
        if rng.random() < 0.3:
            columns.append(Column("inv", "INT NULL INVISIBLE",
                                  lambda r: str(r.randint(-9, 9)), invisible=True,
                                  family="int"))
        tables.append(Table(f"t{n}", columns, [c.name for c in key]))
    return tables


def create_statements(database: str, table: Table) -> str:
    body = ", ".join(f"`{c.name}` {c.definition}" for c in table.columns)
    if table.key:
        body += f", PRIMARY KEY ({', '.join(f'`{k}`' for k in table.key)})"
    return f"CREATE TABLE `{database}`.`{table.name}` ({body})"


def _key_literals(table: Table, n: int) -> tuple[str, ...]:
    if table.columns[0].definition.startswith("VARCHAR"):
        return (f"'k{n}é😀'",)
    if len(table.key) == 2:
        return (str(n), f"'{'abcd'[n % 4]}{n % 7}'")
    return (str(n),)


def _where(table: Table, key: tuple[str, ...]) -> str:
    return " AND ".join(f"`{k}` = {v}" for k, v in zip(table.key, key))


def _insert(table: Table, db: str, rng: random.Random) -> str:
    rows: list[str] = []
    for _ in range(rng.randint(1, 3)):
        if rows and not table.key and rng.random() < 0.4:
            rows.append(rows[-1])  # a duplicate row
            continue
        values = [c.sql_value(rng) for c in table.written]
        if table.key:
            key = _key_literals(table, table.next_key)
            table.next_key += 1
            table.keys.append(key)
            values[:len(key)] = key
        rows.append("(" + ", ".join(values) + ")")
    names = ", ".join(f"`{c.name}`" for c in table.written)
    return f"INSERT INTO `{db}`.`{table.name}` ({names}) VALUES {', '.join(rows)}"


def _update(table: Table, db: str, rng: random.Random) -> str | None:
    settable = [c for c in table.written if c.name not in table.key]
    if not settable:
        return None
    chosen = rng.sample(settable, rng.randint(1, len(settable)))
    sets = [f"`{c.name}` = {c.sql_value(rng)}" for c in chosen]
    if not table.key:
        limit = rng.choice([1, 2, 10])
        return f"UPDATE `{db}`.`{table.name}` SET {', '.join(sets)} LIMIT {limit}"
    if not table.keys:
        return None
    key = rng.choice(table.keys)
    if rng.random() < 0.15:  # a key move
        moved = _key_literals(table, table.next_key)
        table.next_key += 1
        table.keys[table.keys.index(key)] = moved
        sets += [f"`{k}` = {v}" for k, v in zip(table.key, moved)]
    return f"UPDATE `{db}`.`{table.name}` SET {', '.join(sets)} WHERE {_where(table, key)}"


def _delete(table: Table, db: str, rng: random.Random) -> str | None:
    if not table.key:
        return f"DELETE FROM `{db}`.`{table.name}` LIMIT {rng.choice([1, 2])}"
    if not table.keys:
        return None
    key = table.keys.pop(rng.randrange(len(table.keys)))
    return f"DELETE FROM `{db}`.`{table.name}` WHERE {_where(table, key)}"


def run_workload(server: Any, seed: int, database: str, transactions: int = 120,
                 tables: int = 4, images: tuple[str, ...] = ("FULL", "MINIMAL", "NOBLOB")
                 ) -> Workload:
    """Create the seed's tables in ``database`` (which must exist) and run its workload,
    each transaction under one of ``images`` (the server's binlog_row_image)."""
    version = server_version(server)
    rng = random.Random(seed)
    work = Workload(seed, database, random_tables(rng, server.flavor, version, tables))
    session = ["SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'"]
    server.execute(session + [create_statements(database, t) for t in work.tables])
    try:
        for _ in range(transactions):
            if rng.random() < 0.05:
                metadata = rng.choice(["FULL", "MINIMAL"])
                server.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
            image = rng.choice(["FULL", "MINIMAL", "NOBLOB"])
            if image not in images:
                image = images[0]
            statements = [*session, f"SET SESSION binlog_row_image = {image}", "BEGIN"]
            rolled_back = rng.random() < 0.1
            held = {t.name: list(t.keys) for t in work.tables}
            for _ in range(rng.randint(1, 5)):
                table = rng.choice(work.tables)
                kind = rng.choices(["insert", "update", "delete"], [5, 3, 2])[0]
                statement = (_insert if kind == "insert" else
                             _update if kind == "update" else _delete)(table, database, rng)
                if statement is None:
                    continue
                statements.append(statement)
                moves_key = kind == "update" and "`id` = " in statement.split(" WHERE ")[0]
                if server.flavor == "mariadb" and not rolled_back and (
                        image == "MINIMAL" or (version >= (11, 0) and moves_key)):
                    # MariaDB leaves VIRTUAL columns out of MINIMAL insert images, and 11.8
                    # every generated column out of update images, FULL ones too (its
                    # mariadb-binlog shows the same): a key move changes `g` unseen.
                    table.unlogged.update(c.name for c in table.columns if c.generated)
            if rolled_back:  # the tables hold the keys they held before it
                for t in work.tables:
                    t.keys = held[t.name]
            statements.append("ROLLBACK" if rolled_back else "COMMIT")
            server.execute(statements)
            work.statements.append(statements)
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")
    return work


def read_records(server: Any, database: str, start: tuple[str, int], out: Path,
                 source: str, workers: int) -> list[dict[str, Any]]:
    """The change records of ``database`` from ``start``, live or from files."""
    url = server.url if source == "live" else f"file://{server.binlog_dir}"
    Router(RouterSettings(source=url, start=f"{start[0]}:{start[1]}", until="caught-up",
                          filter=ChangeFilter(include=[database]), decode_workers=workers,
                          decode_workers_wait=True,
                          schema=HistorySettings("auto", shadow_command(server))),
           JsonLinesSink(out)).run()
    return [r for r in map(orjson.loads, out.read_bytes().splitlines()) if r["op"] != "ddl"]


def _matches(row: dict[str, Any], image: dict[str, Any]) -> bool:
    return all(row.get(k, ABSENT) == v for k, v in image.items())


def rebuild(work: Workload, records: Iterable[dict[str, Any]]
            ) -> dict[str, list[dict[str, Any]]]:
    """Each table's rows, made by applying ``records`` to empty tables."""
    tables = {t.name: t for t in work.tables}
    rows: dict[str, list[dict[str, Any]]] = {t.name: [] for t in work.tables}
    for record in records:
        table, held = tables[record["table"]], rows[record["table"]]
        before, after = record["before"], record["after"]
        if record["op"] == "insert":
            held.append(dict(after))
            continue
        image = {k: before[k] for k in table.key} if table.key else before
        found = next((i for i, row in enumerate(held) if _matches(row, image)), None)
        if found is None:
            raise AssertionError(f"{record['op']} of {table.name} {before} at "
                                 f"{record['position']}: no such row was delivered")
        if record["op"] == "delete":
            held.pop(found)
        else:
            held[found] = {**held[found], **before, **after}
    return rows


def _canonical(columns: list[Column], values: Callable[[Column], Any]) -> tuple[Any, ...]:
    return tuple(orjson.dumps(values(c), default=repr).decode() for c in columns)


def server_rows(server: Any, work: Workload, table: Table) -> list[tuple[Any, ...]]:
    exprs = ", ".join(f"'{ABSENT}'" if c.name in table.unlogged else
                      c.select.format(c=f"`{c.name}`") for c in table.columns)
    rows = server.execute(["SET SESSION time_zone = '+00:00'",
                           f"SELECT {exprs} FROM `{work.database}`.`{table.name}`"])
    return [_canonical(table.columns,
                       lambda c, row=row: ABSENT if c.name in table.unlogged
                       else c.canon_server(row[table.columns.index(c)]))
            for row in rows]


def differences(server: Any, work: Workload, rebuilt: dict[str, list[dict[str, Any]]]
                ) -> list[str]:
    """Where the rebuilt tables differ from the server's, one line each (empty: equal)."""
    found = []
    for table in work.tables:
        expected = Counter(server_rows(server, work, table))
        got = Counter(_canonical(table.columns, lambda c, row=row, t=table: ABSENT
                                 if c.name not in row or c.name in t.unlogged
                                 else c.canon_record(row[c.name]))
                      for row in rebuilt[table.name])
        missing, extra = list((expected - got).elements()), list((got - expected).elements())
        width = len(table.key)
        by_key = {row[:width]: row for row in extra} if width else {}
        for row in missing:
            other = by_key.pop(row[:width], None) if width else None
            if other is None:
                found.append(f"{table.name}: the records lack {_describe(table, row)}")
                continue
            columns = {f"{c.name} {c.definition}": {"server": a, "records": b}
                       for c, a, b in zip(table.columns, row, other) if a != b}
            found.append(f"{table.name} key {row[:width]}: {columns}")
        for row in (by_key.values() if width else extra):
            found.append(f"{table.name}: the records give {_describe(table, row)}")
    return found


def _describe(table: Table, row: tuple[Any, ...]) -> str:
    return str({f"{c.name} {c.definition[:40]}": v[:80] for c, v in zip(table.columns, row)})


# -- the Spark sink's mirrors ------------------------------------------------------------

def _moment(text: str) -> str | None:
    """A DATE/DATETIME/TIMESTAMP text in one form; zero and invalid dates (NULL in Spark)
    as ``None``."""
    if text.startswith("0000-") or "-00" in text[:10]:
        return None
    date, _, time = text.partition(" ")
    if not time:
        return date
    clock, _, fraction = time.partition(".")
    return f"{date} {clock}.{fraction.ljust(6, '0')}"


def _clock(text: str) -> str:
    sign = "-" if text.startswith("-") else ""
    clock, _, fraction = text.lstrip("-").partition(".")
    h, m, sec = clock.split(":")
    return f"{sign}{int(h)}:{m}:{sec}.{fraction.ljust(6, '0')}"


def spark_expected(column: Column, value: Any) -> Any:
    """A server value (after ``canon_server``) in the form :func:`spark_canonical` gives."""
    if value is None or value == ABSENT:
        return value
    if column.family == "temporal":
        return _clock(value) if column.definition.startswith("TIME(") or \
            column.definition.split()[0] == "TIME" else _moment(value)
    return value


def spark_canonical(column: Column, value: Any) -> Any:
    """A value read from the Spark mirror, in the records' canonical form (see
    docs/sinks.md's column types)."""
    if value is None:
        return None
    family = column.family
    if family in ("int", "year"):
        return int(value)
    if family == "decimal":
        return format(value, "f") if not isinstance(value, str) else value
    if family == "float":
        return _float32_of(value)
    if family == "temporal":
        if isinstance(value, str):  # TIME
            return _clock(value)
        if hasattr(value, "hour"):
            return value.strftime("%Y-%m-%d %H:%M:%S.%f")
        return value.isoformat()
    if family in ("binary", "geometry"):
        return base64.b64encode(bytes(value)).decode()
    if family == "set":
        return sorted(value)
    if family == "bit":
        return value & (2 ** 64 - 1)
    if family == "json":
        return column.canon_server(value)
    if family == "vector":
        return [_float32_of(x) for x in value]
    return value


def _float32_of(value: float) -> bytes:
    return struct.pack("<f", value)


def spark_differences(server: Any, work: Workload, spark: Any, catalog: str) -> list[str]:
    """Where the Iceberg mirrors differ from the server's tables (empty: equal)."""
    found = []
    for table in work.tables:
        mirror = f"{catalog}.`{work.database}`.`{table.name}`"
        spark.sql(f"REFRESH TABLE {mirror}")
        rows = [r.asDict() for r in spark.table(mirror).collect()]
        expected = Counter(tuple(
            orjson.dumps(spark_expected(c, orjson.loads(v)), default=repr).decode()
            for c, v in zip(table.columns, row)) for row in server_rows(server, work, table))
        got = Counter(_canonical(table.columns, lambda c, row=row, t=table: ABSENT
                                 if c.name in t.unlogged or c.name not in row
                                 else spark_canonical(c, row[c.name])) for row in rows)
        for row in (expected - got).elements():
            found.append(f"{table.name}: the mirror lacks {_describe(table, row)}")
        for row in (got - expected).elements():
            found.append(f"{table.name}: the mirror has {_describe(table, row)}")
    return found
