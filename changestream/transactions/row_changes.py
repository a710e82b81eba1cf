"""A rows event's rows as changes: ``before``/``after`` images and keys, named by the
table's shape (see :mod:`changestream.transactions.row_shapes`)."""

from __future__ import annotations

from typing import Any

from changestream.decoding.events import RowsEvent
from changestream.decoding.rows import ABSENT
from changestream.model.changes import Change
from changestream.transactions.row_shapes import SchemaShape


def direct_images(kind: str, names: tuple[str, ...], key: tuple[tuple[str, int], ...] | None,
                  rows: list[Any]) -> list[tuple[str, Any, Any, Any]]:
    """``(op, before, after, primary key)`` of each row of a rows event of ``kind`` whose
    images log every column, none left out: straight from the values (``key``: the key
    columns' names and indexes). The one rule for row images both the router and the
    decode workers' fast path follow."""
    if kind == "update":
        if key is None:
            return [("update", dict(zip(names, old)), dict(zip(names, new)), None)
                    for old, new in rows]
        return [("update", dict(zip(names, old)), dict(zip(names, new)),
                 {n: new[j] for n, j in key}) for old, new in rows]
    if key is not None and len(key) == 1:
        (name, index), = key
        if kind == "insert":
            return [("insert", None, dict(zip(names, values)), {name: values[index]})
                    for values in rows]
        return [(kind, dict(zip(names, values)), None, {name: values[index]})
                for values in rows]
    if kind == "insert":
        return [("insert", None, dict(zip(names, values)),
                 {n: values[j] for n, j in key} if key is not None else None)
                for values in rows]
    return [(kind, dict(zip(names, values)), None,
             {n: values[j] for n, j in key} if key is not None else None) for values in rows]


def direct_row_changes(event: RowsEvent, shape: SchemaShape, sql: str | None, file: str,
                       out: list[Change]) -> None:
    """The changes of a rows event whose images log every column, none left out (see
    :func:`direct_images`)."""
    schema = event.schema
    database, table = schema.database, schema.table
    pos = event.header.offset
    out.extend([Change(op, database, table, before, after, pk, sql, file, pos, i, 0, False,
                       schema)
                for i, (op, before, after, pk) in enumerate(direct_images(
                    event.kind, shape.names, shape.direct_key, event.rows))])


def image_row_changes(event: RowsEvent, shape: SchemaShape, full: bool, sql: str | None,
                      file: str, out: list[Change]) -> None:
    """The changes of a rows event in general: columns not logged (``ABSENT``) or left
    out by the filter."""
    schema = event.schema
    database, table = schema.database, schema.table
    names, pk_names, excluded = shape.names, shape.pk_names, shape.excluded
    pos = event.header.offset
    kind = event.kind

    def image(values: list[Any]) -> dict[str, Any]:
        if full:
            d = dict(zip(names, values))
        else:
            d = {n: v for n, v in zip(names, values) if v is not ABSENT}
        for name in excluded:
            d.pop(name, None)
        return d

    def key(d: dict[str, Any]) -> dict[str, Any] | None:
        if pk_names is None:
            return None
        return {n: d.get(n) for n in pk_names}

    if kind == "insert":
        for i, values in enumerate(event.rows):
            after = image(values)
            out.append(Change("insert", database, table, None, after, key(after), sql,
                              file, pos, i, schema=schema))
    elif kind == "delete":
        for i, values in enumerate(event.rows):
            before = image(values)
            out.append(Change("delete", database, table, before, None, key(before), sql,
                              file, pos, i, schema=schema))
    else:
        for i, (old, new) in enumerate(event.rows):
            before, after = image(old), image(new)
            # The after image's key, where it logs the key columns; an image that logs
            # only what changed (binlog_row_image=MINIMAL) leaves them to the before image.
            pk = None if pk_names is None else {
                n: after[n] if n in after else before.get(n) for n in pk_names}
            out.append(Change("update", database, table, before, after, pk, sql, file,
                              pos, i, schema=schema))
