"""The ColumnInfo actor: table schemas as of each TABLE_MAP, updated by DDL in binlog order."""

from __future__ import annotations

from typing import Any

import pykka

from changestream.column_info import ColumnInfo
from changestream.decoding.table_schema import TableSchema

from .messages import ResolveSchema, SchemaChange


class ColumnInfoActor(pykka.ThreadingActor):
    """Owns a :class:`~changestream.column_info.ColumnInfo`.

    The listener asks it to resolve each new TABLE_MAP and tells it each DDL; the mailbox
    keeps them in binlog order, so a TABLE_MAP after an ALTER sees the ALTER applied.
    """

    def __init__(self, column_info: ColumnInfo):
        super().__init__()
        self.column_info = column_info

    def on_receive(self, message: Any) -> TableSchema | None:
        if isinstance(message, ResolveSchema):
            return self.column_info.resolve(message.schema, message.header)
        if isinstance(message, SchemaChange):
            self.column_info.apply_ddl(message.ddl)
            return None
        raise TypeError(f"ColumnInfo actor got {type(message).__name__}")
