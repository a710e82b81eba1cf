"""A randomized workload of row changes interleaved with DDL, for the schema history tests.

Every step is chosen by a seeded random generator from the tables as the server has them
at that moment (read from information_schema), so the same seed on the same starting
state gives the same statements: run once in databases ``m_*`` under
``binlog_row_metadata=MINIMAL`` and once in ``f_*`` under ``FULL``, the change records
must be equal but for the database names.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The kinds of DDL the workload uses (a test asserts that each one ran).
DDL_KINDS = (
    "reorder", "change-column", "rename-column", "drop-add-same-type", "enum-labels",
    "unsigned", "latin1-column", "convert-charset", "create-like", "gh-ost-cutover",
    "truncate", "drop-table", "drop-create-database", "rename-across-databases",
    "keyless-duplicates", "multi-clause", "versioned-comment", "primary-key", "create-select",
    "generated-invisible",
)


@dataclass(slots=True)
class ColumnInfo:
    name: str
    data_type: str
    column_type: str
    key: str
    extra: str
    charset: str | None
    referenced: bool = False  # by a generated column's expression


class SchemaWorkload:
    """Statements for databases ``prefix + 'a'`` and ``prefix + 'b'``; ``execute`` runs
    SQL on the server (one statement or a list; returns the last one's rows)."""

    def __init__(self, execute: Callable[[Any], list[tuple[Any, ...]]], prefix: str,
                 seed: int, flavor: str):
        self.execute = execute
        self.a, self.b = f"{prefix}a", f"{prefix}b"
        self.random = random.Random(seed)
        self.flavor = flavor
        self.kinds_run: set[str] = set()
        self.counter = 0

    # -- set-up ---------------------------------------------------------------------------

    def create(self) -> None:
        a, b = self.a, self.b
        self.execute([
            f"DROP DATABASE IF EXISTS {a}", f"DROP DATABASE IF EXISTS {b}",
            f"CREATE DATABASE {a} CHARACTER SET utf8mb4",
            f"CREATE DATABASE {b} CHARACTER SET latin1",
            f"CREATE TABLE {a}.orders (id INT PRIMARY KEY, qty INT, price DECIMAL(8,2), "
            "note VARCHAR(40), state ENUM('new','paid','sent'), tags SET('x','y','z'))",
            f"CREATE TABLE {a}.users (id INT PRIMARY KEY, name VARCHAR(30), score BIGINT, "
            "seen DATETIME(3))",
            f"CREATE TABLE {b}.items (id INT PRIMARY KEY, label VARCHAR(20), weight DOUBLE)",
            f"CREATE TABLE {a}.log (msg VARCHAR(20), n INT)",  # keyless
        ])

    # -- steps ----------------------------------------------------------------------------

    def step(self) -> None:
        """One random step: mostly row changes, sometimes a DDL."""
        if self.random.random() < 0.3:
            kind = self.random.choice(DDL_KINDS)
            self.counter += 1
            if getattr(self, "_ddl_" + kind.replace("-", "_"))():
                self.kinds_run.add(kind)
        else:
            self.dml()

    def run_every_ddl_kind(self) -> None:
        """Each DDL kind once (in a random order), with row changes between."""
        kinds = list(DDL_KINDS)
        self.random.shuffle(kinds)
        for kind in kinds:
            for _ in range(3):
                self.dml()
            self.counter += 1
            if getattr(self, "_ddl_" + kind.replace("-", "_"))():
                self.kinds_run.add(kind)

    def tables(self) -> list[tuple[str, str]]:
        rows = self.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA "
            f"IN ('{self.a}', '{self.b}') AND TABLE_TYPE = 'BASE TABLE' "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME")
        return [(str(d), str(t)) for d, t in rows]

    def columns(self, db: str, table: str) -> list[ColumnInfo]:
        rows = self.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLUMN_KEY, EXTRA, CHARACTER_SET_NAME, "
            "GENERATION_EXPRESSION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
            f"'{db}' AND TABLE_NAME = '{table}' ORDER BY ORDINAL_POSITION")
        expressions = " ".join(str(g) for *_, g in rows if g)
        return [ColumnInfo(str(n), str(d).lower(), str(t), str(k or ""), str(e or "").upper(),
                           str(c) if c else None, f"`{n}`" in expressions)
                for n, d, t, k, e, c, _ in rows]

    def _pick(self) -> tuple[str, str] | None:
        tables = self.tables()
        return self.random.choice(tables) if tables else None

    def dml(self) -> None:
        picked = self._pick()
        if picked is None:
            return
        db, table = picked
        columns = [c for c in self.columns(db, table) if "GENERATED" not in c.extra]
        keyed = any(c.key == "PRI" for c in columns)
        roll = self.random.random()
        if roll < 0.6 or not keyed:
            rows = self.random.randint(1, 3)
            values = []
            for _ in range(rows):
                self.counter += 1
                values.append("(" + ", ".join(self._value(c) for c in columns) + ")")
            names = ", ".join(f"`{c.name}`" for c in columns)
            ignore = "IGNORE " if keyed else ""
            self.execute(f"INSERT {ignore}INTO {db}.`{table}` ({names}) VALUES "
                         + ", ".join(values))
            if not keyed and self.random.random() < 0.5:
                # a duplicate row, then one of the equal rows deleted
                self.execute([f"INSERT INTO {db}.`{table}` ({names}) VALUES {values[0]}",
                              f"DELETE FROM {db}.`{table}` LIMIT 1"])
        elif roll < 0.85:
            target = [c for c in columns if c.key != "PRI"]
            if target:
                column = self.random.choice(target)
                self.execute(f"UPDATE {db}.`{table}` SET `{column.name}` = "
                             f"{self._value(column)} ORDER BY `{columns[0].name}` LIMIT 2")
        else:
            self.execute(f"DELETE FROM {db}.`{table}` ORDER BY `{columns[0].name}` LIMIT 1")

    def _value(self, column: ColumnInfo) -> str:
        r, t = self.random, column.data_type
        if column.key == "PRI" and t in ("int", "bigint", "smallint", "mediumint"):
            return str(self.counter * 10 + r.randint(0, 9))
        if t in ("int", "bigint", "smallint", "mediumint", "tinyint"):
            high = {"tinyint": 100, "smallint": 30000}.get(t, 100000)
            low = 0 if "unsigned" in column.column_type else -high
            return str(r.randint(low, high))
        if t in ("decimal", "double", "float"):
            return f"{r.randint(-9999, 9999) / 100:.2f}"
        if t in ("varchar", "char", "text"):
            text = r.choice(["a", "é", "ü", "x y", "Zz", ""]) + str(r.randint(0, 99))
            return "'" + text + "'"
        if t == "enum":
            return "'" + r.choice(_labels(column.column_type)) + "'"
        if t == "set":
            labels = _labels(column.column_type)
            return "'" + ",".join(sorted(r.sample(labels, r.randint(0, len(labels))))) + "'"
        if t == "datetime":
            return f"'2026-0{r.randint(1, 9)}-1{r.randint(0, 9)} 10:00:0{r.randint(0, 9)}.123'"
        return "NULL"

    # -- DDL, one method per kind; each returns whether it ran -----------------------------

    def _table_with(self, predicate: Callable[[ColumnInfo], bool],
                    keyed: bool = True) -> tuple[str, str, list[ColumnInfo]] | None:
        tables = self.tables()
        self.random.shuffle(tables)
        for db, table in tables:
            columns = self.columns(db, table)
            if keyed and not any(c.key == "PRI" for c in columns):
                continue
            if any(predicate(c) for c in columns if c.key != "PRI"):
                return db, table, columns
        return None

    def _plain(self, c: ColumnInfo) -> bool:
        return "GENERATED" not in c.extra and not c.referenced and c.data_type in (
            "int", "bigint", "varchar", "decimal", "double", "datetime")

    def _ddl_reorder(self) -> bool:
        found = self._table_with(self._plain)
        if found is None:
            return False
        db, table, columns = found
        column = self.random.choice([c for c in columns if self._plain(c) and c.key != "PRI"])
        others = [c.name for c in columns if c.name != column.name]
        where = self.random.choice(["FIRST", f"AFTER `{self.random.choice(others)}`"])
        self.execute(f"ALTER TABLE {db}.`{table}` MODIFY `{column.name}` {column.column_type} "
                     f"{where}")
        return True

    def _ddl_change_column(self) -> bool:
        found = self._table_with(self._plain)
        if found is None:
            return False
        db, table, columns = found
        column = self.random.choice([c for c in columns if self._plain(c) and c.key != "PRI"])
        self.execute(f"ALTER TABLE {db}.`{table}` CHANGE `{column.name}` `{column.name}_c` "
                     f"{column.column_type}")
        return True

    def _ddl_rename_column(self) -> bool:
        found = self._table_with(self._plain)
        if found is None:
            return False
        db, table, columns = found
        column = self.random.choice([c for c in columns if self._plain(c) and c.key != "PRI"])
        self.execute(f"ALTER TABLE {db}.`{table}` RENAME COLUMN `{column.name}` TO "
                     f"`r{self.counter}`")
        return True

    def _ddl_drop_add_same_type(self) -> bool:
        found = self._table_with(lambda c: self._plain(c))
        if found is None:
            return False
        db, table, columns = found
        plain = [c for c in columns if self._plain(c) and c.key != "PRI"]
        if len(plain) < 2:
            return False
        gone, other = plain[0], plain[1]
        # the dropped column comes back under the other's name's neighbour: same type,
        # different place, so a row image of the same shape means something else
        self.execute([f"ALTER TABLE {db}.`{table}` DROP COLUMN `{gone.name}`",
                      f"ALTER TABLE {db}.`{table}` ADD COLUMN `{gone.name}` {gone.column_type} "
                      f"AFTER `{other.name}`"])
        return True

    def _ddl_enum_labels(self) -> bool:
        found = self._table_with(lambda c: c.data_type == "enum")
        if found is None:
            picked = self._pick()
            if picked is None:
                return False
            db, table = picked
            self.execute(f"ALTER TABLE {db}.`{table}` ADD COLUMN e{self.counter} "
                         "ENUM('one','two')")
            return True
        db, table, columns = found
        column = next(c for c in columns if c.data_type == "enum")
        labels = _labels(column.column_type)
        self.random.shuffle(labels)
        labels.append(f"l{self.counter}")
        text = ",".join(f"'{label}'" for label in labels)
        self.execute(f"ALTER TABLE {db}.`{table}` MODIFY `{column.name}` ENUM({text})")
        return True

    def _ddl_unsigned(self) -> bool:
        found = self._table_with(lambda c: self._plain(c) and c.data_type in ("int", "bigint"))
        if found is None:
            return False
        db, table, columns = found
        column = next(c for c in columns if self._plain(c) and c.data_type in ("int", "bigint")
                      and c.key != "PRI")
        self.execute([f"DELETE FROM {db}.`{table}` WHERE `{column.name}` < 0",
                      f"ALTER TABLE {db}.`{table}` MODIFY `{column.name}` {column.data_type} "
                      "UNSIGNED"])
        return True

    def _ddl_latin1_column(self) -> bool:
        picked = self._pick()
        if picked is None:
            return False
        db, table = picked
        self.execute(f"ALTER TABLE {db}.`{table}` ADD COLUMN lat{self.counter} VARCHAR(20) "
                     "CHARACTER SET latin1")
        return True

    def _ddl_convert_charset(self) -> bool:
        picked = self._pick()
        if picked is None:
            return False
        db, table = picked
        charset = self.random.choice(["latin1", "utf8mb4"])
        self.execute(f"ALTER TABLE {db}.`{table}` CONVERT TO CHARACTER SET {charset}")
        return True

    def _ddl_create_like(self) -> bool:
        picked = self._pick()
        if picked is None:
            return False
        db, table = picked
        self.execute([f"CREATE TABLE {db}.`like{self.counter}` LIKE {db}.`{table}`"])
        return True

    def _ddl_gh_ost_cutover(self) -> bool:
        found = self._table_with(self._plain)
        if found is None:
            return False
        db, table, columns = found
        ghost, old = f"_{table}_gho", f"_{table}_del"
        names = ", ".join(f"`{c.name}`" for c in columns if "GENERATED" not in c.extra)
        self.execute([f"CREATE TABLE {db}.`{ghost}` LIKE {db}.`{table}`",
                      f"ALTER TABLE {db}.`{ghost}` ADD COLUMN gh{self.counter} INT FIRST",
                      f"INSERT INTO {db}.`{ghost}` ({names}) SELECT {names} FROM {db}.`{table}`",
                      f"RENAME TABLE {db}.`{table}` TO {db}.`{old}`, {db}.`{ghost}` TO "
                      f"{db}.`{table}`",
                      f"DROP TABLE {db}.`{old}`"])
        return True

    def _ddl_truncate(self) -> bool:
        picked = self._pick()
        if picked is None:
            return False
        self.execute(f"TRUNCATE TABLE {picked[0]}.`{picked[1]}`")
        return True

    def _ddl_drop_table(self) -> bool:
        tables = self.tables()
        if len(tables) < 4:
            return False
        db, table = self.random.choice(tables)
        self.execute(f"DROP TABLE {db}.`{table}`")
        return True

    def _ddl_drop_create_database(self) -> bool:
        b = self.b
        self.execute([f"DROP DATABASE {b}", f"CREATE DATABASE {b} CHARACTER SET latin1",
                      f"CREATE TABLE {b}.items (id INT PRIMARY KEY, label VARCHAR(20), "
                      "weight DOUBLE, born DATETIME(3))"])
        return True

    def _ddl_rename_across_databases(self) -> bool:
        tables = [t for t in self.tables() if t[0] == self.a]
        if not tables:
            return False
        _, table = self.random.choice(tables)
        if (self.b, table) in self.tables():
            return False
        self.execute(f"RENAME TABLE {self.a}.`{table}` TO {self.b}.`{table}`")
        return True

    def _ddl_keyless_duplicates(self) -> bool:
        name = f"bag{self.counter}"
        self.execute([f"CREATE TABLE {self.a}.`{name}` (k INT, v VARCHAR(10))",
                      f"INSERT INTO {self.a}.`{name}` VALUES (1, 'same'), (1, 'same'), "
                      "(2, 'other'), (1, 'same')",
                      f"DELETE FROM {self.a}.`{name}` WHERE k = 1 LIMIT 1",
                      f"UPDATE {self.a}.`{name}` SET v = 'changed' WHERE k = 1 LIMIT 1"])
        return True

    def _ddl_multi_clause(self) -> bool:
        found = self._table_with(self._plain)
        if found is None:
            return False
        db, table, columns = found
        plain = [c for c in columns if self._plain(c) and c.key != "PRI"]
        gone = plain[0]
        after = next(c for c in columns if c.name != gone.name)
        self.execute(f"ALTER TABLE {db}.`{table}` ADD COLUMN m{self.counter} INT FIRST, "
                     f"DROP COLUMN `{gone.name}`, ADD COLUMN n{self.counter} VARCHAR(5) "
                     f"AFTER `{after.name}`")
        return True

    def _ddl_versioned_comment(self) -> bool:
        picked = self._pick()
        if picked is None:
            return False
        db, table = picked
        self.execute(f"/*!40000 ALTER TABLE {db}.`{table}` */ /*!50100 ADD COLUMN "
                     f"vc{self.counter} SMALLINT */")
        return True

    def _ddl_primary_key(self) -> bool:
        """ADD PRIMARY KEY on a keyless table whose ``id`` values are distinct, else DROP
        PRIMARY KEY. (Never a new AUTO_INCREMENT key: the values the server gives existing
        rows are not in the binlog, so no mirror could follow without a snapshot.)"""
        for db, table in self.tables():
            columns = self.columns(db, table)
            if any(c.key == "PRI" for c in columns) or not any(c.name == "id" for c in columns):
                continue
            rows = self.execute(f"SELECT COUNT(*), COUNT(DISTINCT id), COUNT(id) FROM "
                                f"{db}.`{table}`")[0]
            if rows[0] == rows[1] == rows[2]:
                self.execute(f"ALTER TABLE {db}.`{table}` ADD PRIMARY KEY (id)")
                return True
        found = self._table_with(self._plain)
        if found is None:
            return False
        db, table, columns = found
        keys = [c for c in columns if c.key == "PRI"]
        if len(keys) != 1 or "auto_increment" in keys[0].extra.lower():
            return False
        self.execute(f"ALTER TABLE {db}.`{table}` DROP PRIMARY KEY")
        return True

    def _ddl_create_select(self) -> bool:
        picked = self._pick()
        if picked is None:
            return False
        db, table = picked
        columns = [c for c in self.columns(db, table) if "GENERATED" not in c.extra]
        names = ", ".join(f"`{c.name}`" for c in columns[:3])
        self.execute(f"CREATE TABLE {db}.`copy{self.counter}` AS SELECT {names} FROM "
                     f"{db}.`{table}`")
        return True

    def _ddl_generated_invisible(self) -> bool:
        """A new table with a stored and a virtual generated column and an invisible one
        (added to a table with rows, their values for those rows would not be in the
        binlog)."""
        name = f"gen{self.counter}"
        self.execute([f"CREATE TABLE {self.a}.`{name}` (id INT PRIMARY KEY, n INT, "
                      "g BIGINT AS (n * 2) STORED, v BIGINT AS (n + 1) VIRTUAL, "
                      "i INT DEFAULT 7 INVISIBLE)",
                      f"INSERT INTO {self.a}.`{name}` (id, n) VALUES (1, 10), (2, 20)",
                      f"INSERT INTO {self.a}.`{name}` (id, n, i) VALUES (3, 30, 3)",
                      f"UPDATE {self.a}.`{name}` SET n = n + 1 WHERE id = 1"])
        return True


def _labels(column_type: str) -> list[str]:
    inside = column_type[column_type.index("(") + 1:column_type.rindex(")")]
    return [p.strip("'") for p in inside.split(",")]
