"""What the driver's Iceberg commit class takes as text: properties one a line, file
locations one a line, tab-separated; what cannot be put that way is refused by name."""

from __future__ import annotations

import pytest

from changestream.model.errors import SinkError
from changestream.sinks.spark.iceberg.commits import check_location, encode_properties


def test_properties_are_key_and_value_one_a_line() -> None:
    assert encode_properties({"a": "1", "changestream.position": '{"file":"b.1"}'}) == \
        'a\n1\nchangestream.position\n{"file":"b.1"}\n'
    assert encode_properties({}) == ""
    with pytest.raises(SinkError, match=r"snapshot property 'p': a line break"):
        encode_properties({"p": "x\ny"})


def test_a_location_with_a_tab_or_line_break_is_refused() -> None:
    assert check_location("file:/w/db/t/data/x.parquet") == "file:/w/db/t/data/x.parquet"
    for bad in ("/w/a\tb/x.parquet", "/w/a\nb/x.parquet"):
        with pytest.raises(SinkError, match="tab or line break in file location"):
            check_location(bad)
