"""The Parquet encoding of the files the driver writes into an Iceberg table
(sinks/spark/iceberg/parquet_encoding.py): the table's codec properties, and dictionaries
for text columns only."""

from __future__ import annotations

import decimal
import io

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from changestream.model.errors import SinkError  # noqa: E402
from changestream.sinks.spark.iceberg.parquet_encoding import (  # noqa: E402
    ParquetEncoding,
    dictionary_columns,
)


def test_the_codec_and_level_are_the_table_s_properties() -> None:
    assert ParquetEncoding.of_table("t", None, None) == ParquetEncoding("zstd", None)
    assert ParquetEncoding.of_table("t", "ZSTD", "3") == ParquetEncoding("zstd", 3)
    assert ParquetEncoding.of_table("t", "uncompressed", None) == ParquetEncoding("none")
    assert ParquetEncoding.of_table("t", "gzip", "9") == ParquetEncoding("gzip", 9)
    # A level for a codec without levels is left out, as Iceberg's writers leave it.
    assert ParquetEncoding.of_table("t", "snappy", "5") == ParquetEncoding("snappy", None)
    assert ParquetEncoding.of_table("t", "lzo", None) is None
    with pytest.raises(SinkError, match=r"db\.t's write\.parquet\.compression-level is 'x'"):
        ParquetEncoding.of_table("db.t", "zstd", "x")
    with pytest.raises(SinkError, match=r"compression-level is 12, which gzip does not take"):
        ParquetEncoding.of_table("db.t", "gzip", "12")


def test_text_columns_have_dictionaries_and_numbers_do_not() -> None:
    n = 5_000
    rows = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "code": pa.array([i % 3 for i in range(n)], pa.int32()),
        "status": pa.array([("new", "paid", "sent")[i % 3] for i in range(n)]),
        "blob": pa.array([b"ab" * (i % 2) for i in range(n)], pa.binary()),
        "amount": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(12, 2)),
    })
    assert dictionary_columns(rows.schema) == ["status", "blob"]
    for encoding in (ParquetEncoding(), ParquetEncoding("gzip", 9), ParquetEncoding("none")):
        out = io.BytesIO()
        encoding.write(rows, out)
        out.seek(0)
        meta = pq.ParquetFile(out).metadata.row_group(0)
        for i, name in enumerate(rows.column_names):
            column = meta.column(i)
            assert column.compression == {"zstd": "ZSTD", "gzip": "GZIP",
                                          "none": "UNCOMPRESSED"}[encoding.codec]
            assert ("RLE_DICTIONARY" in column.encodings) == (name in ("status", "blob")), name
        out.seek(0)
        assert pq.read_table(out).equals(rows)
