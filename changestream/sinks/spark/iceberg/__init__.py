"""The Iceberg landing: changelogs and mirrors (landing, mirror_*), DDL followed (ddl),
files the driver writes and commits (files, commits, DriverCommits.java), column types
(columns), the schema history's states in the warehouse (history) and upkeep
(maintenance)."""

from __future__ import annotations

from typing import Any

__all__ = ["IcebergLanding", "control_tables"]


def __getattr__(name: str) -> Any:
    # Imported when first used: the package's modules without PyArrow (commits, defaults)
    # import without the landing's.
    if name in __all__:
        from . import landing

        return getattr(landing, name)
    raise AttributeError(name)
