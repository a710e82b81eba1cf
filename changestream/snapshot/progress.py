"""How far a snapshot has got, saved in each position (``Position.snapshot``).

A restarted router reads on from the position and goes on with the snapshot after the last
chunk that position includes: the tables still to do (the current one first) and the key
of the last row delivered of it. Key values are kept as the text or bytes the server gave
them, and given back to it as they were.
"""

from __future__ import annotations

import base64
from dataclasses import field, replace
from typing import Any

from changestream.model.record import record


def encode_key(values: tuple[Any, ...] | None) -> list[Any] | None:
    """Key values as JSON: text as it is, bytes as ``{"b64": ...}``."""
    if values is None:
        return None
    return [{"b64": base64.b64encode(v).decode()} if isinstance(v, bytes | bytearray) else v
            for v in values]


def decode_key(values: list[Any] | None) -> tuple[Any, ...] | None:
    if values is None:
        return None
    return tuple(base64.b64decode(v["b64"]) if isinstance(v, dict) else v for v in values)


@record(frozen=True)
class SnapshotProgress:
    """``id`` names the snapshot (its records' transaction ids start with it); ``tables``
    (``db.table``) are still to do, the current one first; ``after`` is the key of the last
    row delivered of the current one (``None``: none yet); ``chunks``/``rows`` count what
    was delivered; ``total_rows`` is the server's estimate of all its tables' rows;
    ``read_until`` has, for each table read whole (no key), the binlog position it was read
    at: the stream leaves out that table's rows of transactions that begin before it, also
    after a restart from a position before it; ``where``: per table (``db.table``) read
    only in part, the SQL condition of the rows read."""

    id: str
    tables: tuple[str, ...]
    after: tuple[Any, ...] | None = None
    chunks: int = 0
    rows: int = 0
    total_rows: int = 0
    done_tables: tuple[str, ...] = field(default_factory=tuple)
    read_until: tuple[tuple[str, str, int], ...] = ()  # (db.table, file, pos)
    where: dict[str, str] = field(default_factory=dict)  # db.table -> its SQL condition

    @property
    def finished(self) -> bool:
        return not self.tables

    def chunk_done(self, last_key: tuple[Any, ...] | None, rows: int,
                   table_done: bool) -> SnapshotProgress:
        """The progress after a chunk of the current table: ``last_key`` its last row's key,
        ``rows`` how many it delivered, ``table_done`` whether the table is finished."""
        if table_done:
            return replace(self, tables=self.tables[1:], after=None, chunks=self.chunks + 1,
                           rows=self.rows + rows,
                           done_tables=self.done_tables + self.tables[:1])
        return replace(self, after=last_key, chunks=self.chunks + 1, rows=self.rows + rows)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tables": list(self.tables), "after": encode_key(self.after),
                "chunks": self.chunks, "rows": self.rows, "total_rows": self.total_rows,
                "done_tables": list(self.done_tables),
                "read_until": [list(r) for r in self.read_until],
                **({"where": dict(self.where)} if self.where else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SnapshotProgress:
        return cls(str(data["id"]), tuple(data.get("tables") or ()),
                   decode_key(data.get("after")), int(data.get("chunks") or 0),
                   int(data.get("rows") or 0), int(data.get("total_rows") or 0),
                   tuple(data.get("done_tables") or ()),
                   tuple((str(t), str(f), int(p)) for t, f, p in data.get("read_until") or ()),
                   {str(k): str(v) for k, v in (data.get("where") or {}).items()})
