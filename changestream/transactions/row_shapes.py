"""How a table's row images become the ``before``/``after`` images and keys of changes.

A *shape* is worked out once per table schema (and change filter): the column names, the
key columns, the columns the filter leaves out, and whether images can be built straight
from the decoded values (no column left out, no two columns of the same name).
"""

from __future__ import annotations

from changestream.decoding.table_schema import TableSchema
from changestream.model.record import record
from changestream.transactions.filters import ChangeFilter


@record
class SchemaShape:
    """What building a change's images of ``schema`` takes."""

    schema: TableSchema
    names: tuple[str, ...]
    pk_names: tuple[str, ...] | None
    excluded: frozenset[str]
    # ``(name, index)`` of the key columns when images can be built straight from the
    # values (no column left out, names unique), else ``None``.
    direct_key: tuple[tuple[str, int], ...] | None
    direct: bool


class ShapeCache:
    """Shapes by schema, for one change filter (``None``: nothing filtered)."""

    def __init__(self, change_filter: ChangeFilter | None, limit: int = 10_000):
        self.filter = change_filter
        self.limit = limit
        self._shapes: dict[int, SchemaShape] = {}

    def shape(self, schema: TableSchema) -> SchemaShape:
        """The shape of ``schema`` (cached while the schema object lives)."""
        shape = self._shapes.get(id(schema))
        if shape is None or shape.schema is not schema:
            names = schema.column_names
            pk = schema.primary_key
            excluded = (self.filter.excluded_columns(schema.database, schema.table, names)
                        if self.filter else frozenset())
            pk_names = tuple(names[i] for i in pk if names[i] not in excluded) if pk else None
            direct = not excluded and len(set(names)) == len(names)
            direct_key = tuple((names[i], i) for i in pk) if direct and pk else None
            shape = SchemaShape(schema, names, pk_names or None, excluded, direct_key, direct)
            if len(self._shapes) > self.limit:
                self._shapes.clear()
            self._shapes[id(schema)] = shape
        return shape
