"""How the driver encodes the Parquet files it writes into an Iceberg table.

The table's own compression properties hold, as Iceberg's writers read them:
``write.parquet.compression-codec`` (``zstd``, Iceberg's default, also when unset;
``snappy``, ``gzip``, ``lz4``, ``brotli``, ``uncompressed``) and
``write.parquet.compression-level`` (for ``zstd``, ``gzip`` and ``brotli``; unset: the
codec's own default level as Arrow has it, 1 for ``zstd``). A codec Arrow does not write
(``lzo``) leaves the table's files to Spark's writers.

Text and binary columns are dictionary-encoded (a column chunk falls back to plain encoding
once its dictionary page passes ``PARQUET_DICTIONARY_PAGE_BYTES``); numbers, times and
decimals are not: with the compression after it, a dictionary made their files no smaller
and took a tenth of the write's time (docs/performance.md).
"""

from __future__ import annotations

from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from changestream.model.errors import SinkError
from changestream.model.record import record

from ..types import PARQUET_DICTIONARY_PAGE_BYTES

#: Iceberg's codec names and Arrow's for them.
CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "lz4": "lz4",
          "brotli": "brotli", "uncompressed": "none"}
#: The codecs whose level the property sets (Iceberg ignores it for the others).
LEVELLED = frozenset({"zstd", "gzip", "brotli"})
LEVEL_PROPERTY = "write.parquet.compression-level"


@record(frozen=True)
class ParquetEncoding:
    """A table's Parquet codec (Arrow's name) and level (``None``: the codec's default)."""

    codec: str = "zstd"
    level: int | None = None

    @classmethod
    def of_table(cls, table: str, codec: str | None, level: str | None
                 ) -> ParquetEncoding | None:
        """The encoding Iceberg table ``table``'s properties ask for (``codec`` and
        ``level`` as the properties hold them); ``None`` for a codec Arrow does not
        write."""
        name = (codec or "zstd").strip().lower()
        arrow = CODECS.get(name)
        if arrow is None:
            return None
        if level is None or not level.strip() or name not in LEVELLED:
            return cls(arrow)
        try:
            number = int(level)
        except ValueError:
            raise SinkError(f"spark sink: table {table}'s {LEVEL_PROPERTY} is {level!r}, "
                            "not a whole number") from None
        try:
            pa.Codec(arrow, compression_level=number)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise SinkError(f"spark sink: table {table}'s {LEVEL_PROPERTY} is {number}, "
                            f"which {name} does not take ({exc})") from None
        return cls(arrow, number)

    def write(self, rows: pa.Table, where: IO[bytes]) -> None:
        """Write ``rows`` as one Parquet file to ``where``."""
        pq.write_table(rows, where, compression=self.codec, compression_level=self.level,
                       use_dictionary=dictionary_columns(rows.schema),
                       dictionary_pagesize_limit=PARQUET_DICTIONARY_PAGE_BYTES,
                       store_decimal_as_integer=True)


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns of ``schema`` written with a dictionary: text and binary ones."""
    return [f.name for f in schema if pa.types.is_string(f.type)
            or pa.types.is_large_string(f.type) or pa.types.is_binary(f.type)
            or pa.types.is_large_binary(f.type) or pa.types.is_fixed_size_binary(f.type)]
