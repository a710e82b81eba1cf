"""The values a mirror gives existing rows when the source adds a column."""

from __future__ import annotations

import datetime as dt

import pytest

from changestream.sinks.spark.iceberg.defaults import added_column_defaults

TS = dt.datetime(2026, 11, 21, 6, 30, 1, 250000, tzinfo=dt.UTC)


@pytest.mark.parametrize(("sql", "expected"), [
    ("ALTER TABLE t ADD COLUMN vip BOOLEAN NOT NULL DEFAULT FALSE", {"vip": "0"}),
    ("ALTER TABLE t ADD COLUMN n INT", {"n": None}),
    ("ALTER TABLE t ADD COLUMN n INT NOT NULL", {"n": "0"}),
    ("ALTER TABLE t ADD n DECIMAL(10,2) DEFAULT '1.50'", {"n": "1.50"}),
    ("ALTER TABLE t ADD COLUMN s VARCHAR(10) NOT NULL", {"s": "''"}),
    ("ALTER TABLE t ADD COLUMN s VARCHAR(10) DEFAULT 'it''s'", {"s": "'it\\'s'"}),
    ("ALTER TABLE t ADD COLUMN e ENUM('new','old') NOT NULL", {"e": "'new'"}),
    ("ALTER TABLE t ADD COLUMN st SET('a','b') NOT NULL", {"st": "array()"}),
    ("ALTER TABLE t ADD COLUMN x INT DEFAULT NULL", {"x": None}),
    ("ALTER TABLE t ADD COLUMN x INT DEFAULT (1 + 1)", {"x": None}),
    ("ALTER TABLE t ADD COLUMN ts TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)",
     {"ts": "TIMESTAMP '2026-11-21 06:30:01.250000'"}),
    ("ALTER TABLE t ADD COLUMN d DATETIME DEFAULT NOW()",
     {"d": "TIMESTAMP_NTZ '2026-11-21 06:30:01.250000'"}),
    ("ALTER TABLE t ADD COLUMN `my col` INT DEFAULT 7, ADD INDEX i (a), "
     "ADD COLUMN b VARCHAR(3) DEFAULT 'x,y' /* comment, with commas */",
     {"my col": "7", "b": "'x,y'"}),
    ("ALTER TABLE t ADD PRIMARY KEY (id), DROP COLUMN z", {}),
    ("ALTER TABLE t ADD COLUMN d DATE NOT NULL", {"d": None}),
])
def test_added_column_defaults(sql: str, expected: dict[str, str | None]) -> None:
    assert added_column_defaults(sql, TS) == expected
