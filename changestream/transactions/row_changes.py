"""A rows event's rows as changes: ``before``/``after`` images and keys, named by the
table's shape (see :mod:`changestream.transactions.row_shapes`)."""

from __future__ import annotations

from typing import Any

from changestream.decoding.events import RowsEvent
from changestream.decoding.rows import ABSENT
from changestream.model.changes import Change
from changestream.transactions.row_shapes import SchemaShape


def direct_row_changes(event: RowsEvent, shape: SchemaShape, sql: str | None, file: str,
                       out: list[Change]) -> None:
    """The changes of a rows event whose images log every column, none left out: the
    images and keys come straight from the values."""
    schema = event.schema
    database, table = schema.database, schema.table
    names = shape.names
    pos = event.header.offset
    kind = event.kind
    append = out.append
    key = shape.direct_key
    if kind == "insert" or kind == "delete":
        insert = kind == "insert"
        if key is not None and len(key) == 1:
            (name, index), = key
            for i, values in enumerate(event.rows):
                image = dict(zip(names, values))
                pk = {name: values[index]}
                if insert:
                    append(Change(kind, database, table, None, image, pk, sql, file, pos,
                                  i, 0, False, schema))
                else:
                    append(Change(kind, database, table, image, None, pk, sql, file, pos,
                                  i, 0, False, schema))
            return
        for i, values in enumerate(event.rows):
            image = dict(zip(names, values))
            keys = {n: values[j] for n, j in key} if key is not None else None
            if insert:
                append(Change(kind, database, table, None, image, keys, sql, file, pos, i,
                              0, False, schema))
            else:
                append(Change(kind, database, table, image, None, keys, sql, file, pos, i,
                              0, False, schema))
        return
    for i, (old, new) in enumerate(event.rows):
        keys = {n: new[j] for n, j in key} if key is not None else None
        append(Change("update", database, table, dict(zip(names, old)),
                      dict(zip(names, new)), keys, sql, file, pos, i, 0, False, schema))

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
