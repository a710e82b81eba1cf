"""The shape of a table as a TABLE_MAP event (and, later, the ColumnInfo layer) knows it."""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any

from changestream.decoding import field_types as ft
from changestream.model.record import record


@record(frozen=True)
class Column:
    """One column of a table as logged.

    ``type_code`` is the real type (ENUM and SET rather than the STRING they are logged as).
    Fields the server did not log are ``None``: ``name`` without binlog_row_metadata=FULL,
    ``unsigned`` and ``collation`` without at least MINIMAL metadata (MySQL 8.0.1+/MariaDB 10.5+).
    """

    index: int
    type_code: int
    metadata: int = 0
    nullable: bool = True
    name: str | None = None
    unsigned: bool | None = None
    collation: int | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    geometry_type: int | None = None
    visible: bool = True
    max_length: int = 0
    length_bytes: int = 0
    precision: int = 0
    scale: int = 0
    fsp: int = 0
    bits: int = 0
    # MariaDB's UUID, INET6 and INET4 are logged as BINARY(16)/BINARY(4); the schema history
    # knows them ("uuid", "inet6", "inet4") and their values are then given as text.
    text_type: str | None = None

    @property
    def type_name(self) -> str:
        return ft.type_name(self.type_code)

    @property
    def display_name(self) -> str:
        """The column's name, or ``@N`` (1-based, as mysqlbinlog prints) when it is unknown."""
        return self.name if self.name is not None else f"@{self.index + 1}"


BINARY_COLLATION = 63


def may_hold_address(schema: TableSchema) -> bool:
    """Whether a MariaDB table may have UUID/INET6/INET4 columns (logged as BINARY(16) or
    BINARY(4)), whose type only the schema history knows."""
    return any(c.type_code == ft.STRING and c.collation == BINARY_COLLATION
               and c.max_length in (4, 16) and c.text_type is None for c in schema.columns)


@record
class TableSchema:
    """A table's columns and key as known when a rows event is decoded."""

    database: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[int, ...] | None = None
    names_logged: bool = False
    signedness_logged: bool = False
    charsets_logged: bool = False
    source: str = "table_map"
    column_names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.column_names = tuple(c.display_name for c in self.columns)

    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"

    def with_columns(self, columns: tuple[Column, ...], **changes: Any) -> TableSchema:
        """A copy with other columns (for the ColumnInfo layer's enrichment)."""
        return replace(self, columns=columns, **changes)
