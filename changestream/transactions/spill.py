"""Changes of a big transaction kept on disk until its commit, so memory stays bounded."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from typing import BinaryIO

from changestream.decoding.table_schema import TableSchema
from changestream.model.changes import Change


class SpillFile:
    """An append-only file of changes, read back in order in parts, then deleted.

    Schemas are kept in memory once each and the changes refer to them by number, so a
    million changes of one table store the table's shape once.
    """

    def __init__(self, directory: str | None = None):
        import tempfile  # only a big transaction spills: not imported at every start

        fd, self.path = tempfile.mkstemp(prefix="changestream-spill-", suffix=".bin",
                                         dir=directory)
        self._file: BinaryIO = os.fdopen(fd, "w+b")
        os.unlink(self.path)  # gone with the process, whatever happens
        self._schemas: list[TableSchema | None] = [None]
        self._schema_ids: dict[int, int] = {}
        self.count = 0

    def _schema_id(self, schema: TableSchema | None) -> int:
        if schema is None:
            return 0
        found = self._schema_ids.get(id(schema))
        if found is None:
            found = len(self._schemas)
            self._schemas.append(schema)
            self._schema_ids[id(schema)] = found
        return found

    def write(self, changes: list[Change]) -> None:
        """Append ``changes`` (their ``transaction`` is not stored; it is set on reading)."""
        rows = [(c.op, c.database, c.table, c.before, c.after, c.primary_key, c.sql, c.file,
                 c.pos, c.row, self._schema_id(c.schema)) for c in changes]
        pickle.dump(rows, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self.count += len(changes)

    def read(self) -> Iterator[list[Change]]:
        """The changes in the order written, in the chunks they were written in."""
        self._file.flush()
        self._file.seek(0)
        schemas = self._schemas
        while True:
            try:
                rows = pickle.load(self._file)
            except EOFError:
                return
            yield [Change(op, db, table, before, after, pk, sql, file, pos, row,
                          schema=schemas[sid])
                   for op, db, table, before, after, pk, sql, file, pos, row, sid in rows]

    def close(self) -> None:
        self._file.close()
