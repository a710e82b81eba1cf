"""The end-to-end workload: a table of many column types with a primary key, a table
without one, inserts, updates (one changing the key), deletes, a rolled-back transaction,
a transaction over both tables, ADD COLUMN and RENAME COLUMN in the middle.

``steps`` returns the statements in groups; the test runs them with pauses between, while
the router lands, so the changes arrive in several batches.
"""

from __future__ import annotations

import datetime as dt

COLUMNS = """
  id INT PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
  mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, bu BIGINT UNSIGNED, de DECIMAL(30,10), dw DECIMAL(65,20), f FLOAT, d DOUBLE,
  dt DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), dte DATE, y YEAR,
  c CHAR(5), vc VARCHAR(300), bn BINARY(8), vb VARBINARY(10), tx TEXT, bl BLOB,
  en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(10), js JSON, g POINT,
  u UUID, ip INET6, b BOOLEAN
"""


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def row_values(i: int) -> str:
    """The SQL values of row ``i``: every column set, a spread of values, edges included;
    every ninth row (i % 9 == 4) has NULL wherever the column allows it."""
    if i % 9 == 4:
        return f"({i}" + ", NULL" * 33 + ")"
    neg = "-" if i % 2 else ""
    d = dt.datetime(2000 + i % 30, 1 + i % 12, 1 + i % 28, i % 24, i % 60, (i * 7) % 60,
                    (i * 1111) % 1_000_000)
    ts = dt.datetime(1971 + i % 60, 1 + i % 12, 1 + i % 28, i % 24, 0, 1, (i * 37) % 1_000_000)
    values = [
        str(i), str((i * 7) % 256 - 128), str((i * 13) % 256), str(-32768 + i * 101),
        str(65535 - i), str(-8388608 + i * 1000), str(16777215 - i),
        str(-2147483648 + i * 12345), str(4294967295 - i),
        str(-9223372036854775808 + i), str(18446744073709551615 - i),
        _q(f"{neg}{i}{'1234567890' * 1}.{i:010d}"),
        _q(f"{neg}{'9' * 44}{i % 10}.{i:020d}"),
        str(i * 0.125 - 3), repr(i / 3), _q(d.isoformat(sep=" ")), _q(ts.isoformat(sep=" ")),
        _q(f"{neg}{(i * 17) % 839}:{i % 60:02d}:{(i * 7) % 60:02d}.{i * 3:06d}"),
        _q(f"{1000 + (i * 37) % 9000:04d}-{1 + i % 12:02d}-{1 + i % 28:02d}"),
        str(1901 + i % 255), _q(f"c{i % 1000}"), _q(f"héllo ✓ 𝄞 {i} " + "v" * (i % 7)),
        f"X'{i % 256:02x}00ff'", f"X'00{i % 256:02x}ff'", _q("text " * (i % 20)),
        f"X'{bytes(range(i % 50)).hex()}'" if i % 50 else "''",
        _q("abc"[i % 3]), _q(["", "x", "y,z", "x,y,z"][i % 4]), str((i * 37) % 1024),
        _q(f'{{"k": [1, 2.5, null, "x"], "i": {i}, "s": "é\\\\"}}'),
        f"ST_GeomFromText('POINT({i} {-i})')",
        _q(f"{i:08x}-baba-1026-9564-5b8c656024db"), _q(f"2001:db8::{i:x}"), str(i % 2),
    ]
    return "(" + ", ".join(values) + ")"


def steps(db: str) -> list[list[str]]:
    """The workload as groups of statements (each group runs on one connection)."""
    t, k = f"`{db}`.items", f"`{db}`.nokey"
    groups: list[list[str]] = [[
        f"CREATE TABLE {t} ({COLUMNS})",
        f"CREATE TABLE {k} (a INT, b VARCHAR(20), c DECIMAL(6,2), d DATE)",
    ]]
    for first in range(1, 41, 5):  # 40 rows in transactions of 5
        groups.append(["BEGIN",
                       f"INSERT INTO {t} VALUES " + ", ".join(row_values(i)
                                                              for i in range(first, first + 5)),
                       "COMMIT"])
    groups.append([
        f"INSERT INTO {k} VALUES (1, 'one', 1.50, '2024-01-01'), (1, 'one', 1.50, "
        "'2024-01-01'), (2, 'two', NULL, NULL), (3, NULL, -3.25, '1999-12-31'), "
        "(4, 'four', 4.00, '2000-02-29')",
        f"UPDATE {t} SET vc = CONCAT(vc, '!'), d = d * 2, st = 'x,z' WHERE id % 3 = 0",
        "BEGIN",
        f"UPDATE {t} SET id = id + 1000 WHERE id = 7",  # the key changes
        f"UPDATE {t} SET ts = NULL, js = '[]' WHERE id = 8",
        f"DELETE FROM {t} WHERE id % 5 = 0",
        "COMMIT",
    ])
    groups.append([  # rolled back: none of it lands
        "BEGIN",
        f"INSERT INTO {t} VALUES {row_values(500)}",
        f"UPDATE {t} SET vc = 'rolled back' WHERE id = 1",
        f"DELETE FROM {t} WHERE id = 2",
        f"INSERT INTO {k} VALUES (99, 'rolled back', 0, NULL)",
        f"DELETE FROM {k} WHERE a = 4",
        "ROLLBACK",
    ])
    groups.append([
        f"UPDATE {k} SET b = 'uno' WHERE a = 1",  # both copies of a duplicate row
        f"DELETE FROM {k} WHERE a = 2",
        "BEGIN",  # a transaction over both tables; a row inserted and deleted again
        f"INSERT INTO {t} VALUES {row_values(41)}, {row_values(42)}",
        f"INSERT INTO {k} VALUES (5, 'five', 5.55, '2025-05-05'), (6, 'six', 6, NULL)",
        f"DELETE FROM {t} WHERE id = 42",
        f"UPDATE {t} SET tu = 0, bu = 0, tm = '00:00:00' WHERE id = 41",
        "COMMIT",
    ])
    groups.append([f"ALTER TABLE {t} ADD COLUMN extra VARCHAR(20)",
                   f"ALTER TABLE {k} ADD COLUMN e INT"])
    groups.append([
        f"INSERT INTO {t} (id, vc, extra) VALUES (43, 'after add', 'x'), (44, NULL, NULL)",
        f"UPDATE {t} SET extra = CONCAT('e', id) WHERE id < 10",
        f"UPDATE {k} SET e = a * 10 WHERE a > 3",
        f"INSERT INTO {k} VALUES (7, 'seven', 7.77, NULL, 70)",
    ])
    groups.append([f"ALTER TABLE {t} RENAME COLUMN vc TO title",
                   f"ALTER TABLE {k} RENAME COLUMN b TO label"])
    groups.append([
        f"INSERT INTO {t} (id, title, extra, d) VALUES (45, 'after rename', 'y', 0.5)",
        f"UPDATE {t} SET title = CONCAT('renamed ', id) WHERE id BETWEEN 10 AND 20",
        f"DELETE FROM {t} WHERE id = 11",
        f"UPDATE {k} SET label = 'seven!' WHERE a = 7",
        f"DELETE FROM {k} WHERE a = 3",
        "BEGIN",
        f"INSERT INTO {t} VALUES {row_values(46)[:-1]}, 'e46')",
        "COMMIT",
    ])
    return groups
