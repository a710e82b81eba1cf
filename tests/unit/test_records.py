"""Change records as JSON lines: every column value keeps its meaning, in changestream's
format and in the original changestream message format."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest

from changestream.encoding.records import (
    change_record,
    encode_lines,
    json_default,
    original_record,
    record_builder,
)
from changestream.model.changes import Change, TransactionInfo

COMMIT_TS = dt.datetime(2024, 5, 17, 8, 30, 15, 123456, tzinfo=dt.UTC)
GTID = "3e11fa47-71ca-11e1-9e33-c80aa9429562:42"


def info(size: int = 2, commit_ts: dt.datetime | None = COMMIT_TS) -> TransactionInfo:
    return TransactionInfo(GTID, GTID, 77, commit_ts, size, 1, "mysql-bin.000003", 400, 900)


def change(op: str = "insert", before: dict[str, Any] | None = None,
           after: dict[str, Any] | None = None, *, seq: int = 0, last: bool = False,
           transaction: TransactionInfo | None = None) -> Change:
    if op == "insert" and after is None:
        after = {"id": 1}
    return Change(op, "shop", "orders", before, after, {"id": 1}, "INSERT INTO orders ...",
                  "mysql-bin.000003", 555, 2, seq=seq, last=last,
                  transaction=transaction if transaction is not None else info())


def written(value: Any) -> Any:
    """``value`` as a column value after a JSON line and back."""
    line = encode_lines([change(after={"v": value})], ts="now")
    return json.loads(line)["after"]["v"]


# -- values --------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("12.50"), "12.50"),
    (Decimal("-0.05"), "-0.05"),
    (Decimal("0.00"), "0.00"),
    (Decimal("100"), "100"),
    # DECIMAL(20,10) values: small numbers keep their scale, never exponent notation.
    (Decimal("0.0000000000"), "0.0000000000"),
    (Decimal("0.0000000123"), "0.0000000123"),
    (Decimal("-0.0000001000"), "-0.0000001000"),
    (Decimal("12345678901234567890.1234567890"), "12345678901234567890.1234567890"),
])
def test_decimal_is_a_string_keeping_its_scale(value: Decimal, text: str) -> None:
    assert written(value) == text


@pytest.mark.parametrize("value", [0, -1, 2**31, 18446744073709551615, -9223372036854775808])
def test_integers_are_exact_json_numbers(value: int) -> None:
    line = encode_lines([change(after={"v": value})], ts="now")
    assert f'"v":{value}'.encode() in line
    assert written(value) == value


def test_floats_are_numbers() -> None:
    assert written(1.5) == 1.5
    assert written(-2.25e-10) == -2.25e-10


@pytest.mark.parametrize(("value", "text"), [
    (dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05.000000"),
    (dt.datetime(2024, 1, 2, 3, 4, 5, 6), "2024-01-02T03:04:05.000006"),
    (dt.datetime(1000, 1, 1), "1000-01-01T00:00:00.000000"),
    (dt.datetime(9999, 12, 31, 23, 59, 59, 999999), "9999-12-31T23:59:59.999999"),
])
def test_datetime_is_naive_with_microseconds_always(value: dt.datetime, text: str) -> None:
    assert written(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC), "2024-01-02T03:04:05.000000+00:00"),
    (dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=dt.UTC), "1970-01-01T00:00:01.500000+00:00"),
])
def test_timestamp_is_utc_with_its_offset(value: dt.datetime, text: str) -> None:
    assert written(value) == text


def test_date() -> None:
    assert written(dt.date(2024, 2, 29)) == "2024-02-29"
    assert written(dt.date(1, 1, 1)) == "0001-01-01"


@pytest.mark.parametrize(("value", "text"), [
    (dt.timedelta(0), "00:00:00.000000"),
    (dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=789), "12:34:56.000789"),
    (dt.timedelta(hours=838, minutes=59, seconds=59), "838:59:59.000000"),
    (dt.timedelta(hours=25, minutes=1), "25:01:00.000000"),
    (-dt.timedelta(hours=838, minutes=59, seconds=59), "-838:59:59.000000"),
    (-dt.timedelta(hours=30, minutes=2, seconds=3, microseconds=400000), "-30:02:03.400000"),
    (-dt.timedelta(microseconds=1), "-00:00:00.000001"),
    (-dt.timedelta(minutes=5), "-00:05:00.000000"),
])
def test_time_is_hours_minutes_seconds_with_sign_and_hours_past_24(
        value: dt.timedelta, text: str) -> None:
    assert written(value) == text


def test_time_of_day_object() -> None:
    assert written(dt.time(1, 2, 3)) == "01:02:03.000000"


@pytest.mark.parametrize("value", [b"", b"\x00\xff\x10binary", bytes(range(256))])
def test_bytes_are_base64(value: bytes) -> None:
    text = written(value)
    assert isinstance(text, str)
    assert base64.b64decode(text) == value


def test_bytearray_and_memoryview_are_base64_too() -> None:
    assert written(bytearray(b"\x01\x02")) == base64.b64encode(b"\x01\x02").decode()
    assert written(memoryview(b"\x03\x04")) == base64.b64encode(b"\x03\x04").decode()


def test_json_column_values_are_json() -> None:
    doc = {"a": [1, 2.5, None, True, "x"], "nested": {"k": {"deep": []}}, "": "empty key",
           "big": 18446744073709551615, "price": Decimal("9.90")}
    assert written(doc) == {"a": [1, 2.5, None, True, "x"], "nested": {"k": {"deep": []}},
                            "": "empty key", "big": 18446744073709551615, "price": "9.90"}
    assert written([1, "two", {"three": 3}]) == [1, "two", {"three": 3}]
    assert written("a JSON string") == "a JSON string"
    assert written(None) is None


def test_set_is_a_list_of_labels_and_the_empty_set_an_empty_list() -> None:
    assert written(["red", "blue"]) == ["red", "blue"]
    assert written([]) == []
    assert written(frozenset()) == []
    assert written(("a", "b")) == ["a", "b"]


def test_enum_label_and_zero_dates_stay_strings() -> None:
    assert written("medium") == "medium"
    assert written("0000-00-00 00:00:00") == "0000-00-00 00:00:00"


def test_unicode_text_is_written_as_utf8() -> None:
    line = encode_lines([change(after={"v": "grüße ✓ 😀"})], ts="now")
    assert "grüße ✓ 😀".encode() in line


def test_unknown_types_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match="object"):
        json_default(object())


# -- changestream format -------------------------------------------------------------------


def test_change_record_carries_the_change_its_transaction_and_position() -> None:
    c = change("update", {"id": 1, "total": Decimal("1.00")}, {"id": 1, "total": Decimal("2.00")},
               seq=1, last=True)
    assert change_record(c, "2024-05-17T08:30:16.000000+00:00") == {
        "op": "update",
        "database": "shop",
        "table": "orders",
        "before": {"id": 1, "total": Decimal("1.00")},
        "after": {"id": 1, "total": Decimal("2.00")},
        "primary_key": {"id": 1},
        "sql": "INSERT INTO orders ...",
        "transaction": {"id": GTID, "gtid": GTID, "xid": 77, "seq": 1, "size": 2, "last": True,
                        "commit_ts": "2024-05-17T08:30:15.123456+00:00"},
        "position": {"file": "mysql-bin.000003", "pos": 555, "row": 2},
        "ts": "2024-05-17T08:30:16.000000+00:00",
    }


def test_change_without_a_transaction() -> None:
    c = Change("ddl", "shop", None, None, None, None, "DROP TABLE x", "f", 4, 0)
    record = change_record(c, "now")
    assert record["transaction"] is None
    assert record["op"] == "ddl" and record["sql"] == "DROP TABLE x"


def test_encode_lines_writes_one_line_per_change() -> None:
    changes = [change(seq=0), change("delete", {"id": 1}, None, seq=1, last=True)]
    data = encode_lines(changes, ts="2024-01-01T00:00:00.000000+00:00")
    assert data.endswith(b"\n")
    lines = data.splitlines()
    assert len(lines) == 2
    records = [json.loads(line) for line in lines]
    assert [r["op"] for r in records] == ["insert", "delete"]
    assert [r["transaction"]["seq"] for r in records] == [0, 1]
    assert [r["transaction"]["last"] for r in records] == [False, True]
    assert {r["ts"] for r in records} == {"2024-01-01T00:00:00.000000+00:00"}
    assert records[0]["transaction"]["commit_ts"] == "2024-05-17T08:30:15.123456+00:00"


def test_encode_lines_stamps_the_current_time_when_not_given() -> None:
    before = dt.datetime.now(dt.UTC)
    record = json.loads(encode_lines([change()]))
    stamped = dt.datetime.fromisoformat(record["ts"])
    assert stamped.tzinfo is not None
    assert before - dt.timedelta(seconds=1) <= stamped <= dt.datetime.now(dt.UTC)


def test_encode_lines_of_nothing_is_empty() -> None:
    assert encode_lines([], ts="now") == b""


# -- original format -----------------------------------------------------------------------


def test_original_record_of_an_update() -> None:
    c = change("update", {"id": 1, "n": 1}, {"id": 1, "n": 2}, seq=1, last=True)
    assert original_record(c, "now") == {
        "mutation": "UPDATE",
        "sequence": 1,
        "database": "shop",
        "table": "orders",
        "query": {"timestamp": int(COMMIT_TS.timestamp() * 1000), "sql": "INSERT INTO orders ...",
                  "row_count": 2, "current_row": 2},
        "primary_key": {"id": 1},
        "transaction": {"id": GTID, "current_row": 1, "last_mutation": True},
        "row_data": {"id": 1, "n": 2},
        "old_row_data": {"id": 1, "n": 1},
    }


def test_original_record_of_a_delete_carries_the_old_row_as_row_data() -> None:
    record = original_record(change("delete", {"id": 9}, None), "now")
    assert record["mutation"] == "DELETE"
    assert record["row_data"] == {"id": 9}
    assert "old_row_data" not in record
    assert "last_mutation" not in record["transaction"]


def test_original_record_without_transaction_or_commit_time() -> None:
    c = Change("insert", "shop", "orders", None, {"id": 1}, None, None, "f", 4, 0)
    record = original_record(c, "now")
    assert record["query"] == {"timestamp": None, "sql": "", "row_count": 1, "current_row": 1}
    assert record["transaction"] == {"id": None, "current_row": 0}
    assert record["primary_key"] == {}
    no_ts = change(transaction=info(commit_ts=None))
    assert original_record(no_ts, "now")["query"]["timestamp"] is None


def test_encode_lines_in_the_original_format() -> None:
    record = json.loads(encode_lines([change(after={"d": Decimal("0.10")})], "original", "now"))
    assert record["mutation"] == "INSERT" and record["row_data"] == {"d": "0.10"}


def test_unknown_format_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="changestream, original"):
        record_builder("avro")
    assert record_builder("changestream") is change_record
    assert record_builder("original") is original_record
