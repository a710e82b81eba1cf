"""MySQL's PARTIAL_JSON diff format: parsing a logged ``Json_diff_vector`` and applying it.

:func:`decode_json_diffs` parses it into :class:`JsonDiff` objects (the format is in its
docstring; values decoded by :mod:`changestream.decoding.json_binary`) and
:func:`apply_json_diffs` applies them to a decoded before-image document with the same
semantics as the server's ``apply_json_diffs()``."""

from __future__ import annotations

import json
import struct
from functools import lru_cache
from typing import Any

from changestream.decoding.json_binary import JsonBinaryError, decode_json_at
from changestream.decoding.packed import read_packed_int
from changestream.model.record import record

__all__ = [
    "INSERT",
    "REMOVE",
    "REPLACE",
    "JsonDiff",
    "JsonDiffError",
    "apply_json_diffs",
    "decode_json_diffs",
]

_U32 = struct.Struct("<I").unpack_from


class JsonDiffError(ValueError):
    """A JSON diff cannot be applied to the given document (MySQL would reject it)."""


REPLACE = "replace"
INSERT = "insert"
REMOVE = "remove"
_OPERATIONS = (REPLACE, INSERT, REMOVE)


@record(frozen=True)
class JsonDiff:
    """One logical JSON diff: ``operation`` at ``path`` (MySQL path syntax, e.g. ``$.a[1]``).

    ``value`` is the decoded new value for 'replace' and 'insert' and ``None`` for 'remove'.
    """

    operation: str
    path: str
    value: Any = None


def decode_json_diffs(
    data: bytes | bytearray | memoryview, *, length_prefixed: bool = False
) -> list[JsonDiff]:
    """Parse the serialised diff vector of a partially updated JSON column.

    Partial updates (``binlog_row_value_options=PARTIAL_JSON``, rows event type 39):
    a JSON column flagged in the row's partial bitmap holds a serialised
    ``Json_diff_vector`` (``sql/json_diff.cc``) instead of a document::

        diff-vector ::= length (uint32, the column's length prefix) diff*
        diff        ::= operation (uint8: 0 REPLACE, 1 INSERT, 2 REMOVE)
                        path-length (packed int) path (utf8mb4, e.g. '$.a[1]')
                        [ value-length (packed int) value (binary JSON) ]   -- not for REMOVE

    ``data`` is the column value *after* its 4-byte length prefix (the prefix
    is the diff vector's length), i.e. the same bytes a full JSON value would
    occupy.  Pass ``length_prefixed=True`` to give the bytes including that
    4-byte prefix instead.  Raises :class:`JsonBinaryError` if malformed.
    """
    if type(data) is not bytes:
        data = bytes(data)
    pos = 0
    end = len(data)
    if length_prefixed:
        if end < 4:
            raise JsonBinaryError("truncated JSON diff vector length")
        end = min(end, 4 + _U32(data, 0)[0])
        pos = 4
    diffs: list[JsonDiff] = []
    try:
        while pos < end:
            op = data[pos]
            if op > 2:
                raise JsonBinaryError(f"invalid JSON diff operation {op} at offset {pos}")
            path_len, pos = read_packed_int(data, pos + 1)
            q = pos + path_len
            if q > end:
                raise JsonBinaryError(f"JSON diff path at offset {pos} exceeds the data")
            path = data[pos:q].decode()
            pos = q
            value = None
            if op != 2:
                value_len, pos = read_packed_int(data, pos)
                q = pos + value_len
                if q > end:
                    raise JsonBinaryError(f"JSON diff value at offset {pos} exceeds the data")
                value = decode_json_at(data, pos, q)
                pos = q
            diffs.append(JsonDiff(_OPERATIONS[op], path, value))
    except JsonBinaryError:
        raise
    except (ValueError, IndexError) as exc:
        raise JsonBinaryError(f"malformed JSON diff vector: {exc}") from None
    return diffs


# Path legs: (_MEMBER, name) | (_CELL, index) | (_CELL_FROM_END, n) for [last-n]
_MEMBER = 0
_CELL = 1
_CELL_FROM_END = 2
_SPACES = " \t\n\r\f\v"
_DIGITS = "0123456789"


@lru_cache(maxsize=4096)
def _parse_path(path: str) -> tuple[tuple[int, Any], ...]:
    """Parse a MySQL JSON path without wildcards, ellipses or ranges."""
    n = len(path)

    def skip(i: int) -> int:
        while i < n and path[i] in _SPACES:
            i += 1
        return i

    def bad(i: int, why: str) -> JsonDiffError:
        return JsonDiffError(f"unsupported JSON path {path!r} at {i}: {why}")

    i = skip(0)
    if i >= n or path[i] != "$":
        raise bad(i, "must start with '$'")
    legs: list[tuple[int, Any]] = []
    i = skip(i + 1)
    while i < n:
        c = path[i]
        if c == ".":
            i = skip(i + 1)
            if i >= n:
                raise bad(i, "member name expected")
            if path[i] == '"':
                j = i + 1
                while j < n and path[j] != '"':
                    j += 2 if path[j] == "\\" else 1
                if j >= n:
                    raise bad(i, "unterminated quoted member name")
                text = path[i : j + 1]
                i = j + 1
            else:
                j = i
                while j < n and path[j] not in _SPACES and path[j] not in "[.*":
                    j += 1
                if j == i:
                    raise bad(i, "wildcards are not supported")
                text = '"' + path[i:j] + '"'
                i = j
            try:
                name = json.loads(text)
            except ValueError:
                raise bad(i, "invalid member name") from None
            legs.append((_MEMBER, name))
        elif c == "[":
            i = skip(i + 1)
            kind = _CELL
            if path.startswith("last", i):
                kind = _CELL_FROM_END
                i = skip(i + 4)
                if i < n and path[i] == "-":
                    i = skip(i + 1)
                elif i < n and path[i] == "]":
                    legs.append((kind, 0))
                    i = skip(i + 1)
                    continue
                else:
                    raise bad(i, "'-' or ']' expected")
            j = i
            while j < n and path[j] in _DIGITS:
                j += 1
            if j == i:
                raise bad(i, "array index expected")
            index = int(path[i:j])
            i = skip(j)
            if i >= n or path[i] != "]":
                raise bad(i, "']' expected (ranges are not supported)")
            legs.append((kind, index))
            i += 1
        else:
            raise bad(i, "'.' or '[' expected")
        i = skip(i)
    return tuple(legs)


def _mysql_key_order(key: str) -> tuple[int, bytes]:
    raw = key.encode()
    return len(raw), raw


def _locate(container: Any, leg: tuple[int, Any]) -> Any:
    """Return the dict key / list position the leg designates, or ``None`` if absent."""
    kind, arg = leg
    if kind == _MEMBER:
        if isinstance(container, dict):
            return arg if arg in container else None
        return None
    if isinstance(container, list):
        size = len(container)
        if arg < size:
            return arg if kind == _CELL else size - 1 - arg
    return None


def _copy(node: Any) -> Any:
    if isinstance(node, dict):
        return dict(node)
    if isinstance(node, list):
        return list(node)
    return None


def _apply_one(document: Any, diff: JsonDiff) -> Any:
    legs = _parse_path(diff.path)
    op = diff.operation
    if op not in _OPERATIONS:
        raise JsonDiffError(f"unknown JSON diff operation {op!r}")
    if not legs:
        # The server never logs diffs on the root; treat a REPLACE as a new document.
        if op == REPLACE:
            return diff.value
        raise JsonDiffError(f"cannot {op} the root of a JSON document")
    root = _copy(document)
    if root is None:
        raise JsonDiffError(f"path {diff.path!r} not found: the document is not a container")
    parent = root
    for leg in legs[:-1]:
        where = _locate(parent, leg)
        if where is None:
            raise JsonDiffError(f"path {diff.path!r} not found in the document")
        child = _copy(parent[where])
        if child is None:
            raise JsonDiffError(f"path {diff.path!r} not found in the document")
        parent[where] = child
        parent = child

    leg = legs[-1]
    if op == REPLACE:
        where = _locate(parent, leg)
        if where is None:
            raise JsonDiffError(f"cannot replace {diff.path!r}: path not found")
        parent[where] = diff.value
    elif op == REMOVE:
        where = _locate(parent, leg)
        if where is None:
            raise JsonDiffError(f"cannot remove {diff.path!r}: path not found")
        del parent[where]
    else:  # INSERT
        kind, arg = leg
        if kind == _MEMBER and isinstance(parent, dict):
            if arg in parent:
                raise JsonDiffError(f"cannot insert {diff.path!r}: member exists")
            parent[arg] = diff.value
            # Keep MySQL's member order (byte length, then bytes), as the after-image has it.
            items = sorted(parent.items(), key=lambda kv: _mysql_key_order(kv[0]))
            parent.clear()
            parent.update(items)
        elif kind != _MEMBER and isinstance(parent, list):
            size = len(parent)
            if kind == _CELL:
                pos = min(arg, size)
            else:
                pos = size - 1 - arg if arg < size else 0
            parent.insert(pos, diff.value)
        else:
            raise JsonDiffError(f"cannot insert {diff.path!r}: parent has the wrong type")
    return root


def apply_json_diffs(document: Any, diffs: list[JsonDiff] | tuple[JsonDiff, ...]) -> Any:
    """Apply ``diffs`` in order to a decoded JSON document and return the result.

    ``document`` is not modified: containers on the changed paths are copied,
    everything else is shared with the input.  Semantics follow the server's
    ``apply_json_diffs()``: REPLACE needs an existing target, INSERT adds an
    object member (which must not exist yet; members are kept in MySQL's key
    order) or inserts into an array (an index past the end appends), REMOVE
    deletes an existing member or element.  Raises :class:`JsonDiffError` when
    the server would reject the diff.
    """
    for diff in diffs:
        document = _apply_one(document, diff)
    return document
