"""The Iceberg tables changestream lands, read as other engines read them: pyiceberg and
DuckDB's iceberg extension (from their PyPI packages), from a table's metadata file (a
Hadoop catalog's table folder names its current one; a JDBC catalog's row does), with no
Spark. docs/lakehouse.md shows the same calls to users."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest


def metadata_file(table_dir: Path | str) -> Path | str:
    """The current metadata file of a Hadoop catalog's table (its version hint names it);
    a metadata file's location is itself."""
    if str(table_dir).endswith(".metadata.json"):
        return str(table_dir).removeprefix("file:")
    table_dir = Path(table_dir)
    version = (table_dir / "metadata" / "version-hint.text").read_text().strip()
    return table_dir / "metadata" / f"v{version}.metadata.json"


def pyiceberg_rows(table_dir: Path | str) -> list[dict[str, Any]]:
    """Every row of the table as pyiceberg reads it (deletes applied)."""
    pytest.importorskip("pyiceberg")
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(str(metadata_file(table_dir)))
    return table.scan().to_arrow().to_pylist()


def duckdb_connection() -> Any:
    """A DuckDB connection with the iceberg and avro extensions loaded from the
    ``duckdb-ext-*`` packages (DuckDB cannot download them here)."""
    pytest.importorskip("duckdb")
    import duckdb

    spec = importlib.util.find_spec("duckdb_ext")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("duckdb-ext-iceberg is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "extensions"
    con = duckdb.connect(config={"allow_unsigned_extensions": "true",
                                 "extension_directory": str(folder)})
    con.execute("LOAD avro")
    con.execute("LOAD iceberg")
    return con


def duckdb_rows(table_dir: Path | str) -> list[dict[str, Any]]:
    """Every row of the table as DuckDB's ``iceberg_scan`` reads it."""
    con = duckdb_connection()
    # through Arrow: DuckDB's own Python rows need pytz for time zones
    return con.execute("SELECT * FROM iceberg_scan(?)",
                       [str(metadata_file(table_dir))]).fetch_arrow_table().to_pylist()


def duckdb_count(table_dir: Path | str) -> int:
    """``SELECT count(*)`` of the table in DuckDB (the query equality deletes broke)."""
    con = duckdb_connection()
    return int(con.execute("SELECT count(*) FROM iceberg_scan(?)",
                           [str(metadata_file(table_dir))]).fetchone()[0])


def delete_file_kinds(table_dir: Path | str) -> set[str]:
    """The kinds of delete file the table's current snapshot applies (pyiceberg's view):
    ``position`` and/or ``equality``."""
    return {kind for kind, _ in delete_files(table_dir)}


def delete_files(table_dir: Path | str) -> list[tuple[str, str]]:
    """The delete files of the table's current snapshot: (kind, location)."""
    pytest.importorskip("pyiceberg")
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(str(metadata_file(table_dir)))
    snapshot = table.current_snapshot()
    found: list[tuple[str, str]] = []
    if snapshot is None:
        return found
    kinds = {DataFileContent.POSITION_DELETES: "position",
             DataFileContent.EQUALITY_DELETES: "equality"}
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            kind = kinds.get(entry.data_file.content)
            if kind is not None:
                found.append((kind, entry.data_file.file_path))
    return found
