"""MySQL/MariaDB column types to Spark and Arrow types, and row values to Arrow values.

One mapping for every landing mode (docs/sinks.md, "Column types", has the table):
DECIMAL(p,s) is DecimalType(p,s) up to p=38 and its exact text (string) beyond, since Spark
stops at 38 digits; unsigned integers widen to the next type (BIGINT UNSIGNED to
DecimalType(20,0)); DATETIME is TimestampNTZType and TIMESTAMP TimestampType (UTC); TIME is
the text ``[-]HH:MM:SS.ffffff`` (hours pass 24; Iceberg has no interval type, so one form
serves all modes); zero or invalid dates, which Spark cannot hold, become NULL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa

from changestream.decoding import field_types as ft
from changestream.decoding.charsets import codec_for_collation
from changestream.decoding.json_binary import JSON_NULL
from changestream.decoding.table_schema import Column, TableSchema
from changestream.encoding.records import json_default
from changestream.encoding.temporal_text import time_text
from changestream.model.record import record

if TYPE_CHECKING:
    from pyspark.sql import types as T

Convert = Callable[[Any], Any]
MAX_DECIMAL_PRECISION = 38
#: How big a Parquet column chunk's dictionary page may grow before the writer falls back
#: to plain encoding. At Arrow's default, 1 MB, a column of mostly distinct values (keys,
#: amounts, times) had every value hashed before the fallback: a changelog file took half
#: as long again to write and came out bigger (docs/performance.md).
#: Columns of few values (the change metadata, codes) stay dictionary-encoded (in the
#: Iceberg driver's files only text and binary columns have dictionaries at all:
#: iceberg/parquet_encoding.py).
PARQUET_DICTIONARY_PAGE_BYTES = 64 << 10


@record(frozen=True)
class FieldMapping:
    """How one column lands: its Spark type, Arrow type, and value conversion."""

    name: str
    # Spark's name of the type (``simpleString``: int, decimal(20,0), array<string>):
    # the decode workers map columns too, and they do without importing PySpark.
    spark_type: str
    arrow: pa.DataType
    convert: Convert | None  # None: the decoded value is already right for Arrow

    @property
    def spark(self) -> T.DataType:
        """The Spark type."""
        return spark_type(self.spark_type)


def _json_text(value: Any) -> str:
    if value is JSON_NULL:
        return "null"  # SQL NULL lands as a null column value, JSON null as its text
    return orjson.dumps(value, default=json_default, option=orjson.OPT_NON_STR_KEYS).decode()


def _text(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def _binary(value: Any) -> Any:
    return value.encode("utf-8") if isinstance(value, str) else value


def _only(kind: type | tuple[type, ...]) -> Convert:
    """Values of ``kind`` pass; the strings MySQL prints for zero dates become NULL."""
    def convert(value: Any) -> Any:
        return value if isinstance(value, kind) else None
    return convert


def _datetime_ntz(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) if value.tzinfo else value
    return None


def _timestamp(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return None


def _time_text(value: Any) -> Any:
    return time_text(value) if isinstance(value, dt.timedelta) else str(value)


def _enum(value: Any) -> Any:
    return value if isinstance(value, str) else str(value)


def _set(value: Any) -> Any:
    if isinstance(value, int):  # labels not logged: the bit numbers (1-based) that are set
        return [str(i + 1) for i in range(value.bit_length()) if value >> i & 1]
    return list(value)


def _bit(value: Any) -> Any:
    # BIT(64) values above 2^63-1 keep their bits as a negative long.
    return value - (1 << 64) if value >= 1 << 63 else value


def _decimal_text(value: Any) -> Any:
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def _unsigned_bigint(value: Any) -> Any:
    return Decimal(value)


def _is_binary(column: Column) -> bool:
    """Character columns in the binary collation (BINARY, VARBINARY, BLOB) hold bytes; so
    do BLOB/TEXT columns whose charset was not logged (they cannot be told apart then)."""
    if column.collation is None:
        return column.type_code in ft.BLOB_TYPES
    try:
        return codec_for_collation(column.collation) is None
    except LookupError:  # an unknown collation: its bytes are read as UTF-8 text
        return False


def column_mapping(column: Column) -> FieldMapping:
    """The Spark/Arrow type of one column and how its decoded values convert."""
    name = column.display_name
    t = column.type_code
    unsigned = bool(column.unsigned)

    def m(spark: str, arrow: pa.DataType, convert: Convert | None = None) -> FieldMapping:
        return FieldMapping(name, spark, arrow, convert)

    if t == ft.TINY:
        return m("smallint", pa.int16()) if unsigned else m("tinyint", pa.int8())
    if t == ft.SHORT:
        return m("int", pa.int32()) if unsigned else m("smallint", pa.int16())
    if t == ft.INT24:
        return m("int", pa.int32())
    if t == ft.LONG:
        return m("bigint", pa.int64()) if unsigned else m("int", pa.int32())
    if t == ft.LONGLONG:
        if unsigned:
            return m("decimal(20,0)", pa.decimal128(20, 0), _unsigned_bigint)
        return m("bigint", pa.int64())
    if t == ft.FLOAT:
        return m("float", pa.float32())
    if t == ft.DOUBLE:
        return m("double", pa.float64())
    if t in (ft.NEWDECIMAL, ft.DECIMAL):
        p, s = column.precision, column.scale
        if 0 < p <= MAX_DECIMAL_PRECISION:
            return m(f"decimal({p},{s})", pa.decimal128(p, s), _only(Decimal))
        return m("string", pa.string(), _decimal_text)
    if t in (ft.DATE, ft.NEWDATE):
        return m("date", pa.date32(), _only(dt.date))
    if t in (ft.DATETIME, ft.DATETIME2):
        return m("timestamp_ntz", pa.timestamp("us"), _datetime_ntz)
    if t in (ft.TIMESTAMP, ft.TIMESTAMP2):
        return m("timestamp", pa.timestamp("us", tz="UTC"), _timestamp)
    if t in (ft.TIME, ft.TIME2):
        return m("string", pa.string(), _time_text)
    if t == ft.YEAR:
        return m("int", pa.int32())
    if t == ft.BIT:
        return m("bigint", pa.int64(), _bit)
    if t == ft.JSON:
        return m("string", pa.string(), _json_text)
    if t == ft.ENUM:
        return m("string", pa.string(), _enum)
    if t == ft.SET:
        return m("array<string>", pa.list_(pa.string()), _set)
    if t == ft.GEOMETRY:
        return m("binary", pa.binary(), _binary)
    if t == ft.VECTOR:
        return m("array<float>", pa.list_(pa.float32()))
    if t == ft.BOOL:
        return m("boolean", pa.bool_(), bool)
    if t in ft.CHARACTER_TYPES:
        if column.text_type is not None:  # MariaDB UUID, INET6, INET4: their text
            return m("string", pa.string(), _text)
        if _is_binary(column):
            return m("binary", pa.binary(), _binary)
        return m("string", pa.string(), _text)
    if t == ft.NULL:
        return m("string", pa.string(), lambda v: None)
    return m("string", pa.string(), _text)  # unknown types: their text


# The change metadata every landed row carries, before the table's own columns.
METADATA: tuple[FieldMapping, ...] = (
    FieldMapping("_op", "string", pa.string(), None),
    FieldMapping("_transaction_id", "string", pa.string(), None),
    FieldMapping("_gtid", "string", pa.string(), None),
    FieldMapping("_xid", "string", pa.string(), None),
    FieldMapping("_commit_ts", "timestamp", pa.timestamp("us", tz="UTC"), None),
    FieldMapping("_seq", "bigint", pa.int64(), None),
    FieldMapping("_binlog_file", "string", pa.string(), None),
    FieldMapping("_binlog_pos", "bigint", pa.int64(), None),
)
METADATA_NAMES = tuple(f.name for f in METADATA)


def table_mappings(schema: TableSchema) -> tuple[FieldMapping, ...]:
    """The mapping of every column of ``schema``, in table order."""
    return tuple(column_mapping(c) for c in schema.columns)


def spark_schema(fields: tuple[FieldMapping, ...]) -> T.StructType:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, f.spark, True) for f in fields])


def columns_json(columns: tuple[tuple[str, str], ...]) -> str:
    """The Spark schema (JSON) of ``columns``: (name, Spark type name) pairs."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(name, spark_type(type_name), True)
                         for name, type_name in columns]).json()


_SIMPLE_TYPES = {"tinyint": "ByteType", "smallint": "ShortType", "int": "IntegerType",
                 "bigint": "LongType", "float": "FloatType", "double": "DoubleType",
                 "date": "DateType", "timestamp_ntz": "TimestampNTZType",
                 "timestamp": "TimestampType", "string": "StringType", "binary": "BinaryType",
                 "boolean": "BooleanType"}


def spark_type(text: str) -> T.DataType:
    """The Spark type named ``text`` (one of the names :func:`column_mapping` gives)."""
    from pyspark.sql import types as T

    if text.startswith("array<") and text.endswith(">"):
        return T.ArrayType(spark_type(text[6:-1]))
    if text.startswith("decimal(") and text.endswith(")"):
        precision, scale = text[8:-1].split(",")
        return T.DecimalType(int(precision), int(scale))
    simple = _SIMPLE_TYPES.get(text)
    if simple is None:
        raise ValueError(f"no Spark type is named {text!r} here")
    return getattr(T, simple)()


def arrow_schema(fields: tuple[FieldMapping, ...]) -> pa.Schema:
    return pa.schema([pa.field(f.name, f.arrow) for f in fields])


def signature(fields: tuple[FieldMapping, ...]) -> tuple[tuple[str, str], ...]:
    """What decides whether two schemas land as one DataFrame."""
    return tuple((f.name, f.spark_type) for f in fields)
