"""The compiled decode worker path against the Python one, on every live server: thousands
of rows of random and edge values of every type it reads in C (and of types it hands to
Python readers), inserted, updated and deleted in transactions of many sizes. Every segment
must give the same records on the compiled path, the Python fast path and the general path,
and the compiled path must take every segment the Python one takes."""

from __future__ import annotations

import datetime as dt
import random
import re
from typing import Any

import pytest

from changestream.transactions.filters import ChangeFilter
from tests.segments import (
    compare_arrow_paths,
    compare_worker_paths,
    compiled_encoder,
    worker_segments,
)

pytestmark = pytest.mark.integration

COLUMNS = """
  id BIGINT PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT,
  mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
  d1 DECIMAL(5,2), d2 DECIMAL(30,10), d3 DECIMAL(65,30), d4 DECIMAL(10,0),
  d5 DECIMAL(18,17) UNSIGNED, d6 DECIMAL(9,9),
  db DOUBLE, fl FLOAT,
  dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6),
  ts0 TIMESTAMP NULL, ts2 TIMESTAMP(2) NULL, ts6 TIMESTAMP(6) NULL,
  tm0 TIME, tm1 TIME(1), tm4 TIME(4), tm6 TIME(6), dte DATE, y YEAR,
  c CHAR(10) CHARACTER SET utf8mb4, vc VARCHAR(300) CHARACTER SET utf8mb4,
  l1 VARCHAR(20) CHARACTER SET latin1, bn BINARY(6), vb VARBINARY(300),
  tx TEXT CHARACTER SET utf8mb4, bl BLOB, en ENUM('a','b','c'), bt BIT(12), js JSON
"""
NAMES = re.findall(r"(?:^|,)\s*([a-z]\w*) [A-Z]", COLUMNS)

TEXT = "aZ09 \"\\'/\t\n\r\b\f\x01\x1f\x7fé€✓𝄞\u2028ß"


def _int(rng: random.Random, bits: int, unsigned: bool) -> int:
    low, high = (0, 2 ** bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return rng.choice([low, high, 0, 1, -1 if not unsigned else 2, rng.randint(low, high),
                       rng.randint(low, high)])


def _decimal(rng: random.Random, precision: int, scale: int, unsigned: bool = False) -> str:
    whole = precision - scale
    integer = str(rng.randint(0, 10 ** whole - 1)) if whole else "0"
    if rng.random() < 0.2:
        integer = "0"
    fraction = "".join(rng.choice("0123456789") for _ in range(scale))
    if rng.random() < 0.1:
        fraction = "0" * scale
    sign = "" if unsigned or rng.random() < 0.5 else "-"
    return f"{sign}{integer}.{fraction}" if scale else f"{sign}{integer}"


def _double(rng: random.Random) -> str:
    special = [0.0, -0.0, 1e16, 1e15, 123456789012345678.0, 1e-5, 1e-4, 0.1, 1 / 3, -2.5e-7,
               1.7976931348623157e308, 2.2250738585072014e-308, 5e-324, 9007199254740993.0]
    if rng.random() < 0.3:
        return repr(rng.choice(special))
    return repr(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30))


def _datetime(rng: random.Random, fsp: int) -> str:
    if rng.random() < 0.05:
        return "0000-00-00 00:00:00"
    if rng.random() < 0.05:
        return f"{rng.randint(1000, 9999)}-02-30 12:00:00"  # allowed by ALLOW_INVALID_DATES
    text = (f"{rng.randint(1000, 9999):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}")
    return text + (f".{rng.randint(0, 10 ** fsp - 1):0{fsp}d}" if fsp else "")


def _timestamp(rng: random.Random, fsp: int) -> str | None:
    if rng.random() < 0.05:
        return None
    if rng.random() < 0.05:
        return "0000-00-00 00:00:00"
    seconds = rng.choice([1, 2 ** 31 - 1, rng.randint(1, 2 ** 31 - 1)])
    text = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{rng.randint(0, 10 ** fsp - 1):0{fsp}d}" if fsp else "")


def _time(rng: random.Random, fsp: int) -> str:
    hours = rng.choice([0, 838, rng.randint(0, 838)])
    sign = "-" if rng.random() < 0.4 else ""
    text = f"{sign}{hours}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    if hours == 838:
        text = f"{sign}838:59:59"
    return text + (f".{rng.randint(0, 10 ** fsp - 1):0{fsp}d}" if fsp and hours != 838 else "")


def _text(rng: random.Random, longest: int, alphabet: str = TEXT) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))


def _row(rng: random.Random, key: int) -> list[Any]:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.04 else value

    return [key] + [maybe(v) for v in [
        _int(rng, 8, False), _int(rng, 8, True), _int(rng, 16, False), _int(rng, 16, True),
        _int(rng, 24, False), _int(rng, 24, True), _int(rng, 32, False), _int(rng, 32, True),
        _int(rng, 64, False), _int(rng, 64, True),
        _decimal(rng, 5, 2), _decimal(rng, 30, 10), _decimal(rng, 65, 30),
        _decimal(rng, 10, 0), _decimal(rng, 18, 17, unsigned=True), _decimal(rng, 9, 9),
        _double(rng), repr(rng.uniform(-1e6, 1e6)),
        _datetime(rng, 0), _datetime(rng, 3), _datetime(rng, 6),
        _timestamp(rng, 0), _timestamp(rng, 2), _timestamp(rng, 6),
        _time(rng, 0), _time(rng, 1), _time(rng, 4), _time(rng, 6),
        _datetime(rng, 0)[:10], rng.choice([1901, 2155, 2000, 0]),
        _text(rng, 10), _text(rng, 300), _text(rng, 20, "abc XYZ\"\\\x01éÿ"),
        rng.randbytes(rng.randint(0, 6)), rng.randbytes(rng.randint(0, 300)),
        _text(rng, 2000), rng.randbytes(rng.randint(0, 3000)), rng.choice("abc"),
        rng.randint(0, 4095), '{"k": [1, "two", null, 3.5]}',
    ]]


def _workload(server: Any, db: str, rng: random.Random) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute(f"CREATE TABLE `{db}`.v ({COLUMNS})")
            marks = ", ".join(["%s"] * len(NAMES))
            insert = f"INSERT INTO `{db}`.v VALUES ({marks})"
            key = 0
            for size in [1, 2, 50, 1, 120, 7, 1, 300, 3, 1] * 3:
                cur.execute("BEGIN")
                rows = []
                for _ in range(size):
                    key += 1
                    rows.append(_row(rng, key))
                cur.executemany(insert, rows)
                cur.execute("COMMIT")
            assignments = ", ".join(f"`{n}` = %s" for n in NAMES[1:])
            for _ in range(40):
                cur.execute("BEGIN")
                for changed in rng.sample(range(1, key + 1), rng.randint(1, 10)):
                    cur.execute(f"UPDATE `{db}`.v SET {assignments} WHERE id = %s",
                                [*_row(rng, changed)[1:], changed])
                cur.execute("COMMIT")
            cur.execute(f"DELETE FROM `{db}`.v WHERE id % 7 = 3")
    finally:
        conn.close()


def _workload_segments(server: Any, db: str, seed: str) -> list[Any]:
    """The decode workers' segments of a run of the workload (random by ``seed``)."""
    start = server.binlog_position()
    _workload(server, db, random.Random(f"{server.url}-{seed}"))
    server.execute("FLUSH BINARY LOGS")
    files = server.binlog_files()
    files = files[[f.name for f in files].index(start[0]):]
    return worker_segments(files, start[1])


def test_compiled_rows_write_what_python_writes(server: Any, fresh_database: str) -> None:
    if compiled_encoder() is None:
        pytest.skip("the compiled decode worker path is not built")
    db = fresh_database
    segments = _workload_segments(server, db, "compiled")
    for include_sql in (False, True):
        taken = compare_worker_paths(segments, ChangeFilter(include=[db]), include_sql)
        assert taken is not None and taken >= 0.9 * len(segments), (taken, len(segments))


def test_compiled_frames_are_what_the_general_path_makes(server: Any,
                                                         fresh_database: str) -> None:
    """The compiled Arrow path (decode workers for the Spark sink) gives the frames the
    general path makes from change objects, value for value and type for type, on the same
    workload of every type and edge value."""
    db = fresh_database
    segments = _workload_segments(server, db, "arrow")
    taken = compare_arrow_paths(segments, ChangeFilter(include=[db]))
    if taken is None:
        pytest.skip("the compiled Arrow path is not built")
    assert taken >= 0.9 * len(segments), (taken, len(segments))


def test_snapshot_frames_are_what_the_general_path_makes(
        server: Any, fresh_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot of the same table into the Spark sink: each chunk's frame read from the
    server's text by the compiled module is the one the general path makes of the chunk's
    ``snapshot`` changes, value for value and type for type (on every live server)."""
    pytest.importorskip("pyarrow")
    from changestream.model.changes import Position
    from changestream.sinks.spark import snapshot_frames
    from changestream.sinks.spark.frames import table_runs
    from changestream.snapshot.coordinator import ChunkOffer, SnapshotCoordinator
    from changestream.snapshot.progress import SnapshotProgress
    from changestream.snapshot.reader import ChunkReader
    from tests.unit.test_snapshot_frames import assert_same_runs

    if snapshot_frames.native() is None:
        pytest.skip("the compiled snapshot frames module is not built")
    db = fresh_database
    _workload(server, db, random.Random(f"{server.url}-snapshot"))
    general_frames = []

    def general_frame(*args: Any) -> Any:
        general_frames.append(args)
        return general(*args)

    general = snapshot_frames.general_frame
    monkeypatch.setattr(snapshot_frames, "general_frame", general_frame)
    runs = {}
    for name, encoding in (("fast", snapshot_frames.ArrowChunks()), ("general", None)):
        reader = ChunkReader(server.connect, 150, encoding)
        try:
            plan = reader.plan(db, "v")
            assert plan is not None and (plan.encoding is None) == (encoding is None)
            coordinator = SnapshotCoordinator(SnapshotProgress("s", (plan.name,)))
            parts, after = [], None
            while True:
                chunk = reader.read(plan, after, ("", 0))
                chunk.read_at = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)  # both alike
                delivered = coordinator.deliver(
                    ChunkOffer(plan, chunk), Position("binlog.000001", 4),
                    lambda p: Position("binlog.000001", 4, snapshot=p.as_dict()))
                assert delivered is not None
                parts += delivered[0]
                after = chunk.last_key
                if chunk.done:
                    break
        finally:
            reader.close()
        runs[name] = table_runs(parts)
    assert sum(r.rows for r in runs["general"]) > 500
    assert_same_runs(runs["fast"], runs["general"])
    assert general_frames == []  # every chunk read by the compiled module
