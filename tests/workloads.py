"""Workloads shared by the integration tests: a table with every column type and what each
of its values must decode to."""

from __future__ import annotations

import datetime as dt
import gzip
import shutil
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql

from changestream.decoding.events import Event, RowsEvent, TransactionPayloadEvent

COMMON_COLUMNS = """
  id INT PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
  mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, bu BIGINT UNSIGNED, de DECIMAL(30,10), f FLOAT, d DOUBLE,
  dt DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), dte DATE, y YEAR,
  c CHAR(5), vc VARCHAR(300), bn BINARY(8), vb VARBINARY(10), tx TEXT, bl BLOB,
  en ENUM('a','b','c'), st SET('x','y','z'), st2 SET('x','y','z'), bt BIT(10), js JSON,
  g POINT
"""
COMMON_VALUES = (
    "1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,"
    " -9223372036854775808, 18446744073709551615, '-12345678901234567890.0123456789',"
    " 1.5, -2.25, '2024-02-29 23:59:59.123456', '2024-01-01 00:00:01.000001',"
    " '-838:59:59.000000', '1000-01-01', 2155, 'ab', 'héllo ✓ 𝄞', X'0102', X'00ff00',"
    " 'text', X'000102', 'b', '', 'x,z', b'1010101010', '{\"a\": [1, 2, {\"b\": null}]}',"
    " ST_GeomFromText('POINT(1 2)')"
)
EXPECTED = {
    "id": 1, "ti": -128, "tu": 255, "si": -32768, "su": 65535, "mi": -8388608, "mu": 16777215,
    "i": -2147483648, "iu": 4294967295, "bi": -9223372036854775808,
    "bu": 18446744073709551615, "de": Decimal("-12345678901234567890.0123456789"),
    "f": 1.5, "d": -2.25, "dt": dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
    "ts": dt.datetime(2024, 1, 1, 0, 0, 1, 1, tzinfo=dt.UTC),
    "tm": -dt.timedelta(hours=838, minutes=59, seconds=59), "dte": dt.date(1000, 1, 1),
    "y": 2155, "c": "ab", "vc": "héllo ✓ 𝄞", "bn": b"\x01\x02" + b"\0" * 6,
    "vb": b"\x00\xff\x00", "tx": "text", "bl": b"\x00\x01\x02", "en": "b", "st": [],
    "st2": ["x", "z"], "bt": 0b1010101010,
}


def types_table(server: Any, db: str) -> None:
    """Create ``db.types`` with every column type (and the server's own ones) and one row."""
    mariadb = "mariadb" in server.url
    extra = ", u UUID, ip INET6" if mariadb else ", vec VECTOR(3)"
    extra_values = (", '6ccd780c-baba-1026-9564-5b8c656024db', '2001:db8::'"
                    if mariadb else ", TO_VECTOR('[1.5, 2, -3]')")
    server.execute([
        "SET time_zone = '+00:00'",
        f"CREATE TABLE `{db}`.types ({COMMON_COLUMNS}{extra})",
        f"INSERT INTO `{db}`.types VALUES ({COMMON_VALUES}{extra_values})",
    ])


def archive_binlogs(server: Any, first: str, folder: Path) -> list[Path]:
    """The server's closed binlog files from ``first`` on, copied into ``folder`` as an
    archive would hold them (the second one gzip'd)."""
    server.execute("FLUSH BINARY LOGS")
    files = server.binlog_files()
    names = [f.name for f in files]
    folder.mkdir()
    out = []
    for i, path in enumerate(files[names.index(first):-1]):
        if i == 1:
            target = folder / (path.name + ".gz")
            with path.open("rb") as src, gzip.open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
        else:
            target = folder / path.name
            shutil.copyfile(path, target)
        out.append(target)
    return out


def inserted_ids(events: list[Event], db: str) -> list[int]:
    """The first column of every row inserted into ``db`` (inside compressed events too)."""
    ids = []
    for event in events:
        inner = event.events if isinstance(event, TransactionPayloadEvent) else [event]
        for e in inner:
            if isinstance(e, RowsEvent) and e.kind == "insert" and e.schema.database == db:
                ids.extend(row[0] for row in e.rows)
    return ids


def complete_lines(path: Path) -> int:
    """Whole lines in a file a router may still be writing (its last line may be half out)."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


class NumberedRowWriter(threading.Thread):
    """Inserts rows numbered 1, 2, 3, ... into ``table`` (``id INT PRIMARY KEY, v ...``),
    three to a transaction, until :meth:`stop`, or until the server goes away (a test that
    kills it). ``next_id``: the first number not written yet."""

    def __init__(self, server: Any, table: str, pause: float = 0.002) -> None:
        super().__init__(daemon=True)
        self.server, self.table, self.pause = server, table, pause
        self.next_id = 1
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            with self.server.connect(autocommit=False) as conn, conn.cursor() as cur:
                while not self.halt.is_set():
                    n = self.next_id
                    cur.execute(f"INSERT INTO {self.table} VALUES ({n}, 'a'), ({n + 1}, 'b'), "
                                f"({n + 2}, 'c')")
                    conn.commit()
                    self.next_id = n + 3
                    time.sleep(self.pause)
        except (pymysql.MySQLError, OSError):  # the server went away: the writer stops
            return

    def stop(self) -> None:
        self.halt.set()
        self.join(10)
