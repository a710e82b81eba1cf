"""Row functions for text-protocol rows (:mod:`changestream.snapshot.result_set`), generated
per table. A row is its values in order, each a length-encoded string (``0xFB``: NULL).

- :func:`values_reader`: the values as the server sent them (bytes, ``None`` for NULL);
- :func:`encoded_reader`: the row's key in the decoder's values, and its ``after`` and
  ``primary_key`` already as JSON, exactly as :mod:`changestream.encoding.records` writes
  them. Common types go from the server's text straight to JSON (integers as they are,
  ZEROFILL converted; DECIMAL, DATE, TIME quoted; DATETIME, TIMESTAMP with the ``T`` and
  ``+00:00``; text as JSON strings), the rest through :mod:`changestream.snapshot.values`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import Column, TableSchema
from changestream.encoding.records import json_default
from changestream.encoding.temporal_text import column_formats
from changestream.native import compiled
from changestream.snapshot import values

ValuesReader = Callable[[bytes, int], tuple[Any, ...]]
EncodedReader = Callable[[bytes, int], tuple[tuple[Any, ...], tuple[bytes, bytes]]]
"""``(buffer, offset) -> (key, (after JSON, primary_key JSON))``."""

_JSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS
_NULL = 251


def long_value(buf: bytes, i: int) -> tuple[bytes, int]:
    """A value whose length takes 2, 3 or 8 bytes (prefix ``0xFC``, ``0xFD``, ``0xFE``) at
    ``buf[i]``, and the offset after it."""
    prefix = buf[i]
    width = 2 if prefix == 0xFC else 3 if prefix == 0xFD else 8
    start = i + 1 + width
    length = int.from_bytes(buf[i + 1:start], "little")
    return buf[start:start + length], start + length


def _read_value(v: str, indent: str) -> list[str]:
    """Source that reads one value into ``v`` and moves ``i`` past it."""
    return [
        f"{indent}n = buf[i]",
        f"{indent}if n < {_NULL}:",
        f"{indent}    {v} = buf[i + 1:i + 1 + n]",
        f"{indent}    i += 1 + n",
        f"{indent}elif n == {_NULL}:",
        f"{indent}    {v} = None",
        f"{indent}    i += 1",
        f"{indent}else:",
        f"{indent}    {v}, i = _long(buf, i)",
    ]


def values_reader(count: int) -> ValuesReader:
    """A function reading a row of ``count`` values."""
    lines = ["def read(buf, i):"]
    for j in range(count):
        lines += _read_value(f"v{j}", "    ")
    lines.append(f"    return ({''.join(f'v{j}, ' for j in range(count))})")
    return _compiled(lines, {"_long": long_value}, "read", f"<{count} values>")


# Column kinds: how a value's text becomes its JSON (the compiled module numbers them
# alike).
NUMBER, DECIMAL, QUOTED, DATETIME, TIMESTAMP, TEXT, GENERIC, SKIP = range(8)

# Each kind's JSON from the text ``v`` (not NULL) in Python; ``{g}`` is the column's writer.
_PYTHON_PIECES = {
    # Leading zeros (ZEROFILL) are not JSON.
    NUMBER: "v if v[0] != 48 or len(v) == 1 else {g}(v)",
    DECIMAL: "b'\"' + v + b'\"' if v[0] != 48 or v[1:2] == b'.' else {g}(v)",
    QUOTED: "b'\"' + v + b'\"'",
    DATETIME: "b'\"' + v.replace(b' ', b'T', 1) + b'\"'",
    TIMESTAMP: "b'\"' + v.replace(b' ', b'T', 1) + b'+00:00\"'",
    TEXT: "_dumps(v.decode())",
    GENERIC: "{g}(v)",
}


def column_kind(column: Column) -> int:
    """How ``column``'s text becomes JSON (see the module docstring)."""
    t = column.type_code
    if t in values.INTEGERS and t != ft.YEAR:
        return NUMBER
    if t == ft.NEWDECIMAL:
        return DECIMAL
    if t in (ft.DATE, ft.NEWDATE, ft.TIME, ft.TIME2):
        return QUOTED
    if t in (ft.DATETIME, ft.DATETIME2):
        return DATETIME
    if t in (ft.TIMESTAMP, ft.TIMESTAMP2):
        return TIMESTAMP
    if values.converter(column) is values.utf8 and values.text_converter(column) is \
            values.as_read:
        return TEXT
    return GENERIC


def encoded_reader(schema: TableSchema, key: Sequence[str],
                   excluded: frozenset[str] = frozenset(),
                   compiled: bool | None = None) -> EncodedReader:
    """A function reading a row of every column of ``schema`` (in order) into its key
    values (the columns ``key``) and its record's ``after`` and ``primary_key`` JSON, the
    ``excluded`` columns left out of both: the compiled one where it was built (or
    ``compiled`` says so), else Python generated for the table."""
    names = schema.column_names
    kinds = [SKIP if name in excluded else column_kind(c)
             for name, c in zip(names, schema.columns)]
    formats = dict(column_formats(schema))
    writers = [_generic(c, formats.get(n)) for n, c in zip(names, schema.columns)]
    key_converters = [values.converter(c) if n in key else None
                      for n, c in zip(names, schema.columns)]
    key_columns = [names.index(k) for k in key]
    kept = [j for j, kind in enumerate(kinds) if kind != SKIP]
    prefixes = [(b"{" if kept and j == kept[0] else b",") + orjson.dumps(n) + b":"
                for j, n in enumerate(names)]
    pk_columns = [i for i in schema.primary_key or () if kinds[i] != SKIP]
    pk_prefixes = [(b"{" if n == 0 else b",") + orjson.dumps(names[i]) + b":"
                   for n, i in enumerate(pk_columns)]
    compiled_module = native() if compiled is None or compiled else None
    if compiled and compiled_module is None:
        raise RuntimeError("the compiled snapshot rows module is not built")
    if compiled_module is not None:
        return compiled_module.RowEncoder(
            bytes(kinds), tuple(prefixes), tuple(writers), tuple(key_columns),
            tuple(key_converters), tuple(pk_columns), tuple(pk_prefixes))
    namespace: dict[str, Any] = {"_long": long_value, "_dumps": orjson.dumps}
    lines = ["def read(buf, i):"]
    for j, kind in enumerate(kinds):
        lines += _read_value("v", "    ")
        if key_converters[j] is not None:
            namespace[f"_c{j}"] = key_converters[j]
            lines.append(f"    k{j} = None if v is None else _c{j}(v)")
        if kind != SKIP:
            namespace[f"_g{j}"] = writers[j]
            piece = _PYTHON_PIECES[kind].format(g=f"_g{j}")
            lines.append(f"    p{j} = b'null' if v is None else {piece}")
    after = _joined([(prefixes[j], f"p{j}") for j in kept])
    pk = _joined([(pk_prefixes[n], f"p{j}") for n, j in enumerate(pk_columns)]) \
        if pk_columns else repr(b"null")
    keys = "".join(f"k{j}, " for j in key_columns)
    lines.append(f"    return ({keys}), ({after}, {pk})")
    return _compiled(lines, namespace, "read", f"<snapshot row {schema.qualified_name}>")


def _joined(pieces: list[tuple[bytes, str]]) -> str:
    """Source joining a JSON object of ``(prefix, piece variable)`` pairs."""
    if not pieces:
        return repr(b"{}")
    parts = [f"{prefix!r}, {piece}" for prefix, piece in pieces]
    return f"b''.join(({', '.join(parts)}, b'}}'))"


def native() -> Any:
    """The compiled module, when it was built and not turned off
    (``CHANGESTREAM_PURE_PYTHON=1``)."""
    return compiled("changestream.snapshot._text_rows")


def _generic(column: Column, text_format: Callable[[Any], Any] | None) -> Callable[[bytes],
                                                                                  bytes]:
    """A value as the decoder gives it, written as a record writes it."""
    convert = values.converter(column)
    dumps, default = orjson.dumps, json_default

    if text_format is None:
        def write(raw: bytes) -> bytes:
            return dumps(convert(raw), default=default, option=_JSON_OPTIONS)
    else:
        def write(raw: bytes) -> bytes:
            return dumps(text_format(convert(raw)), default=default, option=_JSON_OPTIONS)
    return write


def _compiled(lines: list[str], names: dict[str, Any], function: str, label: str) -> Any:
    namespace = dict(names)
    # The source is built above from type codes and JSON-encoded column names only.
    exec(compile("\n".join(lines), label, "exec"), namespace)
    return namespace[function]
