"""Temporal values in change records: every value of a column with the column's precision."""

from __future__ import annotations

import datetime as dt

import pytest

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.encoding.temporal_text import (
    column_formats,
    datetime_format,
    formatted,
    time_format,
)


@pytest.mark.parametrize(("fsp", "value", "text"), [
    (0, dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05"),
    (3, dt.datetime(2024, 1, 2, 3, 4, 5, 120000), "2024-01-02T03:04:05.120"),
    (6, dt.datetime(1000, 1, 1), "1000-01-01T00:00:00.000000"),
    (2, "0000-00-00 00:00:00.00", "0000-00-00T00:00:00.00"),
    (0, "2024-02-30 00:00:00", "2024-02-30T00:00:00"),
])
def test_datetime_has_exactly_the_column_precision(fsp: int, value: object, text: str) -> None:
    assert datetime_format(fsp, utc=False)(value) == text


def test_timestamp_carries_utc_and_the_column_precision() -> None:
    write = datetime_format(4, utc=True)
    assert write(dt.datetime(2024, 1, 1, 0, 0, 1, 123400, tzinfo=dt.UTC)) == \
        "2024-01-01T00:00:01.1234+00:00"
    assert write("0000-00-00 00:00:00.0000") == "0000-00-00T00:00:00.0000+00:00"


@pytest.mark.parametrize(("fsp", "value", "text"), [
    (0, -dt.timedelta(hours=838, minutes=59, seconds=59), "-838:59:59"),
    (1, dt.timedelta(hours=12, microseconds=500000), "12:00:00.5"),
    (2, -dt.timedelta(hours=1, microseconds=500000), "-01:00:00.50"),
    (6, dt.timedelta(microseconds=1), "00:00:00.000001"),
])
def test_time_has_exactly_the_column_precision(fsp: int, value: dt.timedelta,
                                               text: str) -> None:
    assert time_format(fsp)(value) == text


def test_images_are_copied_not_changed_and_absent_columns_stay_absent() -> None:
    schema = TableSchema("d", "t", (
        Column(0, ft.LONG, name="id"), Column(1, ft.DATETIME2, name="at", fsp=0),
        Column(2, ft.TIME2, name="dur", fsp=3)))
    formats = column_formats(schema)
    image = {"id": 1, "at": dt.datetime(2024, 1, 1)}
    assert formatted(image, formats) == {"id": 1, "at": "2024-01-01T00:00:00"}
    assert image["at"] == dt.datetime(2024, 1, 1)
    plain = {"id": 2}
    assert formatted(plain, formats) is plain
    assert formatted(None, formats) is None
