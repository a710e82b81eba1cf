"""The schema history: every table's definition at each binlog position.

Rows events of a server that does not log column names (``binlog_row_metadata=MINIMAL``,
MySQL 8's default) are named with the definition their table had when they were written.
The history is seeded from the server's catalog, advanced by replaying each DDL of the
binlog on a private shadow server of the same flavour, and stored with the position. See
docs/schema-history.md.
"""

from __future__ import annotations

import importlib
from typing import Any

# Loaded when first asked for: a decode worker needs the definitions, not the shadow server,
# the catalog reader and the MySQL client library behind them (about 10 MB per process).
_WHERE = {
    "ColumnDefinition": "definition", "TableDefinition": "definition",
    "SchemaChangeSet": "history", "SchemaHistory": "history", "SchemaState": "history",
    "ShadowServer": "shadow", "ShadowSettings": "shadow",
    "HistorySettings": "startup", "OpenedHistory": "startup", "open_history": "startup",
    "HistoryStorage": "store", "SchemaHistoryStore": "store",
    "SchemaHistoryError": "tracker", "SchemaTracker": "tracker",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
