"""The quick ways of writing records give exactly the bytes of the plain ones."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal, localcontext

import orjson
import pytest

from changestream.encoding.records import JSON_OPTIONS, change_record, encode_lines, json_default
from changestream.model.changes import Change, TransactionInfo

LONG_SQL = "INSERT INTO t VALUES " + ", ".join(f"({i}, 'a\"b\\\\c ✓')" for i in range(300))


def _plain(changes: list[Change], ts: str) -> bytes:
    return b"".join(orjson.dumps(change_record(c, ts), default=json_default, option=JSON_OPTIONS)
                    for c in changes)


def test_change_records_are_written_as_change_record_gives_them() -> None:
    t1 = TransactionInfo("0-1-7", "0-1-7", 3,
                         dt.datetime(2024, 1, 1, 0, 0, 0, tzinfo=dt.UTC), 3, 1, "f", 4, 9)
    t2 = TransactionInfo("1-f-4", None, None, None, 2, 1, "f", 9, 20)
    values = {"i": 1, "d": Decimal("0E-10"), "t": dt.datetime(2020, 1, 1), "b": b"\x00"}
    changes = [
        Change("insert", "db", "t", None, values, {"i": 1}, LONG_SQL, "f", 5, 0, seq=0,
               transaction=t1),
        Change("insert", "db", "t", None, values, {"i": 2}, LONG_SQL, "f", 5, 1, seq=1,
               transaction=t1),
        Change("update", "db", "t", values, values, None, "UPDATE t SET x = 1", "f", 6, 0,
               seq=2, last=True, transaction=t1),
        Change("delete", "db", "t", values, None, {"i": 1}, None, "f", 10, 0, transaction=t2),
        Change("ddl", "db", "t", None, None, None, LONG_SQL, "f", 11, 0, transaction=t2,
               last=True),
        Change("insert", "db", "t", None, {"i": 3}, None, LONG_SQL, "f", 12, 0),
    ]
    assert encode_lines(changes, ts="now") == _plain(changes, "now")


def _decimals() -> list[Decimal]:
    rng = random.Random(5)
    out = [Decimal(s) for s in ("0", "-0", "0.00", "-0.00", "0E-10", "1E+2", "100", "-1.5",
                                "0.0000001", "0.000001", "1E-7", "123456789012345678901234567"
                                "890.123456789012345678901234567890", "NaN", "Infinity",
                                "-Infinity")]
    for _ in range(2000):
        digits = str(rng.randint(0, 10 ** rng.randint(0, 40)))
        scale = rng.randint(0, 30)
        out.append(Decimal(f"{'-' if rng.random() < 0.5 else ''}{digits}E-{scale}"))
        out.append(Decimal(f"{digits}E+{rng.randint(0, 5)}"))
    return out


@pytest.mark.parametrize("capitals", [1, 0])
def test_decimals_are_written_as_format_f_writes_them(capitals: int) -> None:
    with localcontext() as ctx:
        ctx.capitals = capitals
        for value in _decimals():
            assert json_default(value) == format(value, "f"), repr(value)


def test_datetimes_are_written_as_isoformat_with_microseconds() -> None:
    rng = random.Random(6)
    for _ in range(2000):
        value = dt.datetime(1, 1, 1) + dt.timedelta(seconds=rng.randint(0, 3 * 10 ** 11),
                                                    microseconds=rng.choice(
                                                        (0, 1, rng.randint(0, 999_999))))
        if rng.random() < 0.5:
            value = value.replace(tzinfo=dt.UTC)
        assert json_default(value) == value.isoformat(timespec="microseconds")
