"""The schema history: every table's definition at each binlog position.

Rows events of a server that does not log column names (``binlog_row_metadata=MINIMAL``,
MySQL 8's default) are named with the definition their table had when they were written.
The history is seeded from the server's catalog, advanced by replaying each DDL of the
binlog on a private shadow server of the same flavour, and stored with the position. See
docs/schema-history.md.
"""

from changestream.schema.definition import ColumnDefinition, TableDefinition
from changestream.schema.history import SchemaChangeSet, SchemaHistory, SchemaState
from changestream.schema.shadow import ShadowServer, ShadowSettings
from changestream.schema.startup import HistorySettings, OpenedHistory, open_history
from changestream.schema.store import HistoryStorage, SchemaHistoryStore
from changestream.schema.tracker import SchemaHistoryError, SchemaTracker

__all__ = [
    "ColumnDefinition",
    "HistorySettings",
    "HistoryStorage",
    "OpenedHistory",
    "SchemaChangeSet",
    "SchemaHistory",
    "SchemaHistoryError",
    "SchemaHistoryStore",
    "SchemaState",
    "SchemaTracker",
    "ShadowServer",
    "ShadowSettings",
    "TableDefinition",
    "open_history",
]
